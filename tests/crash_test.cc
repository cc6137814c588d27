// Real processes killed with SIGKILL: what was acknowledged survives, what
// was running is recovered, a claim that never started spends no attempt,
// and a task that kills its process cannot loop.

#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <vector>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "runtime/test_hooks.h"
#include "storage/task_store.h"
#include "tests/child_process.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using spool::testing::ChildProcess;
using spool::testing::TempDir;

constexpr auto kWait = 60s;

std::unique_ptr<Runtime> OpenOrDie(const std::string& path) {
  Options options;
  options.path = path;
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(options, &runtime);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return runtime;
}

template <class T>
Result<T> Await(const Future<T>& future) {
  EXPECT_TRUE(future.WaitFor(kWait)) << "timed out";
  return future.Wait();
}

TEST(CrashTest, AcknowledgedEnqueuesSurviveSigkill) {
  TempDir dir;
  std::set<TaskId> acked;
  for (int round = 0; round < 3; ++round) {
    ChildProcess child({SPOOL_CRASH_CHILD, "enqueue", dir.Sub("q")});
    // Kill at a different depth each round, while enqueues are in flight.
    size_t target = acked.size() + 50 + 700 * round;
    while (acked.size() < target) {
      auto line = child.ReadLine(kWait);
      ASSERT_TRUE(line.has_value()) << "child stopped acknowledging";
      ASSERT_EQ(line->rfind("ack ", 0), 0u) << *line;
      acked.insert(std::stoull(line->substr(4)));
    }
    child.Kill();
  }
  auto runtime = OpenOrDie(dir.Sub("q"));
  for (TaskId id : acked) {
    auto info = Await(runtime->GetTask(id));
    ASSERT_TRUE(info.ok()) << "acknowledged task " << id
                           << " is missing: " << info.status().ToString();
    EXPECT_EQ(info->status, TaskStatus::kPending);
  }
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_GE(counts->of(TaskStatus::kPending), acked.size());
}

// Runs `count` tasks whose handlers hang in a child with 4 workers (of one
// attempt each when `once`), and kills it once 4 have started. Returns the
// started ids.
std::set<TaskId> HangAndKill(const std::string& path, int count, bool once) {
  std::vector<std::string> args = {SPOOL_CRASH_CHILD, "hang", path,
                                   std::to_string(count)};
  if (once) args.push_back("--once");
  std::set<TaskId> started;
  ChildProcess child(args);
  while (started.size() < 4) {
    auto line = child.ReadLine(kWait);
    EXPECT_TRUE(line.has_value()) << "child never started its tasks";
    if (!line) return started;
    EXPECT_EQ(line->rfind("started ", 0), 0u) << *line;
    started.insert(std::stoull(line->substr(8)));
  }
  child.Kill();
  return started;
}

TEST(CrashTest, RunningTasksAreRecoveredWithTheirAttemptCounted) {
  TempDir dir;
  std::set<TaskId> started = HangAndKill(dir.Sub("q"), 8, /*once=*/false);
  ASSERT_EQ(started.size(), 4u);
  auto runtime = OpenOrDie(dir.Sub("q"));
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->of(TaskStatus::kRunning), 0u);
  EXPECT_EQ(counts->of(TaskStatus::kRetryScheduled), 4u);
  EXPECT_EQ(counts->of(TaskStatus::kPending), 4u);
  for (TaskId id : started) {
    auto info = Await(runtime->GetTask(id));
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->status, TaskStatus::kRetryScheduled);
    EXPECT_EQ(info->attempts, 1u);
    EXPECT_NE(info->last_error.find("interrupted"), std::string::npos);
  }
  std::mutex mutex;
  std::map<TaskId, uint32_t> attempts_seen;
  ASSERT_TRUE(runtime
                  ->RegisterHandler("work",
                                    [&](TaskContext& task) {
                                      std::lock_guard<std::mutex> lock(mutex);
                                      attempts_seen[task.id()] = task.attempt();
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(attempts_seen.size(), 8u);
  for (TaskId id : started) EXPECT_EQ(attempts_seen[id], 2u) << id;
  counts = Await(runtime->CountByStatus());
  EXPECT_EQ(counts->of(TaskStatus::kSucceeded), 8u);
}

TEST(CrashTest, AnInterruptedAttemptIsInTheHistoryAndTheNextAttemptIsTold) {
  TempDir dir;
  // 4 tasks, 4 workers: every one starts, then the process is killed.
  std::set<TaskId> started = HangAndKill(dir.Sub("q"), 4, /*once=*/false);
  ASSERT_EQ(started.size(), 4u);
  auto runtime = OpenOrDie(dir.Sub("q"));
  for (TaskId id : started) {
    auto info = Await(runtime->GetTask(id));
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->last_error, kInterruptedAttemptError);
    ASSERT_EQ(info->failures.size(), 1u) << id;
    EXPECT_EQ(info->failures[0].attempt, 1u);
    EXPECT_EQ(info->failures[0].error, kInterruptedAttemptError);
    EXPECT_EQ(info->interrupted_attempts, 1u);
  }
  std::mutex mutex;
  std::map<TaskId, std::vector<bool>> told;  // per attempt, in order
  auto record = [&](TaskContext& task) {
    std::lock_guard<std::mutex> lock(mutex);
    told[task.id()].push_back(task.previous_attempt_interrupted());
  };
  HandlerOptions flaky_options;
  flaky_options.retry = RetryPolicy::Fixed(2, 0us);
  ASSERT_TRUE(runtime
                  ->RegisterHandler("work",
                                    [&](TaskContext& task) {
                                      record(task);
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "flaky",
                      [&](TaskContext& task) {
                        record(task);
                        return task.attempt() == 1 ? Status::Aborted("boom")
                                                   : Status::OK();
                      },
                      flaky_options)
                  .ok());
  // An ordinary failure, and a task that never failed, are not told.
  auto flaky = Await(runtime->Enqueue("flaky", "x").stored);
  auto fresh = Await(runtime->Enqueue("work", "x").stored);
  ASSERT_TRUE(flaky.ok() && fresh.ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  // The retry is due at once, but Drain need not wait for a timer.
  ASSERT_TRUE(spool::testing::WaitUntil([&] {
    std::lock_guard<std::mutex> lock(mutex);
    return told[*flaky].size() >= 2;
  }));
  std::lock_guard<std::mutex> lock(mutex);
  for (TaskId id : started) {
    EXPECT_EQ(told[id], std::vector<bool>{true}) << id;
  }
  EXPECT_EQ(told[*flaky], (std::vector<bool>{false, false}));
  EXPECT_EQ(told[*fresh], std::vector<bool>{false});
}

// HangAndKill with one attempt per task (the rest are queued or claimed
// ahead). Returns the started ids, and sets *claimed to the tasks the kill
// left running on disk: started, or claimed ahead.
std::set<TaskId> HangAndKillOnce(const std::string& path, int count,
                                 size_t* claimed) {
  std::set<TaskId> started = HangAndKill(path, count, /*once=*/true);
  storage::StoreOptions store_options;
  store_options.path = path;
  std::unique_ptr<storage::TaskStore> store;
  Status s = storage::TaskStore::Open(store_options, &store);
  EXPECT_TRUE(s.ok()) << s.ToString();
  *claimed = store ? store->CountOf(TaskStatus::kRunning) : 0;
  return started;
}

TEST(CrashTest, ClaimsThatNeverStartedSpendNoAttempt) {
  TempDir dir;
  size_t claimed = 0;
  std::set<TaskId> started = HangAndKillOnce(dir.Sub("q"), 12, &claimed);
  ASSERT_EQ(started.size(), 4u);
  EXPECT_GT(claimed, started.size()) << "nothing was claimed ahead";
  auto runtime = OpenOrDie(dir.Sub("q"));
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  // The started attempts count, and these tasks allow one: failed. The
  // ones claimed ahead never ran: back in the queue, attempt not spent.
  EXPECT_EQ(counts->of(TaskStatus::kFailed), 4u);
  EXPECT_EQ(counts->of(TaskStatus::kPending), 8u);
  EXPECT_EQ(counts->of(TaskStatus::kRunning), 0u);
  for (TaskId id : started) {
    auto info = Await(runtime->GetTask(id));
    EXPECT_EQ(info->status, TaskStatus::kFailed) << id;
    EXPECT_EQ(info->attempts, 1u) << id;
  }
  std::atomic<int> ran{0};
  ASSERT_TRUE(runtime
                  ->RegisterHandler("work",
                                    [&](TaskContext& task) {
                                      EXPECT_EQ(task.attempt(), 1u);
                                      ++ran;
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(ran.load(), 8);
}

// Pauses and gates are stored: after a SIGKILL the reopened queue still
// holds the paused type's task and the gated one, until they are lifted.
TEST(CrashTest, PausesAndGatesSurviveSigkill) {
  TempDir dir;
  TaskId work = 0, gated = 0;
  {
    ChildProcess child({SPOOL_CRASH_CHILD, "controls", dir.Sub("q")});
    auto line = child.ReadLine(kWait);
    ASSERT_TRUE(line.has_value()) << "the child never got ready";
    std::istringstream words(*line);
    std::string ready;
    words >> ready >> work >> gated;
    ASSERT_TRUE(ready == "ready" && work != 0 && gated != 0) << *line;
    child.Kill();
  }
  auto runtime = OpenOrDie(dir.Sub("q"));
  std::atomic<int> ran{0};
  auto count = [&ran](TaskContext&) {
    ++ran;
    return Status::OK();
  };
  HandlerOptions needs_gate;
  needs_gate.requires_gates.emplace(std::vector<std::string>{"g"});
  ASSERT_TRUE(runtime->RegisterHandler("work", count).ok());
  ASSERT_TRUE(runtime->RegisterHandler("gated", count, needs_gate).ok());
  ASSERT_TRUE(runtime->Start().ok());
  // Paused and gated tasks do not hold a Drain up.
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(Await(runtime->GetTask(work))->status, TaskStatus::kPending);
  EXPECT_EQ(Await(runtime->GetTask(gated))->status, TaskStatus::kPending);

  ASSERT_TRUE(runtime->ResumeType("work").ok());
  ASSERT_TRUE(runtime->SetGate("g", true).ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(Await(runtime->GetTask(work))->status, TaskStatus::kSucceeded);
  EXPECT_EQ(Await(runtime->GetTask(gated))->status, TaskStatus::kSucceeded);
}

TEST(CrashTest, AfterAMachineRestartEveryClaimCountsItsAttempt) {
  TempDir dir;
  size_t claimed = 0;
  std::set<TaskId> started = HangAndKillOnce(dir.Sub("q"), 12, &claimed);
  ASSERT_EQ(started.size(), 4u);
  {
    // The start log was written in another boot: its last records may be
    // lost, so it cannot show that a claim did not start.
    std::fstream log(dir.Sub("q") + "/spool-starts",
                     std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(log.is_open());
    log.seekp(16);
    log.write("another-boot", 12);
  }
  auto runtime = OpenOrDie(dir.Sub("q"));
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->of(TaskStatus::kFailed), claimed);
  EXPECT_EQ(counts->of(TaskStatus::kPending), 12u - claimed);
}

TEST(CrashTest, AHandlerThatKillsItsProcessEndsFailedWithoutLooping) {
  TempDir dir;
  int crashes = 0;
  bool idle = false;
  for (int run = 0; run < 6 && !idle; ++run) {
    std::vector<std::string> args = {SPOOL_CRASH_CHILD, "suicide",
                                     dir.Sub("q")};
    if (run == 0) args.push_back("--enqueue");
    ChildProcess child(args);
    for (;;) {
      auto line = child.ReadLine(kWait);
      if (!line) break;  // the handler killed the child
      if (*line == "idle") idle = true;
      if (line->rfind("started ", 0) == 0) ++crashes;
    }
    auto status = child.Wait(kWait);
    ASSERT_TRUE(status.has_value());
  }
  EXPECT_TRUE(idle) << "the task kept running after its attempts ran out";
  EXPECT_EQ(crashes, 3);
  auto runtime = OpenOrDie(dir.Sub("q"));
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->of(TaskStatus::kFailed), 1u);
  EXPECT_EQ(counts->total(), 1u);
  // Every attempt was interrupted, and the task says so exactly.
  TaskQuery failed;
  failed.status = TaskStatus::kFailed;
  auto page = Await(runtime->ListTasks(failed));
  ASSERT_TRUE(page.ok() && page->tasks.size() == 1u);
  EXPECT_EQ(page->tasks[0].attempts, 3u);
  EXPECT_EQ(page->tasks[0].interrupted_attempts, 3u);
  auto json = Await(runtime->GetTaskJson(page->tasks[0].id));
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"interrupted_attempts\":3,"), std::string::npos)
      << *json;
}

TEST(CrashTest, ASecondProcessCannotOpenAHeldDirectory) {
  TempDir dir;
  ChildProcess child({SPOOL_CRASH_CHILD, "hang", dir.Sub("q"), "1"});
  ASSERT_TRUE(child.ReadLine(kWait).has_value());
  Options options;
  options.path = dir.Sub("q");
  std::unique_ptr<Runtime> runtime;
  Status s = Runtime::Open(options, &runtime);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("q")), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace spool
