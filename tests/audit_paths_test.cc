// Paths the audit of issue 14 (item 8) found untested: a failing payload
// migration, a per-task retry override at work, and the default group
// concurrency limiting a group.

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Gate;
using testing::Harness;

TEST(MigrationFailureTest, AMigrationThatFailsFailsTheTaskAtOnce) {
  Harness h(1, Durability::kSync);
  HandlerOptions v1;
  v1.version = 1;
  h.RegisterRecorder("t", v1);
  TaskId old_task = h.Put("t", "name=ada");
  h.Reopen();

  HandlerOptions v2;
  v2.version = 2;
  v2.retry = RetryPolicy::Fixed(5, 0s);  // attempts to spare: none is used
  std::atomic<int> migrations{0};
  v2.migrate = [&migrations](uint32_t,
                             std::string_view) -> Result<std::string> {
    ++migrations;
    return Status::InvalidArgument("field 'name' cannot be split");
  };
  std::atomic<int> handler_calls{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext&) {
                        ++handler_calls;
                        return Status::OK();
                      },
                      v2)
                  .ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(old_task, TaskStatus::kFailed));
  h.Drain();

  TaskInfo info = h.Info(old_task);
  EXPECT_EQ(info.attempts, 1u) << "no retry after a failed migration";
  EXPECT_EQ(migrations.load(), 1);
  EXPECT_EQ(handler_calls.load(), 0) << "the handler never saw the payload";
  EXPECT_NE(info.last_error.find("cannot be split"), std::string::npos)
      << info.last_error;
  EXPECT_NE(info.last_error.find("migrating the payload from version 1"),
            std::string::npos)
      << info.last_error;
  EXPECT_EQ(info.payload, "name=ada") << "the stored payload is kept";
  ASSERT_EQ(info.failures.size(), 1u);
}

// Counts the attempts of each task; every attempt fails.
struct AttemptCounter {
  std::mutex mutex;
  std::map<TaskId, int> attempts;
  Handler handler() {
    return [this](TaskContext& task) {
      std::lock_guard<std::mutex> lock(mutex);
      ++attempts[task.id()];
      return Status::Aborted("always fails");
    };
  }
  int of(TaskId id) {
    std::lock_guard<std::mutex> lock(mutex);
    return attempts[id];
  }
};

TEST(RetryOverrideTest, APerTaskPolicyChangesHowOftenItRuns) {
  Harness h(2);
  AttemptCounter once;
  HandlerOptions no_retry;
  no_retry.retry = RetryPolicy::None();
  ASSERT_TRUE(
      h.runtime().RegisterHandler("once", once.handler(), no_retry).ok());
  AttemptCounter thrice;
  HandlerOptions three;
  three.retry = RetryPolicy::Fixed(3, 0s);
  ASSERT_TRUE(
      h.runtime().RegisterHandler("thrice", thrice.handler(), three).ok());

  TaskId by_handler = h.Put("once", "x");
  EnqueueOptions more;
  more.retry = RetryPolicy::Fixed(4, 0s);
  TaskId overridden_up = h.Put("once", "y", more);
  TaskId by_handler_3 = h.Put("thrice", "x");
  EnqueueOptions fewer;
  fewer.retry = RetryPolicy::None();
  TaskId overridden_down = h.Put("thrice", "y", fewer);
  // A delay from the override, not the handler's 0 s.
  EnqueueOptions later;
  later.retry = RetryPolicy::Fixed(2, 1h);
  TaskId delayed = h.Put("thrice", "z", later);

  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(once.of(by_handler), 1);
  EXPECT_EQ(once.of(overridden_up), 4);
  EXPECT_EQ(thrice.of(by_handler_3), 3);
  EXPECT_EQ(thrice.of(overridden_down), 1);
  EXPECT_EQ(thrice.of(delayed), 1);
  for (TaskId id : {by_handler, overridden_up, by_handler_3, overridden_down}) {
    EXPECT_EQ(h.StatusOf(id), TaskStatus::kFailed) << "task " << id;
  }
  EXPECT_EQ(h.Info(overridden_up).attempts, 4u);
  EXPECT_EQ(h.Info(overridden_up).max_attempts, 4u);
  TaskInfo waiting = h.Info(delayed);
  EXPECT_EQ(waiting.status, TaskStatus::kRetryScheduled);
  ASSERT_TRUE(waiting.next_attempt_at.has_value());
  EXPECT_EQ(*waiting.next_attempt_at - waiting.updated_at, 1h);
}

TEST(GroupConcurrencyTest, TheDefaultLimitHoldsEachGroupAndNotOthers) {
  Harness h(4, Durability::kMemory, /*claim_ahead=*/16);
  h.options().group_concurrency = 1;  // Options' own key, no per-group limit
  h.Reopen();
  Gate first_may_finish;
  std::mutex mutex;
  std::map<std::string, int> running;
  std::map<std::string, int> most;
  std::atomic<int> started{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext& task) {
                        std::string group(task.group());
                        {
                          std::lock_guard<std::mutex> lock(mutex);
                          int now = ++running[group];
                          most[group] = std::max(most[group], now);
                        }
                        h.journal.Record(task.id(),
                                         std::string(task.payload()));
                        bool ok = true;
                        if (task.payload() == "a-1")
                          ok = first_may_finish.Wait();
                        std::lock_guard<std::mutex> lock(mutex);
                        --running[group];
                        return ok ? Status::OK() : Status::TimedOut("gate");
                      })
                  .ok());
  auto in_group = [](const char* group) {
    EnqueueOptions o;
    o.group = group;
    return o;
  };
  for (const char* label : {"a-1", "a-2", "a-3"}) {
    h.Put("t", label, in_group("a"));
  }
  TaskId other = h.Put("t", "b-1", in_group("b"));
  TaskId ungrouped = h.Put("t", "none");
  ASSERT_TRUE(h.runtime().Start().ok());
  // While a-1 holds group a's one place, b and the ungrouped task run.
  ASSERT_TRUE(h.WaitForStatus(other, TaskStatus::kSucceeded));
  ASSERT_TRUE(h.WaitForStatus(ungrouped, TaskStatus::kSucceeded));
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(running["a"], 1);
  }
  EXPECT_EQ(h.journal.size(), 3u) << "a-2 and a-3 wait for a-1";
  first_may_finish.Open();
  h.Drain();
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(most["a"], 1);
  EXPECT_EQ(h.journal.size(), 5u);
}

}  // namespace
}  // namespace spool
