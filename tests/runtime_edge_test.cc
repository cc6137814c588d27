// Concurrency, never blocking, and bad input at the runtime's entry points.

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <time.h>

#include <spool/config.h>
#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "runtime/test_hooks.h"
#include "storage/task_store.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {
using spool::testing::Await;
using spool::testing::Ok;
using spool::testing::OpenOrDie;

using namespace std::chrono_literals;
using spool::testing::TempDir;

Options DiskOptions(const TempDir& dir) {
  Options options;
  options.path = dir.Sub("q");
  options.workers = 4;
  return options;
}

TEST(RuntimeStressTest, TenThousandTasksFromEightThreadsRunExactlyOnce) {
  TempDir dir;
  auto runtime = OpenOrDie(DiskOptions(dir));
  std::mutex mutex;
  std::map<TaskId, int> runs;
  ASSERT_TRUE(runtime
                  ->RegisterHandler("t",
                                    [&](TaskContext& task) {
                                      std::lock_guard<std::mutex> lock(mutex);
                                      runs[task.id()]++;
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(runtime->Start().ok());
  constexpr int kThreads = 8;
  constexpr int kPerThread = 1250;
  std::vector<std::vector<Ticket>> tickets(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        tickets[t].push_back(runtime->Enqueue("t", std::to_string(i)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<TaskId> ids;
  for (auto& per_thread : tickets) {
    for (auto& ticket : per_thread) {
      auto stored = Await(ticket.stored);
      ASSERT_TRUE(stored.ok()) << stored.status().ToString();
      ids.insert(*stored);
    }
  }
  ASSERT_EQ(ids.size(), size_t{kThreads * kPerThread}) << "ids must be unique";
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  {
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_EQ(runs.size(), ids.size());
    for (const auto& [id, count] : runs) {
      ASSERT_EQ(count, 1) << "task " << id << " ran " << count << " times";
      ASSERT_EQ(ids.count(id), 1u);
    }
  }
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->of(TaskStatus::kSucceeded), ids.size());
  EXPECT_EQ(counts->total(), ids.size());
}

TEST(RuntimeNonBlockingTest, EnqueueReturnsWhileTheWriterIsStalled) {
  TempDir dir;
  std::atomic<bool> stall{false};
  std::atomic<bool> release{false};
  std::mutex mutex;
  std::set<std::thread::id> commit_threads;
  TestHooks hooks;
  hooks.before_commit = [&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      commit_threads.insert(std::this_thread::get_id());
    }
    while (stall && !release) std::this_thread::sleep_for(1ms);
  };
  std::unique_ptr<Runtime> runtime;
  ASSERT_TRUE(OpenWithHooks(DiskOptions(dir), hooks, &runtime).ok());
  ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());

  stall = true;
  std::vector<Ticket> tickets;
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) tickets.push_back(runtime->Enqueue("t", "x"));
  auto elapsed = std::chrono::steady_clock::now() - started;
  // 1,000 calls while no commit can finish: they must all have returned,
  // well under the time the writer is held.
  EXPECT_LT(elapsed, 2s);
  EXPECT_FALSE(tickets.front().stored.Ready());
  // Reads do not wait for the writer either.
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  release = true;
  for (auto& ticket : tickets) ASSERT_TRUE(Await(ticket.stored).ok());
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(commit_threads.count(std::this_thread::get_id()), 0u)
      << "storage work ran on the caller's thread";
}

class BadInputTest : public ::testing::Test {
 protected:
  TempDir dir_;
};

TEST_F(BadInputTest, EmptyTypeAndOversizedPayloadAreRejectedAndTheQueueGoesOn) {
  Options options = DiskOptions(dir_);
  options.max_payload_bytes = 1024;
  auto runtime = OpenOrDie(options);
  ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
  ASSERT_TRUE(runtime->Start().ok());

  auto empty = Await(runtime->Enqueue("", "x").stored);
  EXPECT_TRUE(empty.status().IsInvalidArgument());
  EXPECT_NE(empty.status().message().find("type must not be empty"),
            std::string::npos);

  auto big = Await(runtime->Enqueue("t", std::string(1025, 'x')).stored);
  EXPECT_TRUE(big.status().IsInvalidArgument());
  EXPECT_NE(big.status().message().find("1025 bytes"), std::string::npos)
      << big.status().ToString();

  auto unknown = Await(runtime->Enqueue("nope", "x").stored);
  EXPECT_TRUE(unknown.status().IsNotFound());
  EXPECT_NE(unknown.status().message().find("'nope'"), std::string::npos);

  EnqueueOptions bad_delay;
  bad_delay.delay = -1s;
  EXPECT_TRUE(Await(runtime->Enqueue("t", "x", bad_delay).stored)
                  .status()
                  .IsInvalidArgument());
  EnqueueOptions bad_retry;
  bad_retry.retry = RetryPolicy::Exponential(0, 1s, 2s);
  EXPECT_TRUE(Await(runtime->Enqueue("t", "x", bad_retry).stored)
                  .status()
                  .IsInvalidArgument());

  // A batch with one bad task stores nothing and names the bad one.
  std::vector<TaskSpec> batch = {{"t", "a", {}}, {"", "b", {}}};
  auto batch_result = Await(runtime->EnqueueBatch(batch).stored);
  EXPECT_TRUE(batch_result.status().IsInvalidArgument());
  EXPECT_NE(batch_result.status().message().find("task 1 of the batch"),
            std::string::npos);

  auto fine = Await(runtime->Enqueue("t", std::string(1024, 'x')).stored);
  ASSERT_TRUE(fine.ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  auto counts = Await(runtime->CountByStatus());
  EXPECT_EQ(counts->of(TaskStatus::kSucceeded), 1u);
  EXPECT_EQ(counts->total(), 1u);
}

TEST_F(BadInputTest, ACorruptRecordIsReportedAndSetAsideWhileOthersRun) {
  Options options = DiskOptions(dir_);
  std::vector<TaskId> ids;
  {
    auto runtime = OpenOrDie(options);
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    for (int i = 0; i < 10; ++i) {
      auto stored = Await(runtime->Enqueue("t", "x").stored);
      ASSERT_TRUE(stored.ok());
      ids.push_back(*stored);
    }
  }
  TaskId broken = ids[4];
  {
    storage::StoreOptions store_options;
    store_options.path = options.path;
    std::unique_ptr<storage::TaskStore> store;
    ASSERT_TRUE(storage::TaskStore::Open(store_options, &store).ok());
    std::string bytes;
    ASSERT_TRUE(store
                    ->GetStoredForTesting(storage::ColumnFamily::kTasks,
                                          storage::StateKey(broken), &bytes)
                    .ok());
    for (size_t i = 0; i < bytes.size(); i += 7) bytes[i] ^= 0x5a;
    ASSERT_TRUE(store->PutRawForTesting(storage::StateKey(broken), bytes).ok());
  }
  auto runtime = OpenOrDie(options);
  std::atomic<int> runs{0};
  ASSERT_TRUE(runtime
                  ->RegisterHandler("t",
                                    [&](TaskContext&) {
                                      runs++;
                                      return Status::OK();
                                    })
                  .ok());
  auto info = Await(runtime->GetTask(broken));
  EXPECT_TRUE(info.status().IsCorruption()) << info.status().ToString();
  EXPECT_NE(info.status().message().find("task " + std::to_string(broken)),
            std::string::npos);
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runs.load(), 9);
  for (TaskId id : ids) {
    if (id == broken) continue;
    auto other = Await(runtime->GetTask(id));
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(other->status, TaskStatus::kSucceeded);
  }
  // Set aside: no longer readable as a task, and not retried; GetTask says
  // so.
  auto aside = Await(runtime->GetTask(broken));
  EXPECT_TRUE(aside.status().IsCorruption());
  EXPECT_NE(aside.status().message().find("is set aside"), std::string::npos)
      << aside.status().ToString();
}

TEST_F(BadInputTest, AnUnknownTypeInStorageFailsThatTaskOnly) {
  Options options = DiskOptions(dir_);
  TaskId orphan = 0;
  {
    auto runtime = OpenOrDie(options);
    ASSERT_TRUE(runtime->RegisterHandler("kept", Ok).ok());
    ASSERT_TRUE(runtime->RegisterHandler("dropped", Ok).ok());
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(Await(runtime->Enqueue("kept", "x").stored).ok());
    }
    auto stored = Await(runtime->Enqueue("dropped", "x").stored);
    ASSERT_TRUE(stored.ok());
    orphan = *stored;
  }
  auto runtime = OpenOrDie(options);
  ASSERT_TRUE(runtime->RegisterHandler("kept", Ok).ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  auto info = Await(runtime->GetTask(orphan));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->status, TaskStatus::kFailed);
  EXPECT_EQ(info->attempts, 1u) << "an unknown type must not be retried";
  EXPECT_NE(info->last_error.find("no handler is registered for task type "
                                  "'dropped'"),
            std::string::npos)
      << info->last_error;
  auto counts = Await(runtime->CountByStatus());
  EXPECT_EQ(counts->of(TaskStatus::kSucceeded), 5u);
}

TEST_F(BadInputTest, AMalformedConfigFileIsRefusedWithFileKeyAndReason) {
  std::string path = dir_.Sub("bad.toml");
  std::ofstream(path) << "[runtime]\nworkers = \"four\"\n";
  Options options;
  Status s = LoadOptions(path, {}, &options);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("runtime.workers"), std::string::npos);
  std::ofstream(path) << "[runtime\nworkers = 4\n";
  s = LoadOptions(path, {}, &options);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST_F(BadInputTest, CallsAfterCloseFailWithClosed) {
  auto runtime = OpenOrDie(DiskOptions(dir_));
  ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
  ASSERT_TRUE(Await(runtime->Close()).ok());
  ASSERT_TRUE(Await(runtime->Close()).ok()) << "Close is idempotent";
  EXPECT_TRUE(Await(runtime->Enqueue("t", "x").stored).status().IsClosed());
  EXPECT_TRUE(Await(runtime->GetTask(1)).status().IsClosed());
  EXPECT_TRUE(Await(runtime->CountByStatus()).status().IsClosed());
  EXPECT_TRUE(Await(runtime->Drain()).status().IsClosed());
  EXPECT_TRUE(runtime->Start().IsClosed());
  EXPECT_TRUE(runtime->RegisterHandler("u", Ok).IsClosed());
}

TEST_F(BadInputTest, RegisterHandlerRules) {
  auto runtime = OpenOrDie(DiskOptions(dir_));
  EXPECT_TRUE(runtime->RegisterHandler("", Ok).IsInvalidArgument());
  EXPECT_TRUE(runtime->RegisterHandler("t", Handler()).IsInvalidArgument());
  ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
  EXPECT_TRUE(runtime->RegisterHandler("t", Ok).IsFailedPrecondition());
  ASSERT_TRUE(runtime->Start().ok());
  EXPECT_TRUE(runtime->Start().IsFailedPrecondition());
  EXPECT_TRUE(runtime->RegisterHandler("u", Ok).IsFailedPrecondition());
}

TEST_F(BadInputTest, SecondOpenInTheSameProcessIsBusy) {
  auto first = OpenOrDie(DiskOptions(dir_));
  std::unique_ptr<Runtime> second;
  Status s = Runtime::Open(DiskOptions(dir_), &second);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(second, nullptr);
}

}  // namespace
}  // namespace spool
