// Named rate limits (Runtime::AddRateLimit, spool/rate_limit.h): shared by
// several types, split into buckets by a key, held by a handler, stored
// across a restart, and refused when malformed. All on the manual clock:
// every wait below ends when the clock is moved, never by sleeping.

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Harness;
using testing::kWait;

// The deferred events a runtime emits, with their reasons and due times.
class Deferrals {
 public:
  explicit Deferrals(Runtime& runtime) : runtime_(runtime) {
    token_ = runtime.Subscribe([this](const TaskEvent& event) {
      if (event.kind != TaskEvent::Kind::kDeferred) return;
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(event);
      grew_.notify_all();
    });
  }
  // Declared after the harness, so gone before its runtime: unsubscribe.
  ~Deferrals() { runtime_.Unsubscribe(token_); }
  // Waits for at least `n`; false if the bounded wait ran out.
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return grew_.wait_for(lock, kWait, [&] { return events_.size() >= n; });
  }
  std::vector<TaskEvent> events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

 private:
  Runtime& runtime_;
  uint64_t token_ = 0;
  std::mutex mutex_;
  std::condition_variable grew_;
  std::vector<TaskEvent> events_;
};

// Enqueues a task of `type` per payload, in order; their ids.
std::vector<TaskId> PutAll(Harness& h, const std::string& type,
                           const std::vector<std::string>& payloads) {
  std::vector<TaskId> ids;
  for (const std::string& payload : payloads)
    ids.push_back(h.Put(type, payload));
  return ids;
}

// The host part of a "host/path" payload: one bucket per host.
std::string HostOf(const TaskContext& attempt) {
  std::string_view payload = attempt.payload();
  return std::string(payload.substr(0, payload.find('/')));
}

TEST(NamedRateLimitTest, ALimitSharedByTwoTypesSpacesTheirAttemptsTogether) {
  Harness h(4);
  h.RegisterRecorder("a");
  h.RegisterRecorder("b");
  ASSERT_TRUE(
      h.runtime().AddRateLimit("api", RateLimit{2, 1min}, {"a", "b"}).ok());
  Deferrals deferrals(h.runtime());
  std::vector<TaskId> ids = {h.Put("a", "a1"), h.Put("b", "b1"),
                             h.Put("a", "a2"), h.Put("b", "b2")};
  Timestamp t0 = h.clock().Now();
  ASSERT_TRUE(h.runtime().Start().ok());

  // A burst of 2 across both types; the other two reserve the next slots,
  // one interval (30 s) apart, and wait with no attempt spent.
  ASSERT_TRUE(h.journal.WaitForSize(2));
  ASSERT_TRUE(deferrals.WaitFor(2));
  std::vector<Timestamp> due;
  for (const TaskEvent& event : deferrals.events()) {
    EXPECT_EQ(event.defer_reason, DeferReason::kRateLimited);
    ASSERT_TRUE(event.next_attempt_at.has_value());
    due.push_back(*event.next_attempt_at);
    TaskInfo info = h.Info(event.id);
    EXPECT_EQ(info.status, TaskStatus::kPending);
    EXPECT_EQ(info.attempts, 0u) << "a deferral spends no attempt";
  }
  std::sort(due.begin(), due.end());
  EXPECT_EQ(due, (std::vector<Timestamp>{t0 + 30s, t0 + 60s}));
  EXPECT_EQ(h.journal.size(), 2u);

  h.clock().Advance(30s);
  ASSERT_TRUE(h.journal.WaitForSize(3));
  h.clock().Advance(30s);
  ASSERT_TRUE(h.journal.WaitForSize(4));
  for (TaskId id : ids) {
    ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kSucceeded));
    EXPECT_EQ(h.Info(id).attempts, 1u);
  }
  EXPECT_EQ(deferrals.events().size(), 2u)
      << "a task that reserved a slot runs at it, without waiting again";
  // Each wait counted once, under the limit that made it.
  Statistics stats = h.runtime().GetStatistics();
  ASSERT_EQ(stats.rate_limits.size(), 1u);
  EXPECT_EQ(stats.rate_limits[0].name, "api");
  EXPECT_EQ(stats.rate_limits[0].deferred, 2u);
  // A wait is not a start: 4 handler runs and first starts, not 6.
  EXPECT_EQ(stats.start_latency_seconds.count, 4u);
  uint64_t handler_runs = 0;
  for (const TypeStatistics& type : stats.types)
    handler_runs += type.handler_seconds.count;
  EXPECT_EQ(handler_runs, 4u);
  EXPECT_NE(FormatPrometheus(stats).find(
                "spool_rate_limit_deferred_total{limit=\"api\"} 2\n"),
            std::string::npos);
}

TEST(NamedRateLimitTest, KeyOfSplitsALimitIntoBucketsThatWaitApart) {
  // One worker, so that each host's tasks are tried in enqueue order.
  Harness h(1);
  h.RegisterRecorder("hook");
  ASSERT_TRUE(h.runtime()
                  .AddRateLimit("per_host", RateLimit{1, 10s}, {"hook"}, HostOf)
                  .ok());
  Deferrals deferrals(h.runtime());
  std::vector<TaskId> ids = PutAll(h, "hook", {"x/1", "x/2", "y/1", "y/2"});
  TaskId x1 = ids[0], x2 = ids[1], y1 = ids[2], y2 = ids[3];
  Timestamp t0 = h.clock().Now();
  ASSERT_TRUE(h.runtime().Start().ok());

  // One attempt per host at once: each host's second task waits for its
  // own bucket, not behind the other host's.
  ASSERT_TRUE(h.WaitForStatus(x1, TaskStatus::kSucceeded));
  ASSERT_TRUE(h.WaitForStatus(y1, TaskStatus::kSucceeded));
  ASSERT_TRUE(deferrals.WaitFor(2));
  std::vector<TaskId> waited;
  for (const TaskEvent& event : deferrals.events()) {
    waited.push_back(event.id);
    EXPECT_EQ(event.next_attempt_at, t0 + 10s);
  }
  std::sort(waited.begin(), waited.end());
  EXPECT_EQ(waited, (std::vector<TaskId>{x2, y2}));

  h.clock().Advance(10s);
  ASSERT_TRUE(h.WaitForStatus(x2, TaskStatus::kSucceeded));
  ASSERT_TRUE(h.WaitForStatus(y2, TaskStatus::kSucceeded));
}

TEST(NamedRateLimitTest, AHandlerHoldsItsBucketAsForARetryAfter) {
  Harness h(4);
  Status other_hold;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("other_held",
                                   [&](TaskContext& task) {
                                     other_hold = task.HoldRateLimits(1s);
                                     return Status::OK();
                                   })
                  .ok());
  Status negative_hold;
  HandlerOptions once;
  once.retry = RetryPolicy{};
  once.retry->max_attempts = 1;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "call",
                      [&](TaskContext& task) {
                        h.journal.Record(task.id(),
                                         std::string(task.payload()));
                        if (task.payload() != "x/429") return Status::OK();
                        negative_hold = task.HoldRateLimits(-1s);
                        Status held = task.HoldRateLimits(30s);
                        if (!held.ok()) return held;
                        return Status::IOError("HTTP 429, Retry-After: 30");
                      },
                      once)
                  .ok());
  ASSERT_TRUE(h.runtime()
                  .AddRateLimit("api", RateLimit{100, 1s}, {"call"}, HostOf)
                  .ok());
  Deferrals deferrals(h.runtime());
  TaskId limited = h.Put("call", "x/429");
  TaskId unlimited = h.Put("other_held", "");
  Timestamp t0 = h.clock().Now();
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(limited, TaskStatus::kFailed));
  ASSERT_TRUE(h.WaitForStatus(unlimited, TaskStatus::kSucceeded));
  EXPECT_TRUE(negative_hold.IsInvalidArgument()) << negative_hold.ToString();
  EXPECT_TRUE(other_hold.IsFailedPrecondition()) << other_hold.ToString();

  // Host x is held for 30 s; host y is not.
  TaskId x2 = h.Put("call", "x/2");
  TaskId y1 = h.Put("call", "y/1");
  ASSERT_TRUE(h.WaitForStatus(y1, TaskStatus::kSucceeded));
  ASSERT_TRUE(deferrals.WaitFor(1));
  TaskEvent waited = deferrals.events().front();
  EXPECT_EQ(waited.id, x2);
  EXPECT_EQ(waited.defer_reason, DeferReason::kRateLimited);
  EXPECT_EQ(waited.next_attempt_at, t0 + 30s);

  h.clock().Advance(30s);
  ASSERT_TRUE(h.WaitForStatus(x2, TaskStatus::kSucceeded));
  EXPECT_EQ(h.Info(x2).attempts, 1u);
}

TEST(NamedRateLimitTest, TheBucketsStateSurvivesARestart) {
  Harness h(2, Durability::kSync);
  auto setup = [&] {
    h.RegisterRecorder("t");
    ASSERT_TRUE(h.runtime()
                    .AddRateLimit("slow", RateLimit{1, 1min}, {"t"}, HostOf)
                    .ok());
  };
  setup();
  Timestamp t0 = h.clock().Now();
  TaskId first = h.Put("t", "x/1");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(first, TaskStatus::kSucceeded));

  // Host x spent its minute before the restart; it still has after it.
  h.Reopen();
  setup();
  Deferrals deferrals(h.runtime());
  TaskId second = h.Put("t", "x/2");
  TaskId other = h.Put("t", "y/1");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(other, TaskStatus::kSucceeded));
  ASSERT_TRUE(deferrals.WaitFor(1));
  EXPECT_EQ(deferrals.events().front().id, second);
  EXPECT_EQ(deferrals.events().front().next_attempt_at, t0 + 1min);
  h.clock().Advance(1min);
  ASSERT_TRUE(h.WaitForStatus(second, TaskStatus::kSucceeded));
}

TEST(NamedRateLimitTest, ARemovedLimitsStoredStateIsDeletedAtStart) {
  Harness h(1, Durability::kSync);
  h.RegisterRecorder("t");
  ASSERT_TRUE(h.runtime().AddRateLimit("old", RateLimit{1, 1min}, {"t"}).ok());
  TaskId first = h.Put("t", "1");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(first, TaskStatus::kSucceeded));

  // Started without "old": its bucket's state is deleted, and logged.
  h.Reopen();
  h.RegisterRecorder("t");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(h.Put("t", "2"), TaskStatus::kSucceeded));
  EXPECT_TRUE(h.runtime().GetStatistics().rate_limits.empty());

  // Added again within the minute, it starts from an empty bucket: the
  // stored minute of the first run is gone.
  h.Reopen();
  h.RegisterRecorder("t");
  ASSERT_TRUE(h.runtime().AddRateLimit("old", RateLimit{1, 1min}, {"t"}).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(h.Put("t", "3"), TaskStatus::kSucceeded));
  EXPECT_EQ(h.runtime().GetStatistics().rate_limits[0].deferred, 0u);
}

TEST(NamedRateLimitTest, ConfigTablesAddLimitsAndCodeWinsForItsNames) {
  Harness h(1, Durability::kSync);
  h.options().rate_limits["from_file"] = {1, 1min, {"a"}};
  h.options().rate_limits["coded"] = {1, 1min, {"b"}};
  h.Reopen();
  h.RegisterRecorder("a");
  h.RegisterRecorder("b");
  ASSERT_TRUE(
      h.runtime().AddRateLimit("coded", RateLimit{2, 1min}, {"b"}).ok());
  Deferrals deferrals(h.runtime());
  std::vector<TaskId> a = PutAll(h, "a", {"a1", "a2"});
  std::vector<TaskId> b = PutAll(h, "b", {"b1", "b2"});
  ASSERT_TRUE(h.runtime().Start().ok());
  // The file's limit holds a2 back; the code's 2 a minute lets both b run.
  for (TaskId id : {a[0], b[0], b[1]}) {
    ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kSucceeded)) << id;
  }
  ASSERT_TRUE(deferrals.WaitFor(1));
  EXPECT_EQ(deferrals.events().front().id, a[1]);
  EXPECT_EQ(deferrals.events().front().defer_reason, DeferReason::kRateLimited);
}

TEST(NamedRateLimitTest, MalformedLimitsAreRefusedNamingTheField) {
  Harness h(1);
  Runtime& rt = h.runtime();
  auto added = [&](std::string name, RateLimit limit,
                   std::vector<std::string> types) {
    return rt.AddRateLimit(name, limit, std::move(types));
  };
  Status s = added("", RateLimit{1, 1s}, {"t"});
  EXPECT_TRUE(s.IsInvalidArgument() &&
              s.message().find("name") != std::string::npos)
      << s.ToString();
  s = added("a", RateLimit{0, 1s}, {"t"});
  EXPECT_TRUE(s.IsInvalidArgument() &&
              s.message().find("count") != std::string::npos)
      << s.ToString();
  s = added("a", RateLimit{1, 0s}, {"t"});
  EXPECT_TRUE(s.IsInvalidArgument() &&
              s.message().find("period") != std::string::npos)
      << s.ToString();
  s = added("a", RateLimit{1, 1s}, {});
  EXPECT_TRUE(s.IsInvalidArgument() &&
              s.message().find("types") != std::string::npos)
      << s.ToString();
  s = added("a", RateLimit{1, 1s}, {"t", ""});
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(added(std::string(300, 'n'), RateLimit{1, 1s}, {"t"})
                  .IsInvalidArgument());
  ASSERT_TRUE(added("a", RateLimit{1, 1s}, {"t"}).ok());
  s = added("a", RateLimit{2, 1s}, {"u"});
  EXPECT_TRUE(s.IsFailedPrecondition() &&
              s.message().find("'a'") != std::string::npos)
      << s.ToString();
  h.RegisterRecorder("t");
  ASSERT_TRUE(rt.Start().ok());
  EXPECT_TRUE(added("b", RateLimit{1, 1s}, {"t"}).IsFailedPrecondition());
}

TEST(NamedRateLimitTest, AKeyFunctionThatFailsFailsTheAttemptNotTheQueue) {
  Harness h(2);
  HandlerOptions once;
  once.retry = RetryPolicy{};
  once.retry->max_attempts = 1;
  h.RegisterRecorder("t", once);
  ASSERT_TRUE(h.runtime()
                  .AddRateLimit("keyed", RateLimit{10, 1s}, {"t"},
                                [](const TaskContext& attempt) -> std::string {
                                  if (attempt.payload() == "throw") {
                                    throw std::runtime_error("no host");
                                  }
                                  if (attempt.payload() == "long") {
                                    return std::string(kMaxRateKeyBytes + 1,
                                                       'k');
                                  }
                                  return "ok";
                                })
                  .ok());
  TaskId thrower = h.Put("t", "throw");
  TaskId too_long = h.Put("t", "long");
  TaskId fine = h.Put("t", "fine");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(thrower, TaskStatus::kFailed));
  ASSERT_TRUE(h.WaitForStatus(too_long, TaskStatus::kFailed));
  ASSERT_TRUE(h.WaitForStatus(fine, TaskStatus::kSucceeded));
  EXPECT_NE(h.Info(thrower).last_error.find(
                "rate limit 'keyed': key_of threw: no host"),
            std::string::npos)
      << h.Info(thrower).last_error;
  EXPECT_NE(h.Info(too_long).last_error.find("1025 bytes"), std::string::npos)
      << h.Info(too_long).last_error;
  EXPECT_EQ(h.journal.Ids(), std::vector<TaskId>{fine})
      << "no handler runs for an attempt whose key could not be had";
}

}  // namespace
}  // namespace spool
