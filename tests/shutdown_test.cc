// Shutdown and re-entry on a real clock and a real disk: handlers that call
// into their own runtime, Close from inside a handler, Close with a handler
// that will not finish, and a runtime destroyed under load without Close.

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/harness.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {
using spool::testing::Await;
using spool::testing::Ok;
using spool::testing::OpenOrDie;

using namespace std::chrono_literals;
using spool::testing::Gate;
using spool::testing::TempDir;

constexpr auto kWait = 30s;

Options DiskOptions(const TempDir& dir) {
  Options options;
  options.path = dir.Sub("q");
  options.workers = 4;
  options.close_timeout = 10s;
  return options;
}

// Handlers run on worker threads of their own, so a handler may wait on its
// runtime's futures: enqueue, read, cancel and list from inside a handler.
TEST(ReentryTest, AHandlerCanCallAndAwaitItsOwnRuntime) {
  TempDir dir;
  auto runtime = OpenOrDie(DiskOptions(dir));
  Runtime* self = runtime.get();
  std::atomic<TaskId> child{0};
  std::atomic<int> checks_passed{0};
  ASSERT_TRUE(runtime->RegisterHandler("child", Ok).ok());
  ASSERT_TRUE(runtime->RegisterHandler("idle", Ok).ok());
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "parent",
                      [&](TaskContext& task) {
                        auto stored = Await(self->Enqueue("child", "c").stored);
                        if (!stored.ok()) return stored.status();
                        child = *stored;
                        auto me = Await(self->GetTask(task.id()));
                        if (me.ok() && me->status == TaskStatus::kRunning) {
                          ++checks_passed;
                        }
                        EnqueueOptions later;
                        later.delay = 1h;
                        auto victim =
                            Await(self->Enqueue("idle", "v", later).stored);
                        if (victim.ok() && Await(self->Cancel(*victim)).ok()) {
                          ++checks_passed;
                        }
                        TaskQuery query;
                        query.type = "parent";
                        auto page = Await(self->ListTasks(query));
                        if (page.ok() && page->tasks.size() == 1)
                          ++checks_passed;
                        return Status::OK();
                      })
                  .ok());
  ASSERT_TRUE(runtime->Start().ok());
  auto parent = Await(runtime->Enqueue("parent", "p").stored);
  ASSERT_TRUE(parent.ok()) << parent.status().ToString();
  ASSERT_TRUE(spool::testing::WaitUntil(
      [&] {
        auto info = Await(runtime->GetTask(*parent));
        return info.ok() && info->status == TaskStatus::kSucceeded;
      },
      kWait));
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(checks_passed.load(), 3);
  ASSERT_NE(child.load(), 0u);
  EXPECT_EQ(Await(runtime->GetTask(child.load()))->status,
            TaskStatus::kSucceeded);
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

// Close from inside a handler returns at once; the close completes when the
// handler has returned, and its outcome is stored.
TEST(ReentryTest, CloseFromInsideAHandlerDoesNotDeadlock) {
  TempDir dir;
  auto runtime = OpenOrDie(DiskOptions(dir));
  Runtime* self = runtime.get();
  Future<void> close_future;
  Gate called;
  std::atomic<bool> returned{false};
  ASSERT_TRUE(runtime
                  ->RegisterHandler("t",
                                    [&](TaskContext&) {
                                      close_future = self->Close();
                                      called.Open();
                                      // Still inside the handler: Close did
                                      // not wait for it.
                                      std::this_thread::sleep_for(50ms);
                                      returned = true;
                                      return Status::OK();
                                    })
                  .ok());
  auto id = Await(runtime->Enqueue("t", "x").stored);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(called.Wait());
  auto closed = Await(close_future);
  EXPECT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_TRUE(returned.load());
  EXPECT_TRUE(Await(runtime->Enqueue("t", "y").stored).status().IsClosed());
  runtime.reset();

  runtime = OpenOrDie(DiskOptions(dir));
  EXPECT_EQ(Await(runtime->GetTask(*id))->status, TaskStatus::kSucceeded);
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

// A handler that does not return within close_timeout: Close reports
// TimedOut in bounded time, and the task is recovered at the next open with
// the interrupted attempt counted.
TEST(ShutdownTest, CloseTimesOutOnAStuckHandlerAndTheTaskIsRecovered) {
  TempDir dir;
  Options options = DiskOptions(dir);
  options.close_timeout = 200ms;
  auto runtime = OpenOrDie(options);
  Gate started;
  // Shared, because the abandoned handler outlives this runtime and may
  // outlive the test body.
  auto release = std::make_shared<std::atomic<bool>>(false);
  HandlerOptions retry;
  retry.retry = RetryPolicy::Fixed(3, 0ms);
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "stuck",
                      [&started, release](TaskContext&) {
                        started.Open();
                        while (!*release) std::this_thread::sleep_for(1ms);
                        return Status::OK();
                      },
                      retry)
                  .ok());
  auto id = Await(runtime->Enqueue("stuck", "x").stored);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(started.Wait());
  auto began = std::chrono::steady_clock::now();
  auto closed = Await(runtime->Close());
  EXPECT_LT(std::chrono::steady_clock::now() - began, 10s);
  EXPECT_TRUE(closed.status().IsTimedOut()) << closed.status().ToString();
  runtime.reset();

  options.close_timeout = 10s;
  runtime = OpenOrDie(options);
  auto info = Await(runtime->GetTask(*id));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_NE(info->status, TaskStatus::kRunning);
  EXPECT_EQ(info->attempts, 1u);
  ASSERT_TRUE(runtime->RegisterHandler("stuck", Ok, retry).ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(Await(runtime->GetTask(*id))->status, TaskStatus::kSucceeded);
  ASSERT_TRUE(Await(runtime->Close()).ok());
  *release = true;
}

// Graceful shutdown: Close tells running handlers at once
// (TaskContext::stopping). One that gives up with an error puts its task
// back without spending an attempt or leaving a failure; one that finishes
// anyway succeeds its task. Close does not wait for close_timeout.
TEST(ShutdownTest, StoppingHandlersGiveTheirTasksBackWithoutSpendingAnAttempt) {
  TempDir dir;
  Options options = DiskOptions(dir);
  options.close_timeout = 20s;
  auto runtime = OpenOrDie(options);
  std::atomic<int> waiting{0};
  std::atomic<int> saw_stopping{0};
  HandlerOptions retry;
  retry.retry = RetryPolicy::Fixed(5, 0ms);
  auto wait_for_stop = [&](TaskContext& context) {
    if (context.attempt() == 1 && context.payload() == "fail first") {
      return Status::IOError("first attempt fails");
    }
    ++waiting;
    if (!context.WaitForCancelOrStop(kWait)) return Status::TimedOut("never");
    if (context.stopping()) ++saw_stopping;
    if (context.payload() == "finish anyway") return Status::OK();
    return Status::Aborted("stopping");
  };
  ASSERT_TRUE(runtime->RegisterHandler("wait", wait_for_stop, retry).ok());
  auto give_back = Await(runtime->Enqueue("wait", "give back").stored);
  auto finish = Await(runtime->Enqueue("wait", "finish anyway").stored);
  auto retried = Await(runtime->Enqueue("wait", "fail first").stored);
  ASSERT_TRUE(give_back.ok() && finish.ok() && retried.ok());
  ASSERT_TRUE(runtime->Start().ok());
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (waiting.load() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(waiting.load(), 3);

  auto began = std::chrono::steady_clock::now();
  ASSERT_TRUE(Await(runtime->Close()).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - began, 10s);
  EXPECT_EQ(saw_stopping.load(), 3);
  runtime.reset();

  runtime = OpenOrDie(options);
  auto back = Await(runtime->GetTask(*give_back));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->status, TaskStatus::kPending);
  EXPECT_EQ(back->attempts, 0u);
  EXPECT_TRUE(back->last_error.empty()) << back->last_error;
  auto history = Await(runtime->GetFailureHistory(*give_back));
  ASSERT_TRUE(history.ok());
  EXPECT_TRUE(history->failures.empty());

  EXPECT_EQ(Await(runtime->GetTask(*finish))->status, TaskStatus::kSucceeded);

  // Its first attempt failed and counts; the stopped second one does not.
  auto again = Await(runtime->GetTask(*retried));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, TaskStatus::kRetryScheduled);
  EXPECT_EQ(again->attempts, 1u);

  ASSERT_TRUE(runtime->RegisterHandler("wait", Ok, retry).ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(Await(runtime->GetTask(*give_back))->attempts, 1u);
  EXPECT_EQ(Await(runtime->GetTask(*retried))->attempts, 2u);
  EXPECT_EQ(Await(runtime->GetTask(*retried))->status, TaskStatus::kSucceeded);
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

// The pause of the whole runtime and a group's limit are stored: a reopened
// runtime starts paused, and once resumed runs the group at most two at a
// time on four workers.
TEST(ShutdownTest, PauseAndGroupLimitsSurviveAReopen) {
  TempDir dir;
  Options options = DiskOptions(dir);
  {
    auto runtime = OpenOrDie(options);
    ASSERT_TRUE(runtime->RegisterHandler("t", Ok).ok());
    ASSERT_TRUE(runtime->Start().ok());
    ASSERT_TRUE(runtime->SetGroupConcurrency("limited", 2).ok());
    ASSERT_TRUE(runtime->Pause().ok());
    ASSERT_TRUE(Await(runtime->Close()).ok());
  }
  auto runtime = OpenOrDie(options);
  std::mutex mutex;
  std::map<std::string, int> running, most;
  std::atomic<int> runs{0};
  auto track = [&](TaskContext& task) {
    std::string group(task.group());
    {
      std::lock_guard<std::mutex> lock(mutex);
      most[group] = std::max(most[group], ++running[group]);
    }
    std::this_thread::sleep_for(5ms);
    {
      std::lock_guard<std::mutex> lock(mutex);
      --running[group];
    }
    ++runs;
    return Status::OK();
  };
  ASSERT_TRUE(runtime->RegisterHandler("t", track).ok());
  ASSERT_TRUE(runtime->Start().ok());
  for (int i = 0; i < 16; ++i) {
    EnqueueOptions enqueue;
    enqueue.group = "limited";
    ASSERT_TRUE(
        Await(runtime->Enqueue(TaskSpec{"t", "x", enqueue}).stored).ok());
  }
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runs.load(), 0) << "the reopened runtime was not paused";
  ASSERT_TRUE(runtime->Resume().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runs.load(), 16);
  EXPECT_LE(most["limited"], 2);
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

// Destroying a runtime without Close, with enqueues in flight and handlers
// running, closes it: every acknowledged task is stored, none is left
// running, and none that succeeded runs again.
TEST(ShutdownTest, DestroyingWithoutCloseUnderLoadLosesNothing) {
  TempDir dir;
  std::mutex mutex;
  std::map<TaskId, int> runs;
  auto handler = [&](TaskContext& task) {
    std::this_thread::sleep_for(100us);
    std::lock_guard<std::mutex> lock(mutex);
    ++runs[task.id()];
    return Status::OK();
  };
  std::vector<Ticket> tickets;
  {
    auto runtime = OpenOrDie(DiskOptions(dir));
    ASSERT_TRUE(runtime->RegisterHandler("t", handler).ok());
    ASSERT_TRUE(runtime->Start().ok());
    for (int i = 0; i < 2000; ++i) {
      tickets.push_back(runtime->Enqueue("t", std::to_string(i)));
    }
    // Some have run, some are running, some are not yet stored.
    ASSERT_TRUE(spool::testing::WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mutex);
          return runs.size() >= 50;
        },
        kWait));
  }  // ~Runtime
  std::set<TaskId> acknowledged;
  for (auto& ticket : tickets) {
    auto stored = Await(ticket.stored);
    // Destroyed mid-stream, a call is either stored or refused as Closed.
    if (stored.ok()) {
      acknowledged.insert(*stored);
    } else {
      EXPECT_TRUE(stored.status().IsClosed()) << stored.status().ToString();
    }
  }
  ASSERT_FALSE(acknowledged.empty());
  std::map<TaskId, int> runs_before;
  {
    std::lock_guard<std::mutex> lock(mutex);
    runs_before = runs;
  }

  auto runtime = OpenOrDie(DiskOptions(dir));
  auto counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->total(), acknowledged.size());
  EXPECT_EQ(counts->of(TaskStatus::kRunning), 0u);
  ASSERT_TRUE(runtime->RegisterHandler("t", handler).ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(Await(runtime->CountByStatus())->of(TaskStatus::kSucceeded),
            acknowledged.size());
  std::lock_guard<std::mutex> lock(mutex);
  for (TaskId id : acknowledged) {
    ASSERT_EQ(runs.count(id), 1u) << "task " << id << " never ran";
    EXPECT_EQ(runs[id], 1) << "task " << id << " ran again after a clean close";
  }
  EXPECT_GE(runs_before.size(), 50u);
}

}  // namespace
}  // namespace spool
