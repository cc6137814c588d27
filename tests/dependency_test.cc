// Dependencies, chains, groups, hold/release, delete, purge, hand-off,
// progress, payload versions and events.

#include <atomic>

#include <gtest/gtest.h>

#include "storage/task_store.h"
#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Gate;
using testing::Harness;

EnqueueOptions After(std::vector<TaskId> deps,
                     DependencyFailure policy = DependencyFailure::kCancel) {
  EnqueueOptions o;
  o.depends_on = std::move(deps);
  o.on_dependency_failure = policy;
  return o;
}

// Registers "ok" (records and succeeds) and "bad" (fails once, no retry).
void RegisterOkAndBad(Harness& h) {
  h.RegisterRecorder("ok");
  HandlerOptions once;
  once.retry = RetryPolicy::None();
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "bad",
                      [&h](TaskContext& task) {
                        h.journal.Record(task.id(),
                                         std::string(task.payload()));
                        return Status::Aborted("bad");
                      },
                      once)
                  .ok());
}

TEST(DependencyTest, ADependentWaitsForAllItsDependencies) {
  Harness h(4);
  RegisterOkAndBad(h);
  TaskId a = h.Put("ok", "a");
  TaskId b = h.Put("ok", "b");
  TaskId c = h.Put("ok", "c", After({a, b, a}));
  auto info = h.Info(c);
  EXPECT_EQ(info.status, TaskStatus::kWaiting);
  EXPECT_EQ(info.depends_on, (std::vector<TaskId>{a, b})) << "deduplicated";
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  auto labels = h.journal.Labels();
  ASSERT_EQ(labels.size(), 3u);
  EXPECT_EQ(labels.back(), "c");
}

TEST(DependencyTest, AFailureCancelsDependentsTransitivelyInOneBatch) {
  Harness h(1);
  RegisterOkAndBad(h);
  h.StartRecordingEvents();
  TaskId root = h.Put("bad", "root");
  TaskId child = h.Put("ok", "child", After({root}));
  TaskId grandchild = h.Put("ok", "grandchild", After({child}));
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.StatusOf(root), TaskStatus::kFailed);
  auto child_info = h.Info(child);
  EXPECT_EQ(child_info.status, TaskStatus::kCancelled);
  EXPECT_NE(child_info.last_error.find("dependency " + std::to_string(root)),
            std::string::npos);
  EXPECT_EQ(h.StatusOf(grandchild), TaskStatus::kCancelled);
  auto events = h.Events();
  auto at = [&](const std::string& e) {
    return std::find(events.begin(), events.end(), e) - events.begin();
  };
  EXPECT_LT(at("failed:" + std::to_string(root)),
            at("cancelled:" + std::to_string(child)));
  EXPECT_LT(at("cancelled:" + std::to_string(child)),
            at("cancelled:" + std::to_string(grandchild)));
}

TEST(DependencyTest, PolicyFailFailsWithoutRunningAndRunRunsAnyway) {
  Harness h(1);
  RegisterOkAndBad(h);
  TaskId bad = h.Put("bad", "bad");
  TaskId slow_ok = h.Put("ok", "ok");
  TaskId fails = h.Put("ok", "fails", After({bad}, DependencyFailure::kFail));
  TaskId runs =
      h.Put("ok", "runs", After({bad, slow_ok}, DependencyFailure::kRun));
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  auto fail_info = h.Info(fails);
  EXPECT_EQ(fail_info.status, TaskStatus::kFailed);
  EXPECT_EQ(fail_info.attempts, 0u);
  EXPECT_EQ(h.StatusOf(runs), TaskStatus::kSucceeded);
  auto labels = h.journal.Labels();
  EXPECT_EQ(labels.back(), "runs") << "it waited for both to finish";
}

TEST(DependencyTest, DependenciesAreJudgedAtEnqueue) {
  Harness h(1);
  RegisterOkAndBad(h);
  ASSERT_TRUE(h.runtime().Start().ok());
  TaskId done = h.Put("ok", "done");
  TaskId failed = h.Put("bad", "failed");
  h.Drain();
  ASSERT_TRUE(h.runtime().Pause().ok());  // keeps the new tasks where they are
  EXPECT_EQ(h.StatusOf(h.Put("ok", "released", After({done}))),
            TaskStatus::kPending);
  h.StartRecordingEvents();
  TaskId blocked = h.Put("ok", "blocked", After({failed}));
  EXPECT_EQ(h.StatusOf(blocked), TaskStatus::kCancelled);
  auto events = h.Events();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0], "enqueued:" + std::to_string(blocked));
  EXPECT_EQ(events[1], "cancelled:" + std::to_string(blocked));
  auto missing = Await(h.runtime().Enqueue("ok", "x", After({987654})).stored);
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_NE(missing.status().message().find("987654"), std::string::npos);
}

TEST(DependencyTest, TheDependencyListIsBounded) {
  Harness h(1);
  RegisterOkAndBad(h);
  TaskId done = h.Put("ok", "done");
  // The bound counts entries as given: duplicates are dropped only after.
  std::vector<TaskId> at_limit(kMaxDependencies, done);
  EXPECT_TRUE(
      Await(h.runtime().Enqueue("ok", "x", After(at_limit)).stored).ok());
  std::vector<TaskId> over(kMaxDependencies + 1, done);
  auto refused = Await(h.runtime().Enqueue("ok", "x", After(over)).stored);
  EXPECT_TRUE(refused.status().IsInvalidArgument());
  EXPECT_NE(refused.status().message().find("depends_on has 1001 entries"),
            std::string::npos)
      << refused.status().ToString();
}

TEST(DependencyTest, CancellingAMiddleTaskSettlesItsDependents) {
  Harness h(1);
  RegisterOkAndBad(h);
  TaskId a = h.Put("ok", "a");
  TaskId b = h.Put("ok", "b", After({a}));
  TaskId c = h.Put("ok", "c", After({b}));
  TaskId d = h.Put("ok", "d", After({b}, DependencyFailure::kRun));
  EXPECT_EQ(Await(h.runtime().Cancel(b)).value(), TaskStatus::kCancelled);
  EXPECT_EQ(h.StatusOf(c), TaskStatus::kCancelled);
  EXPECT_EQ(h.StatusOf(d), TaskStatus::kPending) << "runs anyway once b ended";
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.StatusOf(a), TaskStatus::kSucceeded);
  EXPECT_EQ(h.StatusOf(d), TaskStatus::kSucceeded);
}

TEST(DependencyTest, WaitingTasksHoldTheirDedupKey) {
  Harness h(1);
  RegisterOkAndBad(h);
  TaskId a = h.Put("ok", "a");
  EnqueueOptions keyed = After({a});
  keyed.dedup_key = "k";
  TaskId waiting = h.Put("ok", "w", keyed);
  EXPECT_EQ(h.Put("ok", "again", keyed), waiting);
}

TEST(DependencyTest, RetryingADependentNeedsHealthyDependencies) {
  Harness h(1);
  RegisterOkAndBad(h);
  TaskId bad = h.Put("bad", "bad");
  TaskId dependent = h.Put("ok", "dep", After({bad}));
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  ASSERT_EQ(h.StatusOf(dependent), TaskStatus::kCancelled);
  auto refused = Await(h.runtime().Retry(dependent));
  EXPECT_TRUE(refused.status().IsFailedPrecondition());
  EXPECT_NE(refused.status().message().find("failed"), std::string::npos);
}

TEST(DependencyTest, ANeededDependencyCannotBeDeletedOrPurged) {
  Harness h(1);
  RegisterOkAndBad(h);
  ASSERT_TRUE(h.runtime().Start().ok());
  TaskId done = h.Put("ok", "done");
  TaskId free_task = h.Put("ok", "free");
  h.Drain();
  // A task waiting for `done` and for a held task keeps waiting.
  ASSERT_TRUE(h.runtime().Pause().ok());
  TaskId held = h.Put("ok", "held");
  ASSERT_TRUE(Await(h.runtime().Hold(held)).ok());
  ASSERT_TRUE(h.runtime().Resume().ok());
  TaskId waiter = h.Put("ok", "waiter", After({done, held}));
  EXPECT_EQ(h.StatusOf(waiter), TaskStatus::kWaiting);
  auto deleted = Await(h.runtime().Delete(done));
  EXPECT_TRUE(deleted.status().IsFailedPrecondition());
  EXPECT_NE(deleted.status().message().find(std::to_string(waiter)),
            std::string::npos);
  auto purged = Await(h.runtime().Purge(PurgeOptions{}));
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 1u) << "only the free task may go";
  EXPECT_TRUE(Await(h.runtime().GetTask(done)).ok());
  EXPECT_TRUE(Await(h.runtime().GetTask(free_task)).status().IsNotFound());
}

TEST(ChainTest, StepsRunOneAtATimeAndAFailingStepCancelsTheRest) {
  Harness h(3);
  RegisterOkAndBad(h);
  TaskId before = h.Put("ok", "existing");
  std::vector<TaskSpec> chain = {
      {"ok", "1", After({before})}, {"ok", "2", {}}, {"ok", "3", {}}};
  auto ids = Await(h.runtime().EnqueueChain(chain).stored);
  ASSERT_TRUE(ids.ok());
  std::vector<TaskSpec> broken = {
      {"ok", "a", {}}, {"bad", "b", {}}, {"ok", "c", {}}};
  auto broken_ids = Await(h.runtime().EnqueueChain(broken).stored);
  ASSERT_TRUE(broken_ids.ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  auto labels = h.journal.Labels();
  auto pos = [&](const char* l) {
    return std::find(labels.begin(), labels.end(), l) - labels.begin();
  };
  EXPECT_LT(pos("existing"), pos("1"));
  EXPECT_LT(pos("1"), pos("2"));
  EXPECT_LT(pos("2"), pos("3"));
  EXPECT_EQ(h.StatusOf((*broken_ids)[2]), TaskStatus::kCancelled);
  EXPECT_EQ(std::count(labels.begin(), labels.end(), "c"), 0);
}

TEST(ChainTest, AnInvalidChainStoresNothing) {
  Harness h(1);
  RegisterOkAndBad(h);
  std::vector<TaskSpec> chain = {{"ok", "1", {}}, {"nope", "2", {}}};
  auto ids = Await(h.runtime().EnqueueChain(chain).stored);
  EXPECT_TRUE(ids.status().IsNotFound());
  std::vector<TaskSpec> dangling = {{"ok", "1", After({123456})},
                                    {"ok", "2", {}}};
  EXPECT_TRUE(
      Await(h.runtime().EnqueueChain(dangling).stored).status().IsNotFound());
  auto counts = Await(h.runtime().CountByStatus());
  EXPECT_EQ(counts->total(), 0u);
}

TEST(GroupTest,
     CancelGroupCancelsQueuedAndWaitingFlagsRunningAndReachesOutsiders) {
  Harness h(1);
  Gate started, release;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [&](TaskContext& task) {
                                     if (task.payload() == "running") {
                                       started.Open();
                                       release.Wait();
                                     }
                                     return Status::OK();
                                   })
                  .ok());
  EnqueueOptions in_group;
  in_group.group = "g";
  TaskId running = h.Put("t", "running", in_group);
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(started.Wait());
  TaskId queued = h.Put("t", "queued", in_group);
  EnqueueOptions waiting_opts = After({running});
  waiting_opts.group = "g";
  TaskId waiting = h.Put("t", "waiting", waiting_opts);
  TaskId outsider = h.Put("t", "outsider", After({waiting}));
  auto count = Await(h.runtime().CancelGroup("g"));
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 3u);
  EXPECT_EQ(h.StatusOf(queued), TaskStatus::kCancelled);
  EXPECT_EQ(h.StatusOf(waiting), TaskStatus::kCancelled);
  EXPECT_EQ(h.StatusOf(outsider), TaskStatus::kCancelled);
  EXPECT_TRUE(h.Info(running).cancel_requested);
  release.Open();
  h.Drain();
  EXPECT_EQ(Await(h.runtime().CancelGroup("g")).value(), 0u);
}

TEST(HoldTest, HeldTasksWaitUntilReleased) {
  Harness h(1);
  h.RegisterRecorder("t");
  TaskId id = h.Put("t", "x");
  ASSERT_TRUE(Await(h.runtime().Hold(id)).ok());
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kHeld);
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.journal.size(), 0u);
  EXPECT_TRUE(Await(h.runtime().Release(12345)).status().IsNotFound());
  ASSERT_TRUE(Await(h.runtime().Release(id)).ok());
  h.Drain();
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kSucceeded);
  EXPECT_TRUE(Await(h.runtime().Hold(id)).status().IsFailedPrecondition());
  EXPECT_TRUE(Await(h.runtime().Release(id)).status().IsFailedPrecondition());
}

TEST(DeleteAndPurgeTest, OnlyFinishedTasksGoAndPurgeFollowsStatusAndAge) {
  Harness h(2);
  RegisterOkAndBad(h);
  TaskId pending = h.Put("ok", "p");
  EXPECT_TRUE(
      Await(h.runtime().Delete(pending)).status().IsFailedPrecondition());
  ASSERT_TRUE(h.runtime().Start().ok());
  std::vector<TaskId> old_ok;
  for (int i = 0; i < 30; ++i) old_ok.push_back(h.Put("ok", "old"));
  TaskId old_bad = h.Put("bad", "old-bad");
  h.Drain();
  h.clock().Advance(2h);
  TaskId fresh = h.Put("ok", "fresh");
  h.Drain();
  ASSERT_TRUE(Await(h.runtime().Delete(pending)).ok());
  EXPECT_TRUE(Await(h.runtime().GetTask(pending)).status().IsNotFound());

  PurgeOptions old_succeeded;
  old_succeeded.older_than = 1h;
  old_succeeded.batch_size = 7;  // several steps
  auto purged = Await(h.runtime().Purge(old_succeeded));
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(*purged, 30u);
  EXPECT_TRUE(Await(h.runtime().GetTask(fresh)).ok());
  EXPECT_TRUE(Await(h.runtime().GetTask(old_bad)).ok());
  PurgeOptions failed;
  failed.statuses = {TaskStatus::kFailed};
  EXPECT_EQ(Await(h.runtime().Purge(failed)).value(), 1u);
  PurgeOptions active;
  active.statuses = {TaskStatus::kPending};
  EXPECT_TRUE(Await(h.runtime().Purge(active)).status().IsInvalidArgument());
  PurgeOptions negative;
  negative.older_than = -1s;
  EXPECT_TRUE(Await(h.runtime().Purge(negative)).status().IsInvalidArgument());
  auto counts = Await(h.runtime().CountByStatus());
  EXPECT_EQ(counts->total(), 1u);
}

TEST(DeleteAndPurgeTest, PurgeByTypeLeavesOtherTypes) {
  Harness h(2);
  RegisterOkAndBad(h);
  ASSERT_TRUE(
      h.runtime()
          .RegisterHandler("audit", [](TaskContext&) { return Status::OK(); })
          .ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  for (int i = 0; i < 12; ++i) h.Put("ok", "x");
  std::vector<TaskId> audits;
  for (int i = 0; i < 5; ++i) audits.push_back(h.Put("audit", "kept"));
  h.Drain();
  PurgeOptions only_ok;
  only_ok.types = {"ok"};
  only_ok.batch_size = 5;  // several steps, with audit entries among them
  EXPECT_EQ(Await(h.runtime().Purge(only_ok)).value(), 12u);
  for (TaskId id : audits) EXPECT_TRUE(Await(h.runtime().GetTask(id)).ok());
  PurgeOptions unknown;
  unknown.types = {"no-such-type"};
  EXPECT_EQ(Await(h.runtime().Purge(unknown)).value(), 0u);
  EXPECT_EQ(Await(h.runtime().CountByStatus())->total(), 5u);
}

TEST(HandOffTest,
     AHandedOffTaskReleasesItsSlotSurvivesRestartAndCompletesLater) {
  Harness h(1, Durability::kSync);
  auto register_handler = [&] {
    ASSERT_TRUE(h.runtime()
                    .RegisterHandler("upload",
                                     [&](TaskContext& task) {
                                       if (task.payload() == "handoff") {
                                         task.HandOff("transfer-1");
                                       } else {
                                         h.journal.Record(task.id(), "other");
                                       }
                                       return Status::OK();
                                     })
                    .ok());
  };
  register_handler();
  TaskId id = h.Put("upload", "handoff");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Put("upload", "next");
  ASSERT_TRUE(h.journal.WaitForSize(1)) << "the slot was not released";
  // The next task may start before the hand-off's outcome is durable.
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return !h.Info(id).handoff_reference.empty(); }));
  auto info = h.Info(id);
  EXPECT_EQ(info.status, TaskStatus::kRunning);
  EXPECT_EQ(info.handoff_reference, "transfer-1");
  h.Reopen();
  register_handler();
  ASSERT_TRUE(h.runtime().Start().ok());
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kRunning) << "recovery skips hand-offs";
  EXPECT_EQ(h.Info(id).attempts, 1u);
  EXPECT_TRUE(Await(h.runtime().CompleteHandOff(id, "wrong"))
                  .status()
                  .IsFailedPrecondition());
  ASSERT_TRUE(Await(h.runtime().CompleteHandOff(id, "transfer-1")).ok());
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kSucceeded);
}

TEST(HandOffTest, AFailedHandOffFollowsTheRetryPolicy) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(2, 0s);
  std::atomic<int> runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext& task) {
                        runs++;
                        task.HandOff("ref-" + std::to_string(task.attempt()));
                        return Status::OK();
                      },
                      options)
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return !h.Info(id).handoff_reference.empty(); }));
  ASSERT_TRUE(Await(h.runtime().FailHandOff(id, "ref-1", "lost")).ok());
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return h.Info(id).handoff_reference == "ref-2"; }));
  EXPECT_EQ(h.Info(id).failures.front().error, "lost");
  ASSERT_TRUE(Await(h.runtime().FailHandOff(id, "ref-2", "lost again")).ok());
  EXPECT_EQ(h.StatusOf(id), TaskStatus::kFailed);
}

TEST(ContextTest, ProgressIsVisibleWhileRunningAndGoneAfter) {
  Harness h(1);
  Gate reported, release;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [&](TaskContext& task) {
                                     task.ReportProgress(0.25);
                                     reported.Open();
                                     release.Wait();
                                     return Status::OK();
                                   })
                  .ok());
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(reported.Wait());
  EXPECT_EQ(h.runtime().Progress(id), std::optional<double>(0.25));
  release.Open();
  h.Drain();
  EXPECT_FALSE(h.runtime().Progress(id).has_value());
}

TEST(PayloadVersionTest, OlderPayloadsAreMigratedAndNewerOnesFail) {
  Harness h(1, Durability::kSync);
  HandlerOptions v1;
  v1.version = 1;
  h.RegisterRecorder("t", v1);
  TaskId old_task = h.Put("t", "name=ada");
  h.Reopen();
  HandlerOptions v2;
  v2.version = 2;
  v2.migrate = [](uint32_t from,
                  std::string_view payload) -> Result<std::string> {
    if (from != 1) return Status::InvalidArgument("unknown version");
    return "{\"name\":\"" + std::string(payload.substr(5)) + "\"}";
  };
  h.RegisterRecorder("t", v2);
  TaskId new_task = h.Put("t", "{\"name\":\"grace\"}");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(
      h.journal.Labels(),
      (std::vector<std::string>{"{\"name\":\"ada\"}", "{\"name\":\"grace\"}"}));
  EXPECT_EQ(h.Info(old_task).payload_version, 1u);
  EXPECT_EQ(h.Info(new_task).payload_version, 2u);
  // A version-3 task seen by the v2 handler after a downgrade.
  h.Reopen();
  HandlerOptions v3;
  v3.version = 3;
  h.RegisterRecorder("t", v3);
  TaskId future = h.Put("t", "v3");
  h.Reopen();
  h.RegisterRecorder("t", v2);
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  auto info = h.Info(future);
  EXPECT_EQ(info.status, TaskStatus::kFailed);
  EXPECT_NE(info.last_error.find("newer"), std::string::npos)
      << info.last_error;
}

TEST(EventTest, EachTransitionIsReportedOnceAfterItsWrite) {
  Harness h(1);
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(2, 0s);
  std::atomic<int> runs{0};
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext&) {
                        return ++runs == 1 ? Status::Aborted("once")
                                           : Status::OK();
                      },
                      options)
                  .ok());
  h.StartRecordingEvents();
  TaskId id = h.Put("t", "");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  std::string s = std::to_string(id);
  EXPECT_EQ(h.Events(),
            (std::vector<std::string>{"enqueued:" + s, "started:" + s,
                                      "retry_scheduled:" + s, "started:" + s,
                                      "succeeded:" + s}));
}

TEST(EventTest, UnsubscribeStopsDeliveries) {
  Harness h(1);
  h.RegisterRecorder("t");
  std::atomic<int> seen{0};
  uint64_t token = h.runtime().Subscribe([&](const TaskEvent&) { seen++; });
  h.Put("t", "");
  h.runtime().Unsubscribe(token);
  int after = seen.load();
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  h.Events();  // flushes the executor
  EXPECT_EQ(seen.load(), after);
}

}  // namespace
}  // namespace spool
