// Retention (Options::retention_*) and uniqueness over a window
// (EnqueueOptions::unique_for, on_duplicate), issue 15. Every age and window
// runs on a manual clock; every wait is bounded.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "runtime/test_hooks.h"
#include "tests/harness.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Harness;
using testing::TempDir;
using testing::WaitUntil;

// A runtime with every retention age set by the test, the steps of its
// passes recorded (TestHooks::after_retention_step), and handlers that
// finish a task in each of the ways retention tells apart.
class RetentionRig {
 public:
  explicit RetentionRig(Durability durability = Durability::kMemory)
      : clock_(std::make_shared<ManualClock>(
            Timestamp(std::chrono::seconds(1767225600)))) {
    options_.path = dir_.Sub("queue");
    options_.durability = durability;
    options_.workers = 2;
    options_.clock = clock_;
    options_.close_timeout = 10s;
  }
  ~RetentionRig() { Close(); }

  Options& options() { return options_; }
  ManualClock& clock() { return *clock_; }
  Runtime& runtime() { return *runtime_; }

  // Opens, registers "ok", "permanent" (fails at once with attempts left:
  // `failed`) and "once" (one attempt, fails: `dead`), and starts.
  void OpenAndStart() {
    TestHooks hooks;
    hooks.after_retention_step = [this](uint64_t deleted) {
      std::lock_guard<std::mutex> lock(mutex_);
      steps_.push_back(deleted);
    };
    ASSERT_TRUE(OpenWithHooks(options_, hooks, &runtime_).ok());
    ASSERT_TRUE(runtime_->RegisterHandler("ok", testing::Ok).ok());
    HandlerOptions permanent;
    permanent.retry_if = [](const Status&) { return false; };
    ASSERT_TRUE(runtime_
                    ->RegisterHandler(
                        "permanent",
                        [](TaskContext&) { return Status::Aborted("no"); },
                        permanent)
                    .ok());
    HandlerOptions once;
    once.retry = RetryPolicy::None();
    ASSERT_TRUE(
        runtime_
            ->RegisterHandler(
                "once", [](TaskContext&) { return Status::Aborted("x"); }, once)
            .ok());
    ASSERT_TRUE(runtime_->Start().ok());
  }

  void Close() {
    if (!runtime_) return;
    EXPECT_TRUE(Await(runtime_->Close()).ok());
    runtime_.reset();
  }

  TaskId Put(const std::string& type, EnqueueOptions options = {}) {
    auto stored = Await(runtime_->Enqueue(type, "p", options).stored);
    EXPECT_TRUE(stored.ok()) << stored.status().ToString();
    return stored.ok() ? *stored : 0;
  }
  void Drain() { ASSERT_TRUE(Await(runtime_->Drain()).ok()); }

  bool Exists(TaskId id) { return Await(runtime_->GetTask(id)).ok(); }
  // Waits (bounded) until task `id` is gone.
  bool WaitUntilGone(TaskId id) {
    return WaitUntil([&] { return !Exists(id); });
  }

  std::vector<uint64_t> Steps() {
    std::lock_guard<std::mutex> lock(mutex_);
    return steps_;
  }

 private:
  TempDir dir_;
  std::shared_ptr<ManualClock> clock_;
  Options options_;
  std::unique_ptr<Runtime> runtime_;
  std::mutex mutex_;
  std::vector<uint64_t> steps_;
};

TEST(RetentionTest, EachStatusGoesAfterItsOwnAgeAndYoungerTasksStay) {
  RetentionRig rig;
  rig.options().retention_succeeded = 1h;
  rig.options().retention_failed = 2h;
  rig.options().retention_dead = 3h;
  rig.options().retention_cancelled = 4h;
  rig.OpenAndStart();
  TaskId succeeded = rig.Put("ok");
  TaskId failed = rig.Put("permanent");
  TaskId dead = rig.Put("once");
  EnqueueOptions later;
  later.delay = 1000h;
  TaskId cancelled = rig.Put("ok", later);
  ASSERT_TRUE(Await(rig.runtime().Cancel(cancelled)).ok());
  rig.Drain();
  auto info = Await(rig.runtime().GetTask(failed));
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->status, TaskStatus::kFailed);
  ASSERT_LT(info->attempts, info->max_attempts) << "failed with attempts left";
  info = Await(rig.runtime().GetTask(dead));
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->status, TaskStatus::kFailed);
  ASSERT_EQ(info->attempts, info->max_attempts) << "used every attempt";

  rig.clock().Advance(50min);
  TaskId young = rig.Put("ok");
  rig.Drain();
  rig.clock().Advance(20min);  // succeeded 70 min old, young 20 min
  ASSERT_TRUE(rig.WaitUntilGone(succeeded));
  // The same step examined the young one and kept it.
  EXPECT_TRUE(rig.Exists(young));
  EXPECT_TRUE(rig.Exists(failed));
  EXPECT_TRUE(rig.Exists(dead));
  EXPECT_TRUE(rig.Exists(cancelled));

  rig.clock().Advance(60min);  // 130 min
  ASSERT_TRUE(rig.WaitUntilGone(failed));
  EXPECT_TRUE(rig.Exists(dead));
  EXPECT_TRUE(rig.Exists(cancelled));
  rig.clock().Advance(60min);  // 190 min
  ASSERT_TRUE(rig.WaitUntilGone(dead));
  EXPECT_TRUE(rig.Exists(cancelled));
  rig.clock().Advance(60min);  // 250 min
  ASSERT_TRUE(rig.WaitUntilGone(cancelled));
  EXPECT_FALSE(rig.Exists(young)) << "the young task aged out meanwhile";
}

TEST(RetentionTest, PrunesInBoundedBatchesWithOtherWorkBetween) {
  RetentionRig rig;
  rig.options().retention_succeeded = 1h;
  rig.options().retention_batch_size = 7;
  rig.OpenAndStart();
  std::vector<TaskId> old;
  for (int i = 0; i < 50; ++i) old.push_back(rig.Put("ok"));
  rig.Drain();
  rig.clock().Advance(2h);
  ASSERT_TRUE(rig.WaitUntilGone(old.back()));
  ASSERT_TRUE(WaitUntil([&] {
    uint64_t total = 0;
    for (uint64_t n : rig.Steps()) total += n;
    return total == 50;
  }));
  size_t deleting_steps = 0;
  for (uint64_t n : rig.Steps()) {
    EXPECT_LE(n, 7u) << "a step examines at most batch_size entries";
    deleting_steps += n > 0;
  }
  EXPECT_EQ(deleting_steps, 8u) << "50 tasks, 7 per step";
  for (TaskId id : old) EXPECT_FALSE(rig.Exists(id));
  // The queue goes on as before.
  TaskId after = rig.Put("ok");
  rig.Drain();
  EXPECT_TRUE(rig.Exists(after));
}

TEST(RetentionTest, ForeverKeepsAStatusAndANeededDependencyStays) {
  RetentionRig rig;
  rig.options().retention_succeeded = 1h;
  rig.options().retention_cancelled = Duration(0);  // forever
  rig.OpenAndStart();
  TaskId needed = rig.Put("ok");
  TaskId free_task = rig.Put("ok");
  EnqueueOptions later;
  later.delay = 1000h;
  TaskId cancelled = rig.Put("ok", later);
  ASSERT_TRUE(Await(rig.runtime().Cancel(cancelled)).ok());
  rig.Drain();
  // A task waiting for `needed` and for a held one keeps waiting.
  TaskId held = rig.Put("ok", later);
  ASSERT_TRUE(Await(rig.runtime().Hold(held)).ok());
  EnqueueOptions after;
  after.depends_on = {needed, held};
  TaskId waiter = rig.Put("ok", after);
  rig.clock().Advance(30 * 24h);
  ASSERT_TRUE(rig.WaitUntilGone(free_task));
  EXPECT_TRUE(rig.Exists(needed)) << "waiting task " << waiter << " needs it";
  EXPECT_TRUE(rig.Exists(cancelled)) << "cancelled tasks are kept forever";
}

TEST(RetentionTest, KeepsWorkingAcrossARestartOnDisk) {
  RetentionRig rig(Durability::kSync);
  rig.options().retention_succeeded = 1h;
  rig.OpenAndStart();
  TaskId first = rig.Put("ok");
  rig.Drain();
  rig.Close();
  rig.clock().Advance(2h);
  rig.OpenAndStart();  // the first pass runs at Start
  ASSERT_TRUE(rig.WaitUntilGone(first));
  TaskId second = rig.Put("ok");
  rig.Drain();
  rig.clock().Advance(2h);
  ASSERT_TRUE(rig.WaitUntilGone(second));
}

// ---------------------------------------------------------------------------
// unique_for and on_duplicate.

EnqueueOptions Unique(const std::string& key, Duration window) {
  EnqueueOptions options;
  options.dedup_key = key;
  options.unique_for = window;
  return options;
}

TEST(UniqueForTest, HoldsTheKeyAfterTheTaskFinishesAndFreesItAfterTheWindow) {
  Harness h(1);
  h.RegisterRecorder("t");
  ASSERT_TRUE(h.runtime().Start().ok());
  TaskId first = h.Put("t", "1", Unique("k", 1h));
  h.Drain();
  ASSERT_EQ(h.StatusOf(first), TaskStatus::kSucceeded);
  EXPECT_EQ(h.Put("t", "2", Unique("k", 1h)), first);
  h.clock().Advance(59min);
  EXPECT_EQ(h.Put("t", "3", Unique("k", 1h)), first);
  h.clock().Advance(1min);
  TaskId next = h.Put("t", "4", Unique("k", 1h));
  EXPECT_NE(next, first) << "the window has closed";
  h.Drain();
  EXPECT_EQ(h.journal.Labels(), (std::vector<std::string>{"1", "4"}));
  // Without unique_for the key is free once its task ends, as before.
  EnqueueOptions plain;
  plain.dedup_key = "p";
  TaskId a = h.Put("t", "a", plain);
  h.Drain();
  EXPECT_NE(h.Put("t", "b", plain), a);
}

TEST(UniqueForTest, TheReservationSurvivesAReopenAndRetentionKeepsItsTask) {
  Harness h(1, Durability::kSync);
  h.RegisterRecorder("t");
  ASSERT_TRUE(h.runtime().Start().ok());
  TaskId reserved = h.Put("t", "r", Unique("k", 10 * 24h));
  TaskId plain = h.Put("t", "p");
  h.Drain();
  h.clock().Advance(2 * 24h);  // past retention.succeeded's 24 h
  h.Reopen();
  h.RegisterRecorder("t");
  ASSERT_TRUE(h.runtime().Start().ok());
  // Retention's first pass deletes the plain task and keeps the reserved.
  ASSERT_TRUE(WaitUntil(
      [&] { return Await(h.runtime().GetTask(plain)).status().IsNotFound(); }));
  EXPECT_EQ(h.StatusOf(reserved), TaskStatus::kSucceeded);
  EXPECT_EQ(h.Put("t", "again", Unique("k", 10 * 24h)), reserved);
  // Once the window closes, retention deletes it, and the key is free.
  h.clock().Advance(9 * 24h);
  ASSERT_TRUE(WaitUntil([&] {
    return Await(h.runtime().GetTask(reserved)).status().IsNotFound();
  }));
  TaskId fresh = h.Put("t", "fresh", Unique("k", 10 * 24h));
  EXPECT_NE(fresh, reserved);
  h.Drain();
  EXPECT_EQ(h.journal.Labels(), (std::vector<std::string>{"r", "p", "fresh"}));
}

TEST(UniqueForTest, ARetriedTaskKeepsItsOwnReservation) {
  Harness h(1);
  HandlerOptions once;
  once.retry = RetryPolicy::None();
  ASSERT_TRUE(
      h.runtime()
          .RegisterHandler(
              "t", [](TaskContext&) { return Status::Aborted("x"); }, once)
          .ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  TaskId id = h.Put("t", "1", Unique("k", 1h));
  h.Drain();
  ASSERT_EQ(h.StatusOf(id), TaskStatus::kFailed);
  EXPECT_TRUE(Await(h.runtime().Retry(id)).ok())
      << "its own reservation does not stop it";
  h.Drain();
  EXPECT_EQ(h.Put("t", "2", Unique("k", 1h)), id);
}

EnqueueOptions Replacing(const std::string& key) {
  EnqueueOptions options;
  options.dedup_key = key;
  options.on_duplicate = EnqueueOptions::OnDuplicate::kReplacePayload;
  return options;
}

TEST(ReplacePayloadTest, APendingDuplicateTakesTheNewPayloadAndRunsOnce) {
  Harness h(1);
  h.RegisterRecorder("t");
  TaskId id = h.Put("t", "v1", Replacing("r"));
  EXPECT_EQ(h.Put("t", "v2", Replacing("r")), id);
  EXPECT_EQ(h.Info(id).payload, "v2");
  // Keeping the existing one (the default) changes nothing.
  EnqueueOptions keep;
  keep.dedup_key = "r";
  EXPECT_EQ(h.Put("t", "v3", keep), id);
  EXPECT_EQ(h.Info(id).payload, "v2");
  // Within one batch, the later duplicate's payload wins too.
  auto batch = Await(h.runtime()
                         .EnqueueBatch({{"t", "b1", Replacing("s")},
                                        {"t", "b2", Replacing("s")}})
                         .stored);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ((*batch)[0], (*batch)[1]);
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.journal.Labels(), (std::vector<std::string>{"v2", "b2"}));
}

TEST(ReplacePayloadTest, ARunningOrFinishedHolderIsLeftAsItIs) {
  Harness h(1);
  testing::Gate gate;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler(
                      "t",
                      [&](TaskContext& task) {
                        h.journal.Record(task.id(),
                                         std::string(task.payload()));
                        return gate.Wait() ? Status::OK() : Status::Aborted("");
                      })
                  .ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  EnqueueOptions options = Replacing("r");
  options.unique_for = 1h;
  TaskId id = h.Put("t", "v1", options);
  ASSERT_TRUE(h.WaitForStatus(id, TaskStatus::kRunning));
  EXPECT_EQ(h.Put("t", "v2", options), id);
  gate.Open();
  h.Drain();
  EXPECT_EQ(h.Put("t", "v3", options), id) << "reserved for 1 h";
  EXPECT_EQ(h.Info(id).payload, "v1");
  EXPECT_EQ(h.journal.Labels(), (std::vector<std::string>{"v1"}));
}

TEST(UniquenessBadInputTest, EachBadArgumentIsRefusedByName) {
  Harness h(1);
  h.RegisterRecorder("t");
  auto refused = [&](EnqueueOptions options) {
    return Await(h.runtime().Enqueue("t", "x", options).stored).status();
  };
  Status s = refused(Unique("k", -1us));
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("unique_for"), std::string::npos) << s.ToString();
  s = refused(Unique("k", 3651 * 24h));
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("unique_for"), std::string::npos) << s.ToString();
  s = refused(Unique("", 1h));
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("unique_for needs a dedup_key"), std::string::npos)
      << s.ToString();
  s = refused(Replacing(""));
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("on_duplicate"), std::string::npos)
      << s.ToString();
  EnqueueOptions bad = Replacing("k");
  bad.on_duplicate = static_cast<EnqueueOptions::OnDuplicate>(9);
  s = refused(bad);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("on_duplicate"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace spool
