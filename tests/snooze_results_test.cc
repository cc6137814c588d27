// Snoozes, results and dependency outcomes (issue 15): TaskContext::Snooze,
// SetResult and dependencies(), on a runtime on disk with a manual clock.

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Harness;

HandlerOptions NoRetry() {
  HandlerOptions options;
  options.retry = RetryPolicy::None();
  return options;
}

// Reopens `h` with `change` applied to its options.
template <class Change>
void ReopenWith(Harness& h, Change change) {
  change(h.options());
  h.Reopen();
}

TEST(SnoozeTest, ReschedulesWithoutSpendingAnAttemptAndRunsAfterTheDelay) {
  Harness h(1, Durability::kSync);
  std::atomic<int> runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [&](TaskContext& task) {
                                     EXPECT_EQ(task.attempt(), 1u);
                                     if (++runs == 1) return task.Snooze(10s);
                                     return Status::OK();
                                   })
                  .ok());
  h.StartRecordingEvents();
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return h.Info(id).snoozes == 1; }));
  TaskInfo info = h.Info(id);
  EXPECT_EQ(info.status, TaskStatus::kPending);
  EXPECT_EQ(info.attempts, 0u) << "a snooze spends no attempt";
  EXPECT_TRUE(info.failures.empty());
  EXPECT_TRUE(info.last_error.empty());
  ASSERT_TRUE(info.next_attempt_at.has_value());
  EXPECT_EQ(*info.next_attempt_at - info.updated_at, 10s);
  EXPECT_EQ(runs.load(), 1);

  h.clock().Advance(10s);
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kSucceeded));
  info = h.Info(id);
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_EQ(info.snoozes, 1u);
  EXPECT_EQ(runs.load(), 2);
  std::vector<std::string> events = h.Events();
  EXPECT_NE(
      std::find(events.begin(), events.end(), "deferred:" + std::to_string(id)),
      events.end());
}

TEST(SnoozeTest, ASnoozePastTheBoundFailsTheAttempt) {
  Harness h(1, Durability::kSync);
  ReopenWith(h, [](Options& o) { o.max_snoozes = 2; });
  std::atomic<int> runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext& task) {
                        ++runs;
                        return task.Snooze(0s);
                      },
                      NoRetry())
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kFailed));
  TaskInfo info = h.Info(id);
  EXPECT_EQ(runs.load(), 3) << "two snoozes, then the refused one";
  EXPECT_EQ(info.snoozes, 2u);
  EXPECT_EQ(info.attempts, 1u) << "the refused snooze counts";
  EXPECT_EQ(info.last_error,
            "snoozed 2 times, the most runtime.max_snoozes allows (2); this "
            "snooze counts as a failed attempt");
  ASSERT_EQ(info.failures.size(), 1u);

  // A manual retry starts the count again.
  ASSERT_TRUE(Await(h.runtime().Retry(id)).ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return runs.load() == 6; }));
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kFailed));
  EXPECT_EQ(h.Info(id).snoozes, 2u);
}

TEST(SnoozeTest, ASnoozeIsStoredAndSurvivesAReopen) {
  Harness h(1, Durability::kSync);
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t", [](TaskContext& task) { return task.Snooze(1h); })
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return h.Info(id).snoozes == 1; }));
  TaskInfo before = h.Info(id);

  h.Reopen();
  TaskInfo after = h.Info(id);
  EXPECT_EQ(after.status, TaskStatus::kPending);
  EXPECT_EQ(after.snoozes, 1u);
  EXPECT_EQ(after.attempts, 0u);
  EXPECT_EQ(after.next_attempt_at, before.next_attempt_at);
  std::atomic<int> runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [&](TaskContext&) {
                                     ++runs;
                                     return Status::OK();
                                   })
                  .ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.clock().Advance(1h);
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kSucceeded));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(h.Info(id).attempts, 1u);
}

TEST(SnoozeTest, ABadDelayIsInvalidArgumentAndSnoozesNothing) {
  Harness h(1, Durability::kSync);
  std::mutex mutex;
  std::vector<Status> refused;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext& task) {
                        std::lock_guard<std::mutex> lock(mutex);
                        refused.push_back(task.Snooze(-1s));
                        refused.push_back(task.Snooze(24h * 366));
                        return refused.front();
                      },
                      NoRetry())
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kFailed));
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(refused.size(), 2u);
  for (const Status& s : refused) {
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("Snooze: delay must be between 0 and 365 days"),
              std::string::npos)
        << s.ToString();
  }
  TaskInfo info = h.Info(id);
  EXPECT_EQ(info.snoozes, 0u);
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_NE(info.last_error.find("Snooze: delay"), std::string::npos);
}

TEST(ResultTest, StoredOnSuccessAndShownByGetTaskAndTheJson) {
  Harness h(1, Durability::kSync);
  ASSERT_TRUE(h.runtime().DeclareJsonPayload("sum").ok());
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("sum",
                                   [](TaskContext& task) {
                                     return task.SetResult("{\"sum\":7}");
                                   })
                  .ok());
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "fails",
                      [](TaskContext& task) {
                        EXPECT_TRUE(task.SetResult("partial").ok());
                        return Status::Aborted("no");
                      },
                      NoRetry())
                  .ok());
  h.RegisterRecorder("none");
  TaskId sum = h.Put("sum", "{}");
  TaskId fails = h.Put("fails", "");
  TaskId none = h.Put("none", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  TaskInfo info = h.Info(sum);
  EXPECT_EQ(info.status, TaskStatus::kSucceeded);
  EXPECT_EQ(info.result, std::optional<std::string>("{\"sum\":7}"));
  EXPECT_EQ(h.Info(fails).result, std::nullopt) << "kept only on success";
  EXPECT_EQ(h.Info(none).result, std::nullopt);

  auto json = Await(h.runtime().GetTaskJson(sum));
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_NE(json->find("\"result\":{\"sum\":7},\"payload\":{}"),
            std::string::npos)
      << *json;
  json = Await(h.runtime().GetTaskJson(none));
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"snoozes\":0,"), std::string::npos) << *json;
  EXPECT_NE(json->find("\"result\":null,"), std::string::npos) << *json;

  h.Reopen();
  EXPECT_EQ(h.Info(sum).result, std::optional<std::string>("{\"sum\":7}"));
}

TEST(ResultTest, AResultLargerThanTheBoundIsRefusedNamingIt) {
  Harness h(1, Durability::kSync);
  ReopenWith(h, [](Options& o) { o.max_result_bytes = 8; });
  std::mutex mutex;
  Status too_large;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext& task) {
                        if (task.payload() == "fits") {
                          return task.SetResult(std::string(8, 'x'));
                        }
                        Status s = task.SetResult(std::string(9, 'x'));
                        std::lock_guard<std::mutex> lock(mutex);
                        too_large = s;
                        return s;
                      },
                      NoRetry())
                  .ok());
  TaskId fits = h.Put("t", "fits");
  TaskId big = h.Put("t", "big");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.Info(fits).result, std::optional<std::string>("xxxxxxxx"));
  TaskInfo info = h.Info(big);
  EXPECT_EQ(info.status, TaskStatus::kFailed);
  EXPECT_EQ(info.result, std::nullopt);
  const std::string expected =
      "SetResult: result is 9 bytes; the limit is 8 (storage.max_result_bytes)";
  EXPECT_EQ(info.last_error, expected);
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_TRUE(too_large.IsInvalidArgument());
  EXPECT_EQ(too_large.message(), expected);
}

// What a handler saw of its dependencies, by task.
class DependencyLog {
 public:
  Handler Recorder() {
    return [this](TaskContext& task) {
      std::lock_guard<std::mutex> lock(mutex_);
      seen_[task.id()] = task.dependencies();
      return Status::OK();
    };
  }
  std::vector<DependencyOutcome> Of(TaskId id) {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_[id];
  }

 private:
  std::mutex mutex_;
  std::map<TaskId, std::vector<DependencyOutcome>> seen_;
};

EnqueueOptions After(std::vector<TaskId> deps, DependencyFailure policy) {
  EnqueueOptions options;
  options.depends_on = std::move(deps);
  options.on_dependency_failure = policy;
  return options;
}

TEST(DependencyOutcomeTest, ARunDependentSeesWhichFailedAndTheOthersResult) {
  Harness h(2, Durability::kSync);
  DependencyLog log;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "bad",
                      [](TaskContext&) { return Status::Aborted("disk full"); },
                      NoRetry())
                  .ok());
  ASSERT_TRUE(
      h.runtime()
          .RegisterHandler(
              "good", [](TaskContext& task) { return task.SetResult("42"); })
          .ok());
  ASSERT_TRUE(h.runtime().RegisterHandler("report", log.Recorder()).ok());
  TaskId bad = h.Put("bad", "");
  TaskId good = h.Put("good", "");
  TaskId report =
      h.Put("report", "", After({bad, good}, DependencyFailure::kRun));
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(report, TaskStatus::kSucceeded));
  std::vector<DependencyOutcome> deps = log.Of(report);
  ASSERT_EQ(deps.size(), 2u);
  EXPECT_EQ(deps[0].id, bad);
  EXPECT_EQ(deps[0].status, TaskStatus::kFailed);
  EXPECT_EQ(deps[0].last_error, "disk full");
  EXPECT_EQ(deps[0].result, std::nullopt);
  EXPECT_EQ(deps[1].id, good);
  EXPECT_EQ(deps[1].status, TaskStatus::kSucceeded);
  EXPECT_EQ(deps[1].result, std::optional<std::string>("42"));
  EXPECT_TRUE(deps[1].last_error.empty());
}

TEST(DependencyOutcomeTest, ADependentAfterSuccessSeesResultsAndOthersNothing) {
  Harness h(2, Durability::kSync);
  DependencyLog log;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("part",
                                   [](TaskContext& task) {
                                     return task.SetResult(
                                         "part " + std::string(task.payload()));
                                   })
                  .ok());
  ASSERT_TRUE(h.runtime().RegisterHandler("join", log.Recorder()).ok());
  TaskId a = h.Put("part", "a");
  TaskId b = h.Put("part", "b");
  TaskId join = h.Put("join", "", After({b, a}, DependencyFailure::kCancel));
  TaskId alone = h.Put("join", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  ASSERT_EQ(h.StatusOf(join), TaskStatus::kSucceeded);
  std::vector<DependencyOutcome> deps = log.Of(join);
  ASSERT_EQ(deps.size(), 2u);
  EXPECT_EQ(deps[0].id, b) << "in the order given";
  EXPECT_EQ(deps[0].result, std::optional<std::string>("part b"));
  EXPECT_EQ(deps[1].id, a);
  EXPECT_EQ(deps[1].status, TaskStatus::kSucceeded);
  EXPECT_EQ(deps[1].result, std::optional<std::string>("part a"));
  EXPECT_TRUE(log.Of(alone).empty());
}

}  // namespace
}  // namespace spool
