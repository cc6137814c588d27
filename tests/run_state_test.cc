// Stop, then Start again; RunState and IsClosed (issue 14, item 4).

#include <atomic>
#include <string>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Gate;
using testing::Harness;

TEST(RunStateTest, StopLetsHandlersFinishKeepsTheQueueOpenAndStartRunsAgain) {
  Harness h(2, Durability::kMemory, /*claim_ahead=*/8);
  EXPECT_EQ(h.runtime().RunState(), RunState::kIdle);
  EXPECT_FALSE(h.runtime().IsClosed());
  // Stop before any Start: nothing to stop.
  ASSERT_TRUE(Await(h.runtime().Stop()).ok());

  // "finish": sees the stop, then finishes (OK) once the test lets it.
  // "give_back": returns an error once it sees the stop: given back.
  Gate finish;
  std::atomic<int> saw_stopping{0};
  std::atomic<int> give_back_runs{0};
  ASSERT_TRUE(
      h.runtime()
          .RegisterHandler("finish",
                           [&](TaskContext& task) {
                             h.journal.Record(task.id(), "finish");
                             if (task.WaitForCancelOrStop(testing::kWait) &&
                                 task.stopping()) {
                               ++saw_stopping;
                             }
                             return finish.Wait() ? Status::OK()
                                                  : Status::TimedOut("gate");
                           })
          .ok());
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("give_back",
                                   [&](TaskContext& task) {
                                     int run = ++give_back_runs;
                                     h.journal.Record(task.id(), "give_back");
                                     if (run == 1) {
                                       task.WaitForCancelOrStop(testing::kWait);
                                       if (task.stopping()) {
                                         return Status::Aborted(
                                             "stopping, try later");
                                       }
                                     }
                                     return Status::OK();
                                   })
                  .ok());
  h.RegisterRecorder("later");

  ASSERT_TRUE(h.runtime().Start().ok());
  EXPECT_EQ(h.runtime().RunState(), RunState::kRunning);
  ASSERT_TRUE(h.runtime().Pause().ok());
  EXPECT_EQ(h.runtime().RunState(), RunState::kPaused);
  ASSERT_TRUE(h.runtime().Resume().ok());
  EXPECT_EQ(h.runtime().RunState(), RunState::kRunning);
  EXPECT_TRUE(h.runtime().Start().IsFailedPrecondition());

  TaskId finishing = h.Put("finish", "f");
  TaskId giving_back = h.Put("give_back", "g");
  ASSERT_TRUE(h.journal.WaitForSize(2));
  // Both workers are busy: this one waits (claimed ahead, or queued).
  TaskId waiting = h.Put("later", "w");
  Future<void> drain = h.runtime().Drain();

  Future<void> stopped = h.runtime().Stop();
  // "finish" cannot return before the gate opens: still stopping.
  EXPECT_EQ(h.runtime().RunState(), RunState::kStopping);
  EXPECT_TRUE(h.runtime().Start().IsFailedPrecondition());
  EXPECT_FALSE(stopped.Ready());
  // A second Stop is the same stop.
  Future<void> again = h.runtime().Stop();
  EXPECT_FALSE(again.Ready());
  // A Drain under way is told the runtime stopped.
  auto drained = Await(drain);
  EXPECT_TRUE(drained.status().IsAborted()) << drained.status().ToString();

  // The queue stays open while stopping: enqueues, reads, watches.
  TaskId enqueued_while_stopping = h.Put("later", "s");
  EXPECT_EQ(h.StatusOf(enqueued_while_stopping), TaskStatus::kPending);
  std::atomic<int> watch_calls{0};
  auto watch =
      h.runtime().WatchCountByStatus([&](const Result<StatusCounts>& counts) {
        if (counts.ok()) ++watch_calls;
      });
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  ASSERT_TRUE(testing::WaitUntil([&] { return watch_calls > 0; }));

  finish.Open();
  ASSERT_TRUE(Await(stopped).ok());
  ASSERT_TRUE(Await(again).ok());
  EXPECT_EQ(h.runtime().RunState(), RunState::kIdle);
  EXPECT_EQ(saw_stopping.load(), 1) << "the handler saw stopping()";

  // The handler that returned OK succeeded; the one that gave up is back
  // in the queue with its attempt given back; the waiting one never ran.
  EXPECT_EQ(h.StatusOf(finishing), TaskStatus::kSucceeded);
  TaskInfo given_back = h.Info(giving_back);
  EXPECT_EQ(given_back.status, TaskStatus::kPending);
  EXPECT_EQ(given_back.attempts, 0u);
  EXPECT_EQ(h.StatusOf(waiting), TaskStatus::kPending);
  EXPECT_EQ(h.journal.size(), 2u);

  // Idle: still open, Stop is a no-op, and Start runs the rest.
  TaskId enqueued_while_idle = h.Put("later", "i");
  ASSERT_TRUE(Await(h.runtime().Stop()).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  EXPECT_EQ(h.runtime().RunState(), RunState::kRunning);
  h.Drain();
  for (TaskId id :
       {giving_back, waiting, enqueued_while_stopping, enqueued_while_idle}) {
    EXPECT_EQ(h.StatusOf(id), TaskStatus::kSucceeded) << "task " << id;
  }
  EXPECT_EQ(h.Info(giving_back).attempts, 1u);
  EXPECT_EQ(give_back_runs.load(), 2);

  // A second round: Stop with nothing running ends at once.
  ASSERT_TRUE(Await(h.runtime().Stop()).ok());
  EXPECT_EQ(h.runtime().RunState(), RunState::kIdle);
  ASSERT_TRUE(h.runtime().Start().ok());

  ASSERT_TRUE(Await(h.runtime().Close()).ok());
  EXPECT_TRUE(h.runtime().IsClosed());
  EXPECT_EQ(h.runtime().RunState(), RunState::kIdle);
  EXPECT_TRUE(h.runtime().Start().IsClosed());
  EXPECT_TRUE(Await(h.runtime().Stop()).status().IsClosed());
}

TEST(RunStateTest, APauseRestoredAtOpenShowsAsPausedOnceStarted) {
  Harness h(1, Durability::kSync);
  h.RegisterRecorder("t");
  ASSERT_TRUE(h.runtime().Pause().ok());
  // The pause is stored with the next commit.
  h.Put("t", "x");
  h.Reopen();
  h.RegisterRecorder("t");
  EXPECT_EQ(h.runtime().RunState(), RunState::kIdle);
  ASSERT_TRUE(h.runtime().Start().ok());
  EXPECT_EQ(h.runtime().RunState(), RunState::kPaused);
  ASSERT_TRUE(h.runtime().Resume().ok());
  EXPECT_EQ(h.runtime().RunState(), RunState::kRunning);
  h.Drain();
  EXPECT_EQ(h.journal.size(), 1u);
}

TEST(RunStateTest, RunStateNames) {
  EXPECT_STREQ(RunStateName(RunState::kIdle), "idle");
  EXPECT_STREQ(RunStateName(RunState::kRunning), "running");
  EXPECT_STREQ(RunStateName(RunState::kPaused), "paused");
  EXPECT_STREQ(RunStateName(RunState::kStopping), "stopping");
}

}  // namespace
}  // namespace spool
