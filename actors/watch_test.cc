// The watcher against a fake reader pool that holds each run until the test
// lets it go, so that runs, changes and subscriptions interleave exactly as
// the test says: coalescing, suppression, and which run a late subscriber
// waits for.

#include "actors/watch.h"

#include <chrono>
#include <deque>
#include <mutex>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "tests/testing.h"

namespace spool::actors {
namespace {

using namespace std::chrono_literals;
using spool::testing::TempDir;
using spool::testing::WaitUntil;

// Jobs the watcher sent, waiting for the test to run them.
struct HeldJobs {
  std::mutex mutex;
  std::deque<ReadJob> jobs;
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    return jobs.size();
  }
};

reader_pool_actor::behavior_type FakePool(reader_pool_actor::pointer,
                                          std::shared_ptr<HeldJobs> held) {
  return {
      [held](read_atom, ReadJob& job) {
        std::lock_guard<std::mutex> lock(held->mutex);
        held->jobs.push_back(std::move(job));
      },
      [](idle_atom, uint32_t) {},
      [](stop_atom, Completion& done) { done(Status::OK()); },
  };
}

// A query whose result is whatever `version` holds when it runs.
class VersionQuery final : public LiveQuery {
 public:
  explicit VersionQuery(std::shared_ptr<std::atomic<int>> version)
      : version_(std::move(version)) {}
  const std::string& key() const override { return key_; }
  const WatchScope& scope() const override { return scope_; }
  uint64_t Run(const storage::TaskStore::ReadView&, bool have_last,
               uint64_t last_hash,
               std::shared_ptr<const void>* result) const override {
    int v = version_->load();
    auto hash = static_cast<uint64_t>(v) + 1000;
    if (!have_last || hash != last_hash) {
      *result = std::make_shared<const Result<int>>(v);
    }
    return hash;
  }
  std::shared_ptr<const void> Error(const Status& error,
                                    uint64_t* hash) const override {
    *hash = 1;
    return std::make_shared<const Result<int>>(error);
  }

 private:
  std::shared_ptr<std::atomic<int>> version_;
  std::string key_ = "version";
  WatchScope scope_;  // kAny
};

class Recording final : public WatchSubscriber {
 public:
  void Offer(const std::shared_ptr<const void>& result) override {
    std::lock_guard<std::mutex> lock(mutex_);
    seen_.push_back(**std::static_pointer_cast<const Result<int>>(result));
  }
  void Close() override {}
  std::vector<int> seen() {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_;
  }

 private:
  std::mutex mutex_;
  std::vector<int> seen_;
};

class WatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::StoreOptions options;
    options.path = dir_.Sub("db");
    options.durability = Durability::kMemory;
    ASSERT_TRUE(storage::TaskStore::Open(options, &store_).ok());
    config_.set("scheduler.max-threads", size_t{2});
    system_ = std::make_unique<caf::actor_system>(config_);
    pool_ = system_->spawn(FakePool, held_);
    watcher_ = SpawnWatcher(*system_, WatcherConfig{pool_, nullptr});
    caf::logger::set_current_actor_system(nullptr);
  }
  void TearDown() override {
    Promise<void> stopped;
    caf::anon_send(watcher_, stop_atom::value,
                   Completion([stopped](const Status& s) {
                     stopped.Set(Result<void>(s));
                   }));
    EXPECT_TRUE(stopped.GetFuture().WaitFor(30s));
    {
      // Jobs still held answer "dropped" to a watcher that is gone.
      std::lock_guard<std::mutex> lock(held_->mutex);
      held_->jobs.clear();
    }
    caf::anon_send_exit(pool_, caf::exit_reason::user_shutdown);
    watcher_ = nullptr;
    pool_ = nullptr;
    system_.reset();
  }

  // Waits until the watcher has handled everything sent before, and the
  // pool has received every run the watcher sent meanwhile; returns the
  // watcher's counters.
  WatchStats Sync() {
    Promise<WatchStats> stats;
    caf::anon_send(
        watcher_, stats_atom::value,
        WatchStatsCallback([stats](const WatchStats& s) { stats.Set(s); }));
    EXPECT_TRUE(stats.GetFuture().WaitFor(30s));
    // The watcher sent its runs before it answered, so this reaches the
    // pool after them.
    Promise<void> pool_done;
    caf::anon_send(pool_, stop_atom::value,
                   Completion([pool_done](const Status& s) {
                     pool_done.Set(Result<void>(s));
                   }));
    EXPECT_TRUE(pool_done.GetFuture().WaitFor(30s));
    return stats.GetFuture().Wait().value_or(WatchStats{});
  }

  void Subscribe(uint64_t id, std::shared_ptr<Recording> sub) {
    caf::anon_send(watcher_, watch_atom::value,
                   WatchRequest{id, query_, std::move(sub)});
  }

  void Change() {
    ChangeSet changes;
    changes.ids = {1};
    changes.statuses = 1;
    caf::anon_send(watcher_, changed_atom::value, changes);
  }

  // Runs the oldest held job, and waits until the watcher took its result.
  void RunOne() {
    ReadJob job;
    {
      std::lock_guard<std::mutex> lock(held_->mutex);
      ASSERT_FALSE(held_->jobs.empty()) << "no run is held";
      job = std::move(held_->jobs.front());
      held_->jobs.pop_front();
    }
    uint64_t runs_before = Sync().runs;
    auto view = store_->NewReadView();
    job.run(*view);
    ASSERT_TRUE(WaitUntil([&] {
      WatchStats s = Sync();
      return s.in_flight == 0 || s.runs > runs_before;
    }));
  }

  TempDir dir_;
  std::unique_ptr<storage::TaskStore> store_;
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  std::shared_ptr<HeldJobs> held_ = std::make_shared<HeldJobs>();
  reader_pool_actor pool_;
  watch_actor watcher_;
  std::shared_ptr<std::atomic<int>> version_ =
      std::make_shared<std::atomic<int>>(1);
  std::shared_ptr<const LiveQuery> query_ =
      std::make_shared<VersionQuery>(version_);
};

TEST_F(WatcherTest, OneRunInFlightChangesMeanwhileMakeExactlyOneFollowUp) {
  auto a = std::make_shared<Recording>();
  Subscribe(1, a);
  Sync();
  ASSERT_EQ(held_->size(), 1u);
  for (int i = 0; i < 10; ++i) Change();
  WatchStats stats = Sync();
  EXPECT_EQ(held_->size(), 1u) << "a second run while one is in flight";
  EXPECT_EQ(stats.coalesced, 9u);
  version_->store(2);
  RunOne();  // the initial run, which read version 2
  EXPECT_EQ(a->seen(), (std::vector<int>{2}));
  ASSERT_EQ(held_->size(), 1u) << "exactly one follow-up";
  RunOne();  // the follow-up: unchanged, so nothing is delivered
  EXPECT_EQ(a->seen(), (std::vector<int>{2}));
  EXPECT_EQ(held_->size(), 0u);
  stats = Sync();
  EXPECT_EQ(stats.runs, 2u);
  EXPECT_EQ(stats.unchanged, 1u);
}

TEST_F(WatcherTest, SubscribersWaitOnlyForTheRunThatSawTheirJoin) {
  // A joins; its run starts. A change arrives during the run (dirty), then
  // B joins. The run's snapshot may predate the change, so B waits for the
  // follow-up; A, whose join the run did see, gets the run's result at once.
  auto a = std::make_shared<Recording>();
  auto b = std::make_shared<Recording>();
  Subscribe(1, a);
  Sync();
  Change();
  Subscribe(2, b);
  Sync();
  version_->store(5);
  RunOne();  // run 1, dirty when it returns
  EXPECT_EQ(a->seen(), (std::vector<int>{5}));
  EXPECT_TRUE(b->seen().empty()) << "run 1 may predate B's join";
  // Another change arrives while the follow-up runs: B must not be put off
  // again, or a steady stream of changes would starve it.
  Change();
  Sync();
  RunOne();  // run 2 (the follow-up), dirty again
  EXPECT_EQ(b->seen(), (std::vector<int>{5})) << "B starved";
  EXPECT_EQ(a->seen(), (std::vector<int>{5})) << "A saw no change";
  version_->store(6);
  RunOne();  // run 3
  EXPECT_EQ(a->seen(), (std::vector<int>{5, 6}));
  EXPECT_EQ(b->seen(), (std::vector<int>{5, 6}));
  // C joins while nothing runs: the last result, at once, and no run.
  auto c = std::make_shared<Recording>();
  uint64_t runs = Sync().runs;
  Subscribe(3, c);
  WatchStats stats = Sync();
  EXPECT_EQ(c->seen(), (std::vector<int>{6}));
  EXPECT_EQ(stats.runs, runs);
  EXPECT_EQ(stats.queries, 1u);
  EXPECT_EQ(stats.subscriptions, 3u);
}

TEST_F(WatcherTest, UnwatchDropsTheQueryWithItsLastSubscriber) {
  auto a = std::make_shared<Recording>();
  Subscribe(1, a);
  Sync();
  caf::anon_send(watcher_, unwatch_atom::value, uint64_t{1});
  WatchStats stats = Sync();
  EXPECT_EQ(stats.queries, 0u);
  EXPECT_EQ(stats.in_flight, 0u);
  RunOne();  // the run of a query nobody watches any more
  EXPECT_TRUE(a->seen().empty());
  Change();
  EXPECT_EQ(Sync().runs, 1u) << "a dropped query must not run again";
}

}  // namespace
}  // namespace spool::actors
