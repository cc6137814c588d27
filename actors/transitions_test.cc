#include "actors/transitions.h"

#include <gtest/gtest.h>

namespace spool::actors {
namespace {

Outcome MakeOutcome(TaskId id, uint32_t attempt, Status status,
                    bool permanent) {
  Outcome outcome;
  outcome.id = id;
  outcome.attempt = attempt;
  outcome.status = std::move(status);
  outcome.permanent = permanent;
  return outcome;
}

NewTask SampleTask(RetryPolicy retry) {
  NewTask task;
  task.id = 9;
  task.type = "t";
  task.payload = "p";
  task.priority = 3;
  task.retry = retry;
  return task;
}

// The state of a new task (the spec is not under test here).
storage::StateRecord NewState(const NewTask& task, uint64_t sequence,
                              int64_t now_us,
                              const DependencyVerdict& verdict = {}) {
  return NewRecord(task, sequence, now_us, verdict, task.group, task.dedup_key)
      .state;
}

TEST(TransitionsTest, NewTaskIsPendingAndReadyUnlessRunAtIsLater) {
  auto record = NewState(SampleTask(RetryPolicy{}), 5, 1000);
  EXPECT_EQ(record.status, TaskStatus::kPending);
  EXPECT_EQ(record.next_attempt_us, 0);
  EXPECT_EQ(record.sequence, 5u);
  EXPECT_EQ(record.max_attempts, 3u);
  EXPECT_TRUE(IsQueued(record));

  NewTask later = SampleTask(RetryPolicy{});
  later.run_at_us = 5000;
  EXPECT_EQ(NewState(later, 6, 1000).next_attempt_us, 5000);
  later.run_at_us = 500;  // already past
  EXPECT_EQ(NewState(later, 7, 1000).next_attempt_us, 0);
}

TEST(TransitionsTest, ClaimCountsTheAttempt) {
  auto record = NewState(SampleTask(RetryPolicy{}), 1, 0);
  Claim(&record, 10);
  EXPECT_EQ(record.status, TaskStatus::kRunning);
  EXPECT_EQ(record.attempts, 1u);
  EXPECT_FALSE(IsQueued(record));
}

TEST(TransitionsTest, FailuresRetryWithExponentialBackoffThenFail) {
  auto policy = RetryPolicy::Exponential(3, Duration(100), Duration(1000));
  auto record = NewState(SampleTask(policy), 1, 0);
  Outcome failed = MakeOutcome(9, 0, Status::Aborted("boom"), false);

  Claim(&record, 0);
  failed.attempt = 1;
  ASSERT_TRUE(OutcomeMatches(record, failed));
  Settle(&record, failed, 1000, 0.5);
  EXPECT_EQ(record.status, TaskStatus::kRetryScheduled);
  EXPECT_EQ(record.next_attempt_us, 1100);
  EXPECT_EQ(record.last_error, "boom");

  Claim(&record, 1100);
  failed.attempt = 2;
  Settle(&record, failed, 2000, 0.5);
  EXPECT_EQ(record.next_attempt_us, 2200);

  Claim(&record, 2200);
  failed.attempt = 3;
  Settle(&record, failed, 3000, 0.5);
  EXPECT_EQ(record.status, TaskStatus::kFailed);
  EXPECT_EQ(record.attempts, 3u);
  ASSERT_EQ(record.new_failures.size(), 3u);
  EXPECT_EQ(record.new_failures[2].attempt, 3u);
}

TEST(TransitionsTest, PermanentFailuresAndNonePolicyNeverRetry) {
  auto record = NewState(SampleTask(RetryPolicy{}), 1, 0);
  Claim(&record, 0);
  Settle(&record, MakeOutcome(9, 1, Status::NotFound("no handler"), true), 1,
         0);
  EXPECT_EQ(record.status, TaskStatus::kFailed);

  auto once = NewState(SampleTask(RetryPolicy::None()), 1, 0);
  EXPECT_EQ(once.max_attempts, 1u);
  Claim(&once, 0);
  Settle(&once, MakeOutcome(9, 1, Status::Aborted("x"), false), 1, 0);
  EXPECT_EQ(once.status, TaskStatus::kFailed);
}

TEST(TransitionsTest, SuccessClearsLastErrorButKeepsHistory) {
  auto record = NewState(SampleTask(RetryPolicy::Fixed(2, Duration(0))), 1, 0);
  Claim(&record, 0);
  Settle(&record, MakeOutcome(9, 1, Status::Aborted("x"), false), 1, 0);
  EXPECT_EQ(record.status, TaskStatus::kRetryScheduled);
  EXPECT_EQ(record.next_attempt_us, 0) << "zero delay: ready at once";
  Claim(&record, 2);
  Settle(&record, MakeOutcome(9, 2, Status::OK(), false), 3, 0);
  EXPECT_EQ(record.status, TaskStatus::kSucceeded);
  EXPECT_TRUE(record.last_error.empty());
  EXPECT_EQ(record.new_failures.size(), 1u);
}

TEST(TransitionsTest, StaleOutcomesDoNotMatch) {
  auto record = NewState(SampleTask(RetryPolicy{}), 1, 0);
  Claim(&record, 0);
  EXPECT_FALSE(OutcomeMatches(record, MakeOutcome(9, 2, Status::OK(), false)));
  Settle(&record, MakeOutcome(9, 1, Status::OK(), false), 1, 0);
  EXPECT_FALSE(OutcomeMatches(record, MakeOutcome(9, 1, Status::OK(), false)));
}

TEST(TransitionsTest, ASnoozeIsPendingLaterWithTheAttemptGivenBack) {
  auto record = NewState(SampleTask(RetryPolicy{}), 1, 0);
  Claim(&record, 10);
  Outcome snoozed = MakeOutcome(9, 1, Status::Aborted("ignored"), false);
  snoozed.snooze_us = 500;
  Settle(&record, snoozed, 100, 0);
  EXPECT_EQ(record.status, TaskStatus::kPending);
  EXPECT_EQ(record.attempts, 0u);
  EXPECT_EQ(record.snoozes, 1u);
  EXPECT_EQ(record.next_attempt_us, 600);
  EXPECT_TRUE(record.last_error.empty());
  EXPECT_TRUE(record.new_failures.empty());
  // No delay: ready at once, in its place.
  Claim(&record, 600);
  snoozed.snooze_us = 0;
  Settle(&record, snoozed, 700, 0);
  EXPECT_EQ(record.next_attempt_us, 0);
  EXPECT_EQ(record.snoozes, 2u);
  EXPECT_EQ(record.sequence, 1u);
  // A cancel asked meanwhile wins.
  Claim(&record, 800);
  record.cancel_requested = true;
  Settle(&record, snoozed, 900, 0);
  EXPECT_EQ(record.status, TaskStatus::kCancelled);
  EXPECT_EQ(record.snoozes, 2u);
}

TEST(TransitionsTest, ASuccessKeepsItsResultAndAManualRetryClearsIt) {
  auto record = NewState(SampleTask(RetryPolicy{}), 1, 0);
  Claim(&record, 10);
  Outcome done = MakeOutcome(9, 1, Status::OK(), false);
  done.result = "r";
  Settle(&record, done, 20, 0);
  EXPECT_EQ(record.status, TaskStatus::kSucceeded);
  EXPECT_EQ(record.result, std::optional<std::string>("r"));
  record.snoozes = 4;
  PrepareManualRetry(&record, std::nullopt, 30);
  EXPECT_EQ(record.result, std::nullopt);
  EXPECT_EQ(record.snoozes, 0u);

  auto failed = NewState(SampleTask(RetryPolicy::None()), 2, 0);
  Claim(&failed, 10);
  Outcome error = MakeOutcome(9, 1, Status::Aborted("x"), false);
  error.result = "r";
  Settle(&failed, error, 20, 0);
  EXPECT_EQ(failed.status, TaskStatus::kFailed);
  EXPECT_EQ(failed.result, std::nullopt) << "only a success keeps it";
}

TEST(TransitionsTest, InterruptedAttemptsCountAndEventuallyFail) {
  auto record = NewState(
      SampleTask(RetryPolicy::Exponential(2, Duration(50), Duration(50))), 1,
      0);
  Claim(&record, 0);
  Interrupt(&record, 100, 0.0);
  EXPECT_EQ(record.status, TaskStatus::kRetryScheduled);
  EXPECT_EQ(record.next_attempt_us, 150);
  EXPECT_EQ(record.last_error, kInterruptedError);
  Claim(&record, 150);
  Interrupt(&record, 200, 0.0);
  EXPECT_EQ(record.status, TaskStatus::kFailed);
  EXPECT_EQ(record.attempts, 2u);
  EXPECT_EQ(record.interrupted_attempts, 2u);
  PrepareManualRetry(&record, std::nullopt, 300);
  EXPECT_EQ(record.interrupted_attempts, 0u) << "counted since the retry";
}

TEST(RetryPolicyTest, DelaysAndValidation) {
  auto exp = RetryPolicy::Exponential(10, Duration(100), Duration(1000), 0.0);
  EXPECT_EQ(exp.DelayAfter(1, 0).count(), 100);
  EXPECT_EQ(exp.DelayAfter(2, 0).count(), 200);
  EXPECT_EQ(exp.DelayAfter(4, 0).count(), 800);
  EXPECT_EQ(exp.DelayAfter(5, 0).count(), 1000);
  EXPECT_EQ(exp.DelayAfter(500, 0).count(), 1000);
  auto jitter =
      RetryPolicy::Exponential(10, Duration(1000), Duration(100000), 0.2);
  EXPECT_EQ(jitter.DelayAfter(1, 0.0).count(), 800);
  EXPECT_EQ(jitter.DelayAfter(1, 0.5).count(), 1000);
  EXPECT_LT(jitter.DelayAfter(1, 0.999999).count(), 1200);
  EXPECT_TRUE(exp.Validate().ok());
  RetryPolicy bad = exp;
  bad.max_attempts = 0;
  EXPECT_TRUE(bad.Validate().IsInvalidArgument());
  bad = exp;
  bad.max_delay = Duration(10);
  EXPECT_TRUE(bad.Validate().IsInvalidArgument());
  bad = exp;
  bad.jitter = 1.5;
  EXPECT_TRUE(bad.Validate().IsInvalidArgument());
  bad = exp;
  bad.initial_delay = Duration(-1);
  EXPECT_TRUE(bad.Validate().IsInvalidArgument());
}

}  // namespace
}  // namespace spool::actors
