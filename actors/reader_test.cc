// The reader pool under reader deaths: the race resqlite hit (a query handed
// to a reader that is gone) must cost nothing but a retry.

#include "actors/reader.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <spool/future.h>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "tests/store_testing.h"

namespace spool::actors {
namespace {

using namespace std::chrono_literals;
using spool::testing::TempDir;
using spool::testing::WaitUntil;

// The pool's current readers, as its on_reader_started hook reports them.
class LiveReaders {
 public:
  void Started(uint32_t index, const reader_actor& reader) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (readers_.size() <= index) readers_.resize(index + 1);
    readers_[index] = reader;
    ++started_;
  }

  // How many readers the pool started, replacements included.
  size_t started() {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_;
  }

  // Kills reader `index`, as a crash of its thread would. A reader that
  // died and is not replaced yet is not killed again.
  void Kill(uint32_t index) {
    reader_actor reader;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (index < readers_.size()) reader = readers_[index];
    }
    if (reader) caf::anon_send_exit(reader, caf::exit_reason::kill);
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    readers_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<reader_actor> readers_;
  size_t started_ = 0;
};

class ReaderPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::StoreOptions options;
    options.path = dir_.Sub("db");
    options.durability = Durability::kMemory;
    ASSERT_TRUE(storage::TaskStore::Open(options, &store_).ok());
    storage::WriteTxn txn(store_.get());
    for (TaskId id = 1; id <= 100; ++id) {
      spool::testing::InsertTask(
          &txn, spool::testing::PendingTask(id, "t", txn.NextSequence()));
    }
    ASSERT_TRUE(store_->Commit(&txn).ok());
    config_.set("scheduler.max-threads", size_t{2});
    system_ = std::make_unique<caf::actor_system>(config_);
  }

  void TearDown() override {
    if (pool_) {
      EXPECT_TRUE(Stop().ok());
    }
    pool_ = nullptr;
    readers_->Clear();
    system_.reset();
  }

  void Spawn(uint32_t readers) {
    ReaderPoolConfig config;
    config.store = store_.get();
    config.readers = readers;
    config.on_reader_started = [live = readers_](uint32_t index,
                                                 const reader_actor& reader) {
      live->Started(index, reader);
    };
    pool_ = SpawnReaderPool(*system_, std::move(config));
    // So that the first kills find every reader running.
    ASSERT_TRUE(WaitUntil([&] { return readers_->started() >= readers; }));
    // This thread spawned an actor: let go of the system, or its destructor
    // waits for this thread.
    caf::logger::set_current_actor_system(nullptr);
  }

  Status Stop() {
    Promise<void> stopped;
    caf::anon_send(pool_, stop_atom::value,
                   Completion([stopped](const Status& s) {
                     stopped.Set(Result<void>(s));
                   }));
    EXPECT_TRUE(stopped.GetFuture().WaitFor(30s)) << "the pool did not stop";
    pool_ = nullptr;
    return stopped.GetFuture().Ready() ? stopped.GetFuture().Wait().status()
                                       : Status::TimedOut("stop");
  }

  // A query that reads task (n % 100) + 1 and resolves `promise` with it.
  ReadJob Query(uint64_t n, Promise<uint64_t> promise,
                std::atomic<uint64_t>* runs) {
    return MakeReadJob(
        [n, promise, runs](const storage::TaskStore::ReadView& view) {
          runs->fetch_add(1);
          storage::TaskBytes task;
          Status s = view.GetTask(n % 100 + 1, &task);
          if (s.ok()) {
            promise.Set(n);
          } else {
            promise.Set(s);
          }
        },
        [promise](const Status& s) { promise.Set(s); });
  }

  TempDir dir_;
  std::unique_ptr<storage::TaskStore> store_;
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  reader_pool_actor pool_;
  std::shared_ptr<LiveReaders> readers_ = std::make_shared<LiveReaders>();
};

TEST_F(ReaderPoolTest, KillingReadersWhileThousandsWaitLosesNoQuery) {
  Spawn(3);
  constexpr uint64_t kQueries = 30000;
  std::vector<Promise<uint64_t>> promises(kQueries);
  std::atomic<uint64_t> runs{0};
  std::atomic<bool> sending{true};
  std::atomic<int> kills{0};
  // Kills readers at random while the queries flow in, so that deaths land
  // in every phase: idle, holding a batch, right after reporting idle.
  std::thread killer([&] {
    std::mt19937 rng(1);
    while (sending.load() || kills.load() < 50) {
      readers_->Kill(static_cast<uint32_t>(rng() % 3));
      kills.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 300));
    }
  });
  std::vector<std::thread> senders;
  for (int t = 0; t < 2; ++t) {
    senders.emplace_back([&, t] {
      for (uint64_t n = t; n < kQueries; n += 2) {
        caf::anon_send(pool_, read_atom::value, Query(n, promises[n], &runs));
      }
    });
  }
  for (auto& sender : senders) sender.join();
  sending = false;
  killer.join();

  size_t ok = 0;
  size_t aborted = 0;
  for (uint64_t n = 0; n < kQueries; ++n) {
    auto future = promises[n].GetFuture();
    ASSERT_TRUE(future.WaitFor(60s)) << "query " << n << " never answered";
    const auto& result = future.Wait();
    if (result.ok()) {
      EXPECT_EQ(*result, n);
      ++ok;
    } else {
      // Only a query whose readers died kMaxReadDispatches times fails.
      EXPECT_TRUE(result.status().IsAborted()) << result.status().ToString();
      EXPECT_NE(result.status().message().find("stopped 3 times"),
                std::string::npos)
          << result.status().ToString();
      ++aborted;
    }
  }
  EXPECT_GE(kills.load(), 50);
  EXPECT_EQ(ok + aborted, kQueries);
  EXPECT_LT(aborted, kQueries / 100) << "deaths should cost a retry, not "
                                        "the query";
  // Queries handed to a dying reader ran again elsewhere; none ran never.
  EXPECT_GE(runs.load(), ok);
  // The pool still works with new readers, and stops cleanly.
  Promise<uint64_t> after;
  caf::anon_send(pool_, read_atom::value, Query(7, after, &runs));
  ASSERT_TRUE(after.GetFuture().WaitFor(30s));
  EXPECT_TRUE(after.GetFuture().Wait().ok());
  EXPECT_TRUE(Stop().ok());
}

TEST_F(ReaderPoolTest, EveryReaderDeadAtOnceStillAnswersEverything) {
  Spawn(2);
  constexpr uint64_t kQueries = 5000;
  std::vector<Promise<uint64_t>> promises(kQueries);
  std::atomic<uint64_t> runs{0};
  for (uint64_t n = 0; n < kQueries; ++n) {
    if (n % 500 == 0) {
      readers_->Kill(0);
      readers_->Kill(1);
    }
    caf::anon_send(pool_, read_atom::value, Query(n, promises[n], &runs));
  }
  for (uint64_t n = 0; n < kQueries; ++n) {
    auto future = promises[n].GetFuture();
    ASSERT_TRUE(future.WaitFor(60s)) << "query " << n << " never answered";
    EXPECT_TRUE(future.Wait().ok() || future.Wait().status().IsAborted());
  }
  EXPECT_TRUE(Stop().ok());
}

TEST_F(ReaderPoolTest, StopAnswersQueuedQueriesAndLaterOnesFailClosed) {
  Spawn(1);
  std::atomic<uint64_t> runs{0};
  std::vector<Promise<uint64_t>> promises(2000);
  for (uint64_t n = 0; n < promises.size(); ++n) {
    caf::anon_send(pool_, read_atom::value, Query(n, promises[n], &runs));
  }
  reader_pool_actor pool = pool_;
  EXPECT_TRUE(Stop().ok());
  for (auto& promise : promises) {
    ASSERT_TRUE(promise.GetFuture().WaitFor(30s));
    EXPECT_TRUE(promise.GetFuture().Wait().ok());
  }
  // Sent to a pool that has stopped: the message is dropped, and the drop
  // guard answers instead of leaving the caller waiting forever.
  Promise<uint64_t> late;
  caf::anon_send(pool, read_atom::value, Query(1, late, &runs));
  ASSERT_TRUE(late.GetFuture().WaitFor(30s)) << "a dropped query must answer";
  EXPECT_TRUE(late.GetFuture().Wait().status().IsClosed())
      << late.GetFuture().Wait().status().ToString();
}

TEST(MakeReadJobTest, DroppedJobFailsOnceAndAnsweredJobDoesNot) {
  std::atomic<int> fails{0};
  {
    ReadJob job = MakeReadJob([](const storage::TaskStore::ReadView&) {},
                              [&](const Status&) { fails++; });
    ReadJob copy = job;  // copies share one guard
  }
  EXPECT_EQ(fails.load(), 1);
  {
    ReadJob job = MakeReadJob([](const storage::TaskStore::ReadView&) {},
                              [&](const Status&) { fails++; });
    job.fail(Status::Aborted("x"));
  }
  EXPECT_EQ(fails.load(), 2);
}

}  // namespace
}  // namespace spool::actors
