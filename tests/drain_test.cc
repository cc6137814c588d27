// Drain's options (issue 15): waiting for tasks due later, and a deadline.

#include <atomic>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Harness;
using ::testing::HasSubstr;

// A handler that fails its first attempt; the retry is due 1 h later on
// the harness's manual clock.
void RegisterFailsOnce(Harness& h, std::atomic<int>* runs) {
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(2, 1h);
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [runs](TaskContext& task) {
                        ++*runs;
                        return task.attempt() == 1 ? Status::IOError("first")
                                                   : Status::OK();
                      },
                      options)
                  .ok());
}

TEST(DrainOptionsTest, WaitForScheduledWaitsForARetryDueLater) {
  Harness h(2);
  std::atomic<int> runs{0};
  RegisterFailsOnce(h, &runs);
  TaskId id = h.Put("t", "");
  EnqueueOptions later;
  later.delay = 30min;
  TaskId delayed = h.Put("t", "", later);
  ASSERT_TRUE(h.runtime().Start().ok());

  // The plain drain does not count the retry due later.
  ASSERT_TRUE(Await(h.runtime().Drain()).ok());
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kRetryScheduled);
  EXPECT_EQ(h.StatusOf(delayed), TaskStatus::kPending);

  // Waiting for scheduled tasks, with a short limit: the clock does not
  // move, so it times out, deterministically.
  DrainOptions settle;
  settle.wait_for_scheduled = true;
  settle.timeout = 100ms;
  auto timed_out = Await(h.runtime().Drain(settle));
  EXPECT_TRUE(timed_out.status().IsTimedOut()) << timed_out.status().ToString();

  // Without a limit it resolves once the clock has brought every task to
  // an end: the delayed task's two attempts and the retry.
  settle.timeout = Duration(0);
  Future<void> settled = h.runtime().Drain(settle);
  h.clock().Advance(30min);
  ASSERT_TRUE(h.WaitForStatus(delayed, TaskStatus::kRetryScheduled));
  EXPECT_FALSE(settled.Ready());
  h.clock().Advance(30min);  // id's retry is due
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kSucceeded));
  EXPECT_FALSE(settled.Ready());  // delayed's retry is still 30 min away
  h.clock().Advance(30min);
  ASSERT_TRUE(Await(settled).ok());
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kSucceeded);
  EXPECT_EQ(h.StatusOf(delayed), TaskStatus::kSucceeded);
  EXPECT_EQ(runs.load(), 4);
}

TEST(DrainOptionsTest, APausedQueueCountsAsSettled) {
  Harness h(1);
  std::atomic<int> runs{0};
  RegisterFailsOnce(h, &runs);
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kRetryScheduled));
  ASSERT_TRUE(h.runtime().Pause().ok());
  DrainOptions settle;
  settle.wait_for_scheduled = true;
  settle.timeout = 60s;
  // Nothing runs on its own while everything is paused.
  ASSERT_TRUE(Await(h.runtime().Drain(settle)).ok());
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kRetryScheduled);
}

TEST(DrainOptionsTest, BadTimeoutAndCloseWhileWaiting) {
  Harness h(1);
  std::atomic<int> runs{0};
  RegisterFailsOnce(h, &runs);
  h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  DrainOptions bad;
  bad.timeout = -1ms;
  auto refused = Await(h.runtime().Drain(bad));
  EXPECT_TRUE(refused.status().IsInvalidArgument());
  EXPECT_THAT(refused.status().ToString(), HasSubstr("timeout"));

  DrainOptions settle;
  settle.wait_for_scheduled = true;
  Future<void> waiting = h.runtime().Drain(settle);
  h.Close();
  auto closed = Await(waiting);
  EXPECT_TRUE(closed.status().IsClosed()) << closed.status().ToString();
}

}  // namespace
}  // namespace spool
