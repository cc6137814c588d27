// Progress from outside the handler and its subscription (issue 14, item
// 5); the fields of enqueued and deferred events (item 6).

#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Gate;
using testing::Harness;

// What a progress listener received, thread safe.
class ProgressLog {
 public:
  void Add(const ProgressUpdate& update) {
    std::lock_guard<std::mutex> lock(mutex_);
    updates_.push_back(update);
  }
  // Whether task `id` was reported at `value`, waiting for it (bounded).
  bool WaitFor(TaskId id, double value) {
    return testing::WaitUntil([&] {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const ProgressUpdate& u : updates_) {
        if (u.id == id && u.progress == value) return true;
      }
      return false;
    });
  }

 private:
  std::mutex mutex_;
  std::vector<ProgressUpdate> updates_;
};

bool MentionsAll(const Status& s, std::initializer_list<const char*> words) {
  for (const char* word : words) {
    if (s.message().find(word) == std::string::npos) return false;
  }
  return true;
}

TEST(HandOffProgressTest, ReportedFromOutsideTheHandlerSubscribedAndRefused) {
  Harness h(2);
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("upload",
                                   [](TaskContext& task) {
                                     task.ReportProgress(0.25);
                                     task.HandOff("transfer-1");
                                     return Status::OK();
                                   })
                  .ok());
  Gate release;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("busy",
                                   [&](TaskContext& task) {
                                     h.journal.Record(task.id(), "busy");
                                     return release.Wait()
                                                ? Status::OK()
                                                : Status::TimedOut("gate");
                                   })
                  .ok());
  h.RegisterRecorder("idle");
  ProgressLog log;
  uint64_t token = h.runtime().SubscribeProgress(
      [&log](const ProgressUpdate& update) { log.Add(update); });
  ASSERT_NE(token, 0u);
  EXPECT_EQ(h.runtime().SubscribeProgress(nullptr), 0u);
  ASSERT_TRUE(h.runtime().PauseType("idle").ok());
  ASSERT_TRUE(h.runtime().Start().ok());

  TaskId upload = h.Put("upload", "file");
  // The handler's own report reaches the subscription too.
  ASSERT_TRUE(log.WaitFor(upload, 0.25));
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return h.Info(upload).handoff_reference == "transfer-1"; }));
  // The hand-off's end of the attempt forgot the handler's progress.
  EXPECT_FALSE(h.runtime().Progress(upload).has_value());

  ASSERT_TRUE(Await(h.runtime().ReportProgress(upload, 0.5)).ok());
  EXPECT_EQ(h.runtime().Progress(upload), std::optional<double>(0.5));
  auto read = Await(h.runtime().GetProgress(upload));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, std::optional<double>(0.5));
  ASSERT_TRUE(log.WaitFor(upload, 0.5));
  ASSERT_TRUE(Await(h.runtime().ReportProgress(upload, 1.0)).ok());
  ASSERT_TRUE(log.WaitFor(upload, 1.0));

  // Bad fractions, named.
  for (double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    auto refused = Await(h.runtime().ReportProgress(upload, bad));
    EXPECT_TRUE(refused.status().IsInvalidArgument()) << bad;
    EXPECT_TRUE(MentionsAll(refused.status(), {"fraction"}))
        << refused.status().ToString();
  }
  EXPECT_EQ(h.runtime().Progress(upload), std::optional<double>(1.0));

  // Not handed off: the error names the state.
  EXPECT_TRUE(
      Await(h.runtime().ReportProgress(987654, 0.5)).status().IsNotFound());
  TaskId pending = h.Put("idle", "p");
  auto on_pending = Await(h.runtime().ReportProgress(pending, 0.5));
  EXPECT_TRUE(on_pending.status().IsFailedPrecondition());
  EXPECT_TRUE(MentionsAll(on_pending.status(), {"pending", "handed-off"}))
      << on_pending.status().ToString();
  TaskId busy = h.Put("busy", "b");
  ASSERT_TRUE(h.journal.WaitForSize(1));
  auto on_running = Await(h.runtime().ReportProgress(busy, 0.5));
  EXPECT_TRUE(on_running.status().IsFailedPrecondition());
  EXPECT_TRUE(MentionsAll(on_running.status(),
                          {"running in its handler", "TaskContext"}))
      << on_running.status().ToString();
  release.Open();

  // Once the hand-off ends, its progress is gone and reports are refused.
  ASSERT_TRUE(Await(h.runtime().CompleteHandOff(upload, "transfer-1")).ok());
  EXPECT_FALSE(h.runtime().Progress(upload).has_value());
  auto after = Await(h.runtime().ReportProgress(upload, 0.5));
  EXPECT_TRUE(after.status().IsFailedPrecondition());
  EXPECT_TRUE(MentionsAll(after.status(), {"succeeded"}))
      << after.status().ToString();

  h.runtime().Unsubscribe(token);
  ASSERT_TRUE(Await(h.runtime().Close()).ok());
  EXPECT_TRUE(
      Await(h.runtime().ReportProgress(upload, 0.5)).status().IsClosed());
}

// Full events, as a listener received them.
class EventLog {
 public:
  void Add(const TaskEvent& event) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(event);
  }
  std::vector<TaskEvent> Of(TaskId id, TaskEvent::Kind kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<TaskEvent> out;
    for (const TaskEvent& e : events_) {
      if (e.id == id && e.kind == kind) out.push_back(e);
    }
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<TaskEvent> events_;
};

TEST(EventFieldsTest, EnqueuedEventsCarryKeysAndRunAt) {
  Harness h(1);
  HandlerOptions once;
  once.retry = RetryPolicy::None();
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [](TaskContext& task) {
                        return task.payload() == "fail" ? Status::Aborted("no")
                                                        : Status::OK();
                      },
                      once)
                  .ok());
  EventLog log;
  h.runtime().Subscribe([&log](const TaskEvent& e) { log.Add(e); });

  EnqueueOptions keyed;
  keyed.dedup_key = "order-7";
  keyed.idempotency_key = "charge-7";
  keyed.run_at = h.clock().Now() + 1h;
  TaskId with_keys = h.Put("t", "later", keyed);
  EnqueueOptions delayed;
  delayed.delay = 90s;
  TaskId with_delay = h.Put("t", "later", delayed);
  TaskId plain = h.Put("t", "x");
  EnqueueOptions retried_keys;
  retried_keys.dedup_key = "order-8";
  retried_keys.idempotency_key = "charge-8";
  TaskId failing = h.Put("t", "fail", retried_keys);
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(failing, TaskStatus::kFailed));
  ASSERT_TRUE(Await(h.runtime().Retry(failing)).ok());
  h.Drain();
  h.Events();  // flushes the executor: every event so far is delivered

  auto first = log.Of(with_keys, TaskEvent::Kind::kEnqueued);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].dedup_key, "order-7");
  EXPECT_EQ(first[0].idempotency_key, "charge-7");
  EXPECT_EQ(first[0].run_at, keyed.run_at);
  EXPECT_EQ(first[0].defer_reason, DeferReason::kNone);

  auto second = log.Of(with_delay, TaskEvent::Kind::kEnqueued);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].run_at, std::optional<Timestamp>(h.clock().Now() + 90s));
  EXPECT_TRUE(second[0].dedup_key.empty());

  auto third = log.Of(plain, TaskEvent::Kind::kEnqueued);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_TRUE(third[0].dedup_key.empty());
  EXPECT_TRUE(third[0].idempotency_key.empty());
  EXPECT_FALSE(third[0].run_at.has_value());

  // Enqueued, then enqueued again by Retry: both carry the stored keys.
  auto retried = log.Of(failing, TaskEvent::Kind::kEnqueued);
  ASSERT_EQ(retried.size(), 2u);
  for (const TaskEvent& e : retried) {
    EXPECT_EQ(e.dedup_key, "order-8");
    EXPECT_EQ(e.idempotency_key, "charge-8");
  }
  // Other kinds carry none.
  auto started = log.Of(plain, TaskEvent::Kind::kStarted);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_TRUE(started[0].idempotency_key.empty());
}

TEST(EventFieldsTest, DeferredEventsCarryTheirReason) {
  Harness h(2);
  std::atomic<int> offline_runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("offline",
                                   [&](TaskContext& task) {
                                     if (offline_runs++ == 0) {
                                       task.DeferUntilOpen("network");
                                     }
                                     return Status::OK();
                                   })
                  .ok());
  std::atomic<int> snoozes{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("sleepy",
                                   [&](TaskContext& task) {
                                     if (snoozes++ == 0) {
                                       return task.Snooze(10s);
                                     }
                                     return Status::OK();
                                   })
                  .ok());
  std::atomic<int> stoppable_runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("stoppable",
                                   [&](TaskContext& task) {
                                     if (stoppable_runs++ > 0) {
                                       return Status::OK();
                                     }
                                     h.journal.Record(task.id(), "stoppable");
                                     task.WaitForCancelOrStop(testing::kWait);
                                     return Status::Aborted("stopping");
                                   })
                  .ok());
  EventLog log;
  h.runtime().Subscribe([&log](const TaskEvent& e) { log.Add(e); });
  ASSERT_TRUE(h.runtime().Start().ok());

  TaskId gated = h.Put("offline", "x");
  TaskId snoozed = h.Put("sleepy", "y");
  h.Drain();
  TaskId stopped = h.Put("stoppable", "z");
  ASSERT_TRUE(h.journal.WaitForSize(1));
  ASSERT_TRUE(Await(h.runtime().Stop()).ok());
  h.Events();

  auto by_gate = log.Of(gated, TaskEvent::Kind::kDeferred);
  ASSERT_EQ(by_gate.size(), 1u);
  EXPECT_EQ(by_gate[0].defer_reason, DeferReason::kGateClosed);
  EXPECT_EQ(by_gate[0].gate, "network");

  auto by_snooze = log.Of(snoozed, TaskEvent::Kind::kDeferred);
  ASSERT_EQ(by_snooze.size(), 1u);
  EXPECT_EQ(by_snooze[0].defer_reason, DeferReason::kSnoozed);
  EXPECT_TRUE(by_snooze[0].gate.empty());
  EXPECT_EQ(by_snooze[0].next_attempt_at,
            std::optional<Timestamp>(h.clock().Now() + 10s));

  auto by_stop = log.Of(stopped, TaskEvent::Kind::kDeferred);
  ASSERT_EQ(by_stop.size(), 1u);
  EXPECT_EQ(by_stop[0].defer_reason, DeferReason::kStopping);

  // The gate's deferral closed it: opening it runs the task again.
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.runtime().SetGate("network", true).ok());
  h.clock().Advance(10s);
  DrainOptions all;
  all.wait_for_scheduled = true;
  ASSERT_TRUE(Await(h.runtime().Drain(all)).ok());
  for (TaskId id : {gated, snoozed, stopped}) {
    EXPECT_EQ(h.StatusOf(id), TaskStatus::kSucceeded) << "task " << id;
  }

  EXPECT_STREQ(DeferReasonName(DeferReason::kNone), "none");
  EXPECT_STREQ(DeferReasonName(DeferReason::kGateClosed), "gate_closed");
  EXPECT_STREQ(DeferReasonName(DeferReason::kSnoozed), "snoozed");
  EXPECT_STREQ(DeferReasonName(DeferReason::kPaused), "paused");
  EXPECT_STREQ(DeferReasonName(DeferReason::kStopping), "stopping");
  EXPECT_STREQ(DeferReasonName(DeferReason::kRecalled), "recalled");
  EXPECT_STREQ(DeferReasonName(DeferReason::kNoWorker), "no_worker");
  EXPECT_STREQ(DeferReasonName(DeferReason::kRateLimited), "rate_limited");
}

TEST(EventFieldsTest, AClaimGivenBackByAPauseIsDeferredAsPaused) {
  Harness h(1, Durability::kMemory, /*claim_ahead=*/4);
  Gate release;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("block",
                                   [&](TaskContext& task) {
                                     h.journal.Record(task.id(), "block");
                                     return release.Wait()
                                                ? Status::OK()
                                                : Status::TimedOut("gate");
                                   })
                  .ok());
  h.RegisterRecorder("t");
  EventLog log;
  h.runtime().Subscribe([&log](const TaskEvent& e) { log.Add(e); });
  ASSERT_TRUE(h.runtime().Start().ok());
  TaskId busy = h.Put("block", "b");
  ASSERT_TRUE(h.journal.WaitForSize(1));
  // The one worker is busy: this task is claimed ahead, into the pool.
  TaskId ahead = h.Put("t", "a");
  ASSERT_TRUE(h.WaitForStatus(ahead, TaskStatus::kRunning));
  ASSERT_TRUE(h.runtime().Pause().ok());
  ASSERT_TRUE(h.WaitForStatus(ahead, TaskStatus::kPending));
  h.Events();
  auto deferred = log.Of(ahead, TaskEvent::Kind::kDeferred);
  ASSERT_EQ(deferred.size(), 1u);
  EXPECT_EQ(deferred[0].defer_reason, DeferReason::kPaused);
  EXPECT_EQ(deferred[0].attempt, 0u) << "the attempt was given back";
  release.Open();
  ASSERT_TRUE(h.runtime().Resume().ok());
  h.Drain();
  EXPECT_EQ(h.StatusOf(busy), TaskStatus::kSucceeded);
  EXPECT_EQ(h.StatusOf(ahead), TaskStatus::kSucceeded);
  EXPECT_EQ(h.Info(ahead).attempts, 1u);
}

}  // namespace
}  // namespace spool
