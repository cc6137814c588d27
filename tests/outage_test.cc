// Storage outages: failing writes fail the calls that needed them with a
// clear error, reads keep working, writes resume when the disk does, and
// worker outcomes are retried without running handlers again.

#include <atomic>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "runtime/test_hooks.h"
#include "storage/fault_env.h"
#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using storage::FaultInjectionEnv;
using storage::FaultOp;
using storage::FaultSpec;
using testing::Await;
using testing::Gate;
using testing::TempDir;

class OutageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options options;
    options.path = dir_.Sub("queue");
    options.workers = 2;
    TestHooks hooks;
    hooks.env = faults_.env();
    Status s = OpenWithHooks(options, hooks, &runtime_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void TearDown() override {
    faults_.ClearAllFaults();
    if (runtime_) {
      EXPECT_TRUE(Await(runtime_->Close()).ok());
    }
  }

  // Enqueues until one is stored (the store may need a moment to reopen).
  TaskId EnqueueWhenWritable(const std::string& type) {
    TaskId id = 0;
    EXPECT_TRUE(testing::WaitUntil([&] {
      auto stored = Await(runtime_->Enqueue(type, "x").stored);
      if (stored.ok()) id = *stored;
      return stored.ok();
    }));
    return id;
  }

  TempDir dir_;
  FaultInjectionEnv faults_;
  std::unique_ptr<Runtime> runtime_;
};

TEST_F(OutageTest, WritesFailClearlyReadsGoOnAndWritesResume) {
  ASSERT_TRUE(
      runtime_->RegisterHandler("t", [](TaskContext&) { return Status::OK(); })
          .ok());
  auto before = Await(runtime_->Enqueue("t", "before").stored);
  ASSERT_TRUE(before.ok());

  // Nothing reaches the log while the disk is down.
  faults_.SetFault(FaultOp::kWrite, FaultSpec::Always(storage::kWalFiles));
  auto during = Await(runtime_->Enqueue("t", "during").stored);
  ASSERT_FALSE(during.ok());
  EXPECT_TRUE(during.status().IsIOError()) << during.status().ToString();
  // Reads are not frozen by the outage.
  auto info = Await(runtime_->GetTask(*before));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->payload, "before");
  EXPECT_TRUE(Await(runtime_->CountByStatus()).ok());

  faults_.ClearAllFaults();
  TaskId after = EnqueueWhenWritable("t");
  ASSERT_NE(after, 0u);
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(Await(runtime_->Drain()).ok());
  EXPECT_EQ(Await(runtime_->GetTask(*before))->status, TaskStatus::kSucceeded);
  EXPECT_EQ(Await(runtime_->GetTask(after))->status, TaskStatus::kSucceeded);
}

TEST_F(OutageTest, OutcomesAreRetriedWithoutRunningTheHandlerAgain) {
  Gate finishing;
  Gate release;
  std::atomic<int> runs{0};
  ASSERT_TRUE(runtime_
                  ->RegisterHandler("t",
                                    [&](TaskContext&) {
                                      runs++;
                                      finishing.Open();
                                      release.Wait();
                                      return Status::OK();
                                    })
                  .ok());
  auto id = Await(runtime_->Enqueue("t", "x").stored);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(finishing.Wait());
  // The outcome's commit fails while the disk is down...
  faults_.SetFault(FaultOp::kWrite, FaultSpec::Always(storage::kWalFiles));
  release.Open();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(Await(runtime_->GetTask(*id))->status, TaskStatus::kRunning);
  // ... and is written once it is back, without a second run.
  faults_.ClearAllFaults();
  ASSERT_TRUE(testing::WaitUntil([&] {
    auto info = Await(runtime_->GetTask(*id));
    return info.ok() && info->status == TaskStatus::kSucceeded;
  }));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(Await(runtime_->GetTask(*id))->attempts, 1u);
}

TEST_F(OutageTest, ABatchWrittenBeforeItsSyncFailedIsReportedStored) {
  ASSERT_TRUE(
      runtime_->RegisterHandler("t", [](TaskContext&) { return Status::OK(); })
          .ok());
  // The sync reaches the disk but reports an error: the batch is durable,
  // and after reopening the writer can tell.
  FaultSpec lying = FaultSpec::NextN(1, storage::kWalFiles);
  lying.sync_persists = true;
  faults_.SetFault(FaultOp::kSync, lying);
  auto stored = Await(runtime_->Enqueue("t", "kept").stored);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  auto info = Await(runtime_->GetTask(*stored));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->payload, "kept");
}

}  // namespace
}  // namespace spool
