// Lifecycle: close waits for handlers, restarts continue where they left
// off, and the whole round of durable_queue's "definition of done".

#include <atomic>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Gate;
using testing::Harness;

TEST(LifecycleTest, CloseWaitsForARunningHandlerAndRecordsItsOutcome) {
  Harness h(1, Durability::kSync);
  Gate started;
  std::atomic<bool> finished{false};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [&](TaskContext&) {
                                     started.Open();
                                     std::this_thread::sleep_for(200ms);
                                     finished = true;
                                     return Status::OK();
                                   })
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(started.Wait());
  h.Close();
  EXPECT_TRUE(finished.load());
  h.Reopen();
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kSucceeded);
}

TEST(LifecycleTest, ACleanRestartDoesNotRunFinishedWorkAgain) {
  Harness h(2, Durability::kSync);
  h.RegisterRecorder("t");
  for (int i = 0; i < 5; ++i) h.Put("t", std::to_string(i));
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  ASSERT_EQ(h.journal.size(), 5u);
  h.Reopen();
  h.RegisterRecorder("t");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.journal.size(), 5u);
}

TEST(LifecycleTest, ARestartContinuesAJitteredRetryWithoutANewEnqueue) {
  Harness h(1, Durability::kSync);
  HandlerOptions options;
  options.retry = RetryPolicy::Exponential(3, 10s, 1min, 0.5);
  std::atomic<int> runs{0};
  auto handler = [&](TaskContext&) {
    return ++runs == 1 ? Status::Aborted("first") : Status::OK();
  };
  ASSERT_TRUE(h.runtime().RegisterHandler("t", handler, options).ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kRetryScheduled));
  auto due = *h.Info(id).next_attempt_at;
  auto delay = due - h.Info(id).updated_at;
  EXPECT_GE(delay, 5s);
  EXPECT_LT(delay, 15s);
  h.Reopen();
  ASSERT_TRUE(h.runtime().RegisterHandler("t", handler, options).ok());
  h.StartRecordingEvents();
  ASSERT_TRUE(h.runtime().Start().ok());
  EXPECT_EQ(*h.Info(id).next_attempt_at, due) << "the stored due time holds";
  h.clock().Advance(15s);
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kSucceeded));
  // A reader can see the commit before the writer has posted its events;
  // the drain's answer comes after them, so it is the barrier.
  h.Drain();
  std::string s = std::to_string(id);
  EXPECT_EQ(h.Events(),
            (std::vector<std::string>{"started:" + s, "succeeded:" + s}));
}

TEST(LifecycleTest, DefinitionOfDoneRound) {
  // Enqueue, fail, stop, reload, restart, retry by hand, complete; with the
  // exact events each runtime instance sees.
  Harness h(1, Durability::kSync);
  HandlerOptions once;
  once.retry = RetryPolicy::None();
  std::atomic<bool> healthy{false};
  auto handler = [&](TaskContext&) {
    return healthy ? Status::OK() : Status::Aborted("server down");
  };
  ASSERT_TRUE(h.runtime().RegisterHandler("sync", handler, once).ok());
  h.StartRecordingEvents();
  TaskId id = h.Put("sync", "record-1");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  std::string s = std::to_string(id);
  EXPECT_EQ(h.Events(), (std::vector<std::string>{
                            "enqueued:" + s, "started:" + s, "failed:" + s}));
  auto failed = h.Info(id);
  EXPECT_EQ(failed.last_error, "server down");

  h.Reopen();
  ASSERT_TRUE(h.runtime().RegisterHandler("sync", handler, once).ok());
  h.StartRecordingEvents();
  ASSERT_TRUE(h.runtime().Start().ok());
  healthy = true;
  ASSERT_TRUE(Await(h.runtime().Retry(id)).ok());
  h.Drain();
  EXPECT_EQ(h.Events(),
            (std::vector<std::string>{"enqueued:" + s, "started:" + s,
                                      "succeeded:" + s}));
  auto done = h.Info(id);
  EXPECT_EQ(done.status, TaskStatus::kSucceeded);
  EXPECT_EQ(done.attempts, 1u);
  EXPECT_EQ(done.payload, "record-1");
}

}  // namespace
}  // namespace spool
