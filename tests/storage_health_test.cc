// Storage health as data (spool/storage_health.h): failed commits are
// reported to subscribers with the operation, the error, the time and the
// count in a row, the first success after them is reported as a recovery,
// and Statistics carries the same figures. Failures are real: a
// fault-injecting file system under RocksDB refuses the log's writes.

#include <atomic>
#include <mutex>
#include <vector>

#include <spool/runtime.h>
#include <spool/storage_health.h>

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
using testing::TempDir;

class StorageHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options options;
    options.path = dir_.Sub("queue");
    options.workers = 1;
    TestHooks hooks;
    hooks.env = faults_.env();
    Status s = OpenWithHooks(options, hooks, &runtime_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(
        runtime_
            ->RegisterHandler("t", [](TaskContext&) { return Status::OK(); })
            .ok());
    token_ = runtime_->SubscribeStorageHealth(
        [this](const StorageHealthEvent& event) {
          std::lock_guard<std::mutex> lock(mutex_);
          events_.push_back(event);
        });
  }
  void TearDown() override {
    faults_.ClearAllFaults();
    if (runtime_) {
      EXPECT_TRUE(Await(runtime_->Close()).ok());
    }
  }

  std::vector<StorageHealthEvent> Events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

  TempDir dir_;
  FaultInjectionEnv faults_;
  std::unique_ptr<Runtime> runtime_;
  uint64_t token_ = 0;
  std::mutex mutex_;
  std::vector<StorageHealthEvent> events_;
};

TEST_F(StorageHealthTest, FailuresInARowAndTheRecoveryAreReported) {
  ASSERT_TRUE(Await(runtime_->Enqueue("t", "healthy").stored).ok());
  Statistics healthy = runtime_->GetStatistics();
  EXPECT_EQ(healthy.storage_failures, 0u);
  EXPECT_TRUE(Events().empty());  // a success after none fails nothing

  Timestamp before = std::chrono::time_point_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now());
  faults_.SetFault(FaultOp::kWrite, FaultSpec::Always(storage::kWalFiles));
  for (int i = 0; i < 3; ++i) {
    auto failed = Await(runtime_->Enqueue("t", "during").stored);
    ASSERT_TRUE(failed.status().IsIOError()) << failed.status().ToString();
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return Events().size() >= 3; }));
  std::vector<StorageHealthEvent> failures = Events();
  for (size_t i = 0; i < failures.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(failures[i].kind, StorageHealthEvent::Kind::kFailure);
    EXPECT_EQ(failures[i].consecutive_failures, i + 1);
    EXPECT_TRUE(failures[i].operation == "commit" ||
                failures[i].operation == "reopen")
        << failures[i].operation;
    EXPECT_TRUE(failures[i].error.IsIOError()) << failures[i].error.ToString();
    EXPECT_GE(failures[i].time, before);
  }
  EXPECT_EQ(failures[0].operation, "commit");
  Statistics failing = runtime_->GetStatistics();
  EXPECT_EQ(failing.storage_failures, failures.size());
  EXPECT_EQ(failing.storage_consecutive_failures, failures.size());
  EXPECT_EQ(failing.storage_recoveries, 0u);

  faults_.ClearAllFaults();
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return Await(runtime_->Enqueue("t", "after").stored).ok(); }));
  ASSERT_TRUE(testing::WaitUntil([&] {
    std::vector<StorageHealthEvent> all = Events();
    return !all.empty() &&
           all.back().kind == StorageHealthEvent::Kind::kRecovery;
  }));
  std::vector<StorageHealthEvent> all = Events();
  const StorageHealthEvent& recovery = all.back();
  EXPECT_TRUE(recovery.error.ok());
  EXPECT_EQ(recovery.consecutive_failures, all.size() - 1);
  EXPECT_GE(recovery.time, all[all.size() - 2].time);
  Statistics recovered = runtime_->GetStatistics();
  EXPECT_EQ(recovered.storage_failures, all.size() - 1);
  EXPECT_EQ(recovered.storage_recoveries, 1u);
  EXPECT_EQ(recovered.storage_consecutive_failures, 0u);
  std::string text = FormatPrometheus(recovered);
  EXPECT_NE(text.find("spool_storage_failures_total " +
                      std::to_string(all.size() - 1)),
            std::string::npos);
  EXPECT_NE(text.find("spool_storage_recoveries_total 1"), std::string::npos);
  EXPECT_NE(text.find("spool_storage_consecutive_failures 0"),
            std::string::npos);

  // Unsubscribed, the listener hears nothing more.
  runtime_->Unsubscribe(token_);
  size_t heard = Events().size();
  faults_.SetFault(FaultOp::kWrite, FaultSpec::Always(storage::kWalFiles));
  EXPECT_FALSE(Await(runtime_->Enqueue("t", "again").stored).ok());
  faults_.ClearAllFaults();
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return Await(runtime_->Enqueue("t", "after").stored).ok(); }));
  EXPECT_EQ(Events().size(), heard);
  EXPECT_EQ(runtime_->GetStatistics().storage_recoveries, 2u);
}

}  // namespace
}  // namespace spool
