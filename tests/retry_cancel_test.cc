// Retries, failure history, cancellation, dedup and idempotency keys.

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Gate;
using testing::Harness;

TEST(RetryTest, FixedDelayThenStopAtTheBudget) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(3, 10s);
  std::atomic<int> runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext& task) {
                        runs++;
                        return Status::Aborted("attempt " +
                                               std::to_string(task.attempt()));
                      },
                      options)
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kRetryScheduled));
  auto info = h.Info(id);
  ASSERT_TRUE(info.next_attempt_at.has_value());
  EXPECT_EQ(*info.next_attempt_at - info.updated_at, 10s);
  h.clock().Advance(10s);
  ASSERT_TRUE(testing::WaitUntil([&] { return runs.load() == 2; }));
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kRetryScheduled));
  h.clock().Advance(10s);
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kFailed));
  info = h.Info(id);
  EXPECT_EQ(info.attempts, 3u);
  EXPECT_EQ(runs.load(), 3);
  EXPECT_EQ(info.last_error, "attempt 3");
  ASSERT_EQ(info.failures.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(info.failures[i].attempt, i + 1);
}

TEST(RetryTest, ExponentialDoublingUntilSuccessClearsTheLastError) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::Exponential(5, 1s, 1h);
  std::atomic<int> runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext&) {
                        return ++runs < 4 ? Status::Aborted("not yet")
                                          : Status::OK();
                      },
                      options)
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  int attempt = 1;
  for (auto delay : {1s, 2s, 4s}) {
    ASSERT_TRUE(testing::WaitUntil([&] {
      auto info = h.Info(id);
      return info.status == TaskStatus::kRetryScheduled &&
             info.attempts == static_cast<uint32_t>(attempt);
    }));
    auto info = h.Info(id);
    EXPECT_EQ(*info.next_attempt_at - info.updated_at, delay);
    h.clock().Advance(delay);
    ++attempt;
  }
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kSucceeded));
  auto info = h.Info(id);
  EXPECT_TRUE(info.last_error.empty());
  EXPECT_EQ(info.failures.size(), 3u) << "the history stays";
}

TEST(RetryTest, TheRetryFilterAndAThrowingFilterStopRetries) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(5, 0s);
  options.retry_if = [](const Status& error) {
    if (error.message() == "throw") throw std::runtime_error("filter broke");
    return !error.IsInvalidArgument();
  };
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [](TaskContext& task) {
                        if (task.payload() == "permanent") {
                          return Status::InvalidArgument("bad request");
                        }
                        return Status::Aborted(std::string(task.payload()));
                      },
                      options)
                  .ok());
  TaskId permanent = h.Put("t", "permanent");
  TaskId throwing = h.Put("t", "throw");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.Info(permanent).attempts, 1u);
  EXPECT_EQ(h.StatusOf(permanent), TaskStatus::kFailed);
  auto info = h.Info(throwing);
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_EQ(info.status, TaskStatus::kFailed);
  EXPECT_EQ(info.last_error, "throw") << "the handler's error is kept";
}

TEST(RetryTest, APerErrorDelayOverridesThePolicy) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(3, 1s);
  options.retry_delay = [](const Status& error) -> std::optional<Duration> {
    if (error.message() == "rate limited") return Duration(30s);
    return std::nullopt;
  };
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [](TaskContext& task) {
                        if (task.payload() == "context") {
                          task.SetRetryDelay(45s);
                          return Status::Aborted("busy");
                        }
                        return Status::Aborted("rate limited");
                      },
                      options)
                  .ok());
  TaskId by_function = h.Put("t", "function");
  TaskId by_context = h.Put("t", "context");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  auto a = h.Info(by_function);
  EXPECT_EQ(*a.next_attempt_at - a.updated_at, 30s);
  auto b = h.Info(by_context);
  EXPECT_EQ(*b.next_attempt_at - b.updated_at, 45s);
}

TEST(RetryTest, ManualRetryGivesAFreshBudgetAndKeepsThePlace) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::None();
  std::atomic<bool> fail{true};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext& task) {
                        h.journal.Record(task.id(),
                                         std::string(task.payload()));
                        return fail ? Status::Aborted("no") : Status::OK();
                      },
                      options)
                  .ok());
  TaskId id = h.Put("t", "x");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  auto before = h.Info(id);
  ASSERT_EQ(before.status, TaskStatus::kFailed);
  fail = false;
  ASSERT_TRUE(Await(h.runtime().Retry(id, RetryPolicy::Fixed(4, 1s))).ok());
  h.Drain();
  auto after = h.Info(id);
  EXPECT_EQ(after.status, TaskStatus::kSucceeded);
  EXPECT_EQ(after.attempts, 1u) << "a fresh budget";
  EXPECT_EQ(after.max_attempts, 4u);
  EXPECT_EQ(after.sequence, before.sequence);
  EXPECT_EQ(after.created_at, before.created_at);
}

TEST(RetryTest, OnlyFailedOrCancelledTasksOfKnownTypesCanBeRetried) {
  Harness h(1);
  h.RegisterRecorder("t");
  TaskId pending = h.Put("t", "");
  EXPECT_TRUE(
      Await(h.runtime().Retry(pending)).status().IsFailedPrecondition());
  EXPECT_TRUE(Await(h.runtime().Retry(999999)).status().IsNotFound());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  auto done = Await(h.runtime().Retry(pending));
  EXPECT_TRUE(done.status().IsFailedPrecondition());
  EXPECT_NE(done.status().message().find("succeeded"), std::string::npos);
  EXPECT_TRUE(Await(h.runtime().Retry(pending, RetryPolicy::Fixed(0, 1s)))
                  .status()
                  .IsInvalidArgument());
}

TEST(RetryTest, AnActiveDuplicateBlocksARetry) {
  Harness h(1);
  h.RegisterRecorder("t");
  EnqueueOptions keyed;
  keyed.dedup_key = "k";
  TaskId first = h.Put("t", "1", keyed);
  ASSERT_EQ(Await(h.runtime().Cancel(first)).value(), TaskStatus::kCancelled);
  TaskId second = h.Put("t", "2", keyed);
  EXPECT_NE(first, second) << "a cancelled task frees its key";
  auto retried = Await(h.runtime().Retry(first));
  EXPECT_TRUE(retried.status().IsFailedPrecondition());
  EXPECT_NE(retried.status().message().find("dedup key"), std::string::npos);
}

TEST(RetryTest, AnUnregisteredTypeCannotBeRetried) {
  Harness h(1, Durability::kSync);
  HandlerOptions once;
  once.retry = RetryPolicy::None();
  ASSERT_TRUE(
      h.runtime()
          .RegisterHandler(
              "gone", [](TaskContext&) { return Status::Aborted("x"); }, once)
          .ok());
  TaskId id = h.Put("gone", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  h.Reopen();
  auto retried = Await(h.runtime().Retry(id));
  EXPECT_TRUE(retried.status().IsFailedPrecondition());
  EXPECT_NE(retried.status().message().find("no handler"), std::string::npos);
}

TEST(CancelTest, PendingAndRetryScheduledTasksAreCancelledAtOnce) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(3, 1h);
  std::atomic<int> runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext&) {
                        runs++;
                        return Status::Aborted("x");
                      },
                      options)
                  .ok());
  TaskId retrying = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(retrying, TaskStatus::kRetryScheduled));
  ASSERT_TRUE(h.runtime().Pause().ok());
  TaskId pending = h.Put("t", "");
  EXPECT_EQ(Await(h.runtime().Cancel(pending)).value(), TaskStatus::kCancelled);
  EXPECT_EQ(Await(h.runtime().Cancel(retrying)).value(),
            TaskStatus::kCancelled);
  ASSERT_TRUE(h.runtime().Resume().ok());
  h.clock().Advance(2h);
  h.Drain();
  EXPECT_EQ(runs.load(), 1) << "neither the pending task nor the retry ran";
  EXPECT_EQ(h.StatusOf(pending), TaskStatus::kCancelled);
  EXPECT_EQ(Await(h.runtime().Cancel(pending)).value(), TaskStatus::kCancelled)
      << "a finished task stays as it is";
  EXPECT_TRUE(Await(h.runtime().Cancel(424242)).status().IsNotFound());
}

TEST(CancelTest, ARunningTaskSeesItsTokenAndEndsByWhatItReturns) {
  Harness h(2);
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(5, 0s);
  Gate started_a, started_b;
  ASSERT_TRUE(
      h.runtime()
          .RegisterHandler(
              "t",
              [&](TaskContext& task) {
                (task.payload() == "ok" ? started_a : started_b).Open();
                EXPECT_TRUE(task.WaitForCancel(std::chrono::seconds(30)));
                return task.payload() == "ok" ? Status::OK()
                                              : Status::Aborted("stopped");
              },
              options)
          .ok());
  TaskId succeeds = h.Put("t", "ok");
  TaskId cancelled = h.Put("t", "fail");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(started_a.Wait());
  ASSERT_TRUE(started_b.Wait());
  EXPECT_EQ(Await(h.runtime().Cancel(succeeds)).value(), TaskStatus::kRunning);
  EXPECT_EQ(Await(h.runtime().Cancel(cancelled)).value(), TaskStatus::kRunning);
  EXPECT_TRUE(h.Info(cancelled).cancel_requested);
  h.Drain();
  EXPECT_EQ(h.StatusOf(succeeds), TaskStatus::kSucceeded);
  auto info = h.Info(cancelled);
  EXPECT_EQ(info.status, TaskStatus::kCancelled);
  EXPECT_EQ(info.attempts, 1u) << "never retried after a cancel";
}

TEST(CancelTest, ReturningCancelledEndsTheTaskWithoutRetry) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(5, 0s);
  ASSERT_TRUE(
      h.runtime()
          .RegisterHandler(
              "t", [](TaskContext&) { return Status::Cancelled("not wanted"); },
              options)
          .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  auto info = h.Info(id);
  EXPECT_EQ(info.status, TaskStatus::kCancelled);
  EXPECT_EQ(info.attempts, 1u);
}

TEST(CancelTest, ACancelRequestSurvivesACrashAndRecoveryCancels) {
  Harness h(1, Durability::kSync);
  // A short close timeout leaves a task running on disk, as a crash would.
  h.options().close_timeout = 10ms;
  h.Reopen();
  Gate started;
  Gate release;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [&](TaskContext&) {
                                     started.Open();
                                     release.Wait();
                                     return Status::OK();
                                   })
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(started.Wait());
  ASSERT_EQ(Await(h.runtime().Cancel(id)).value(), TaskStatus::kRunning);
  h.CloseAbandoningHandlers();
  release.Open();
  h.Reopen();
  auto info = h.Info(id);
  EXPECT_EQ(info.status, TaskStatus::kCancelled);
  EXPECT_EQ(info.attempts, 1u);
}

TEST(DedupTest, AnActiveKeyReturnsTheExistingTaskAndKeepsItsPayload) {
  Harness h(1);
  h.RegisterRecorder("t");
  EnqueueOptions keyed;
  keyed.dedup_key = "order-7";
  TaskId first = h.Put("t", "first", keyed);
  Ticket second = h.runtime().Enqueue("t", "second", keyed);
  auto stored = Await(second.stored);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, first);
  EXPECT_NE(second.id, first) << "the ticket's own id is unused";
  EXPECT_EQ(h.Info(first).payload, "first");
  EXPECT_TRUE(Await(h.runtime().GetTask(second.id)).status().IsNotFound());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.journal.Labels(), std::vector<std::string>{"first"});
  // Finished: the key is free.
  TaskId third = h.Put("t", "third", keyed);
  EXPECT_NE(third, first);
}

TEST(DedupTest, ParallelEnqueuesWithOneKeyStoreOneTask) {
  Harness h(1);
  h.RegisterRecorder("t");
  EnqueueOptions keyed;
  keyed.dedup_key = "same";
  std::vector<std::thread> threads;
  std::vector<Future<TaskId>> futures(16);
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      futures[i] = h.runtime().Enqueue("t", std::to_string(i), keyed).stored;
    });
  }
  for (auto& t : threads) t.join();
  std::set<TaskId> ids;
  for (auto& f : futures) {
    auto r = Await(f);
    ASSERT_TRUE(r.ok());
    ids.insert(*r);
  }
  EXPECT_EQ(ids.size(), 1u);
  auto counts = Await(h.runtime().CountByStatus());
  EXPECT_EQ(counts->total(), 1u);
}

TEST(DedupTest, AKeyRepeatedInsideOneBatchStoresOneTask) {
  Harness h(1);
  h.RegisterRecorder("t");
  EnqueueOptions keyed;
  keyed.dedup_key = "k";
  auto stored = Await(
      h.runtime().EnqueueBatch({{"t", "a", keyed}, {"t", "b", keyed}}).stored);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0], (*stored)[1]);
}

TEST(DedupTest, TheIdempotencyKeyIsShownToTheHandlerAndNeverDedups) {
  Harness h(1);
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [&](TaskContext& task) {
                                     h.journal.Record(
                                         task.id(),
                                         std::string(task.idempotency_key()));
                                     return Status::OK();
                                   })
                  .ok());
  EnqueueOptions idem;
  idem.idempotency_key = "pay-42";
  TaskId a = h.Put("t", "", idem);
  TaskId b = h.Put("t", "", idem);
  EXPECT_NE(a, b);
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.journal.Labels(), (std::vector<std::string>{"pay-42", "pay-42"}));
}

}  // namespace
}  // namespace spool
