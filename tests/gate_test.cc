// Gates that recheck themselves (spool/gate.h): a registered gate is asked
// on the recheck interval and right after a handler defers on it, and its
// answer opens or closes the tasks that require it.

#include <atomic>
#include <chrono>
#include <stdexcept>

#include <spool/gate.h>
#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::TempDir;

// A gate whose answer the test sets; counts the asks.
class FlagGate : public Gate {
 public:
  explicit FlagGate(bool open) : open_(open) {}
  bool IsOpen() override {
    ++asks_;
    if (throws_) throw std::runtime_error("probe failed");
    return open_.load();
  }
  std::atomic<bool> open_;
  std::atomic<bool> throws_{false};
  std::atomic<int> asks_{0};
};

class GateTest : public ::testing::Test {
 protected:
  Options QueueOptions(std::chrono::milliseconds interval) const {
    Options options;
    options.path = dir_.Sub("q");
    options.workers = 2;
    options.gate_recheck_interval = interval;
    return options;
  }
  void TearDown() override {
    if (runtime_) {
      EXPECT_TRUE(Await(runtime_->Close()).ok());
    }
  }
  // Registers `handler` for "gated", which requires gate "api".
  void RegisterGated(Handler handler) {
    HandlerOptions options;
    options.requires_gates.emplace(std::vector<std::string>{"api"});
    ASSERT_TRUE(
        runtime_->RegisterHandler("gated", std::move(handler), options).ok());
  }
  TaskStatus StatusOf(TaskId id) {
    Result<TaskInfo> info = Await(runtime_->GetTask(id));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->status : TaskStatus::kFailed;
  }

  TempDir dir_;
  std::unique_ptr<Runtime> runtime_;
};

TEST_F(GateTest, ARegisteredGateIsAskedOnItsIntervalAndItsAnswerHolds) {
  runtime_ = testing::OpenOrDie(QueueOptions(20ms));
  std::atomic<int> runs{0};
  RegisterGated([&](TaskContext&) {
    ++runs;
    return Status::OK();
  });
  auto gate = std::make_shared<FlagGate>(false);
  ASSERT_TRUE(runtime_->RegisterGate("api", gate).ok());
  ASSERT_TRUE(runtime_->Start().ok());
  // The second ask comes after the first answer (closed) was handed on.
  ASSERT_TRUE(testing::WaitUntil([&] { return gate->asks_ >= 2; }));
  auto stored = Await(runtime_->Enqueue("gated", "x").stored);
  ASSERT_TRUE(stored.ok());
  // Asked again and again, closed each time: the task waits.
  int asks = gate->asks_;
  ASSERT_TRUE(testing::WaitUntil([&] { return gate->asks_ >= asks + 3; }));
  EXPECT_EQ(StatusOf(*stored), TaskStatus::kPending);
  EXPECT_EQ(runs.load(), 0);

  gate->open_ = true;
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return StatusOf(*stored) == TaskStatus::kSucceeded; }));
  EXPECT_EQ(runs.load(), 1);

  // Closed again by its answer: a new task waits.
  gate->open_ = false;
  asks = gate->asks_;
  ASSERT_TRUE(testing::WaitUntil([&] { return gate->asks_ >= asks + 2; }));
  auto second = Await(runtime_->Enqueue("gated", "y").stored);
  ASSERT_TRUE(second.ok());
  asks = gate->asks_;
  ASSERT_TRUE(testing::WaitUntil([&] { return gate->asks_ >= asks + 3; }));
  EXPECT_EQ(StatusOf(*second), TaskStatus::kPending);
}

TEST_F(GateTest, AHandlerThatDefersHasTheGateAskedAgainAtOnce) {
  // The interval is far longer than the test: only a deferral asks again.
  runtime_ = testing::OpenOrDie(QueueOptions(std::chrono::minutes(10)));
  auto gate = std::make_shared<FlagGate>(true);
  std::atomic<int> runs{0};
  RegisterGated([&](TaskContext& task) {
    if (++runs == 1) {
      gate->open_ = false;  // the service went down meanwhile
      task.DeferUntilOpen("api");
    }
    return Status::OK();
  });
  ASSERT_TRUE(runtime_->RegisterGate("api", gate).ok());
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return gate->asks_ >= 1; }));
  auto stored = Await(runtime_->Enqueue("gated", "x").stored);
  ASSERT_TRUE(stored.ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return gate->asks_ >= 2; }));
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return StatusOf(*stored) == TaskStatus::kPending; }));
  EXPECT_EQ(runs.load(), 1);

  // SetGate still opens it by hand, until the gate's next answer.
  ASSERT_TRUE(runtime_->SetGate("api", true).ok());
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return StatusOf(*stored) == TaskStatus::kSucceeded; }));
  EXPECT_EQ(runs.load(), 2);
  Result<TaskInfo> info = Await(runtime_->GetTask(*stored));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->attempts, 1u);  // the deferral spent no attempt
}

TEST_F(GateTest, AnOpenAnswerAfterADeferralWaitsOneInterval) {
  constexpr auto kInterval = 300ms;
  runtime_ = testing::OpenOrDie(QueueOptions(kInterval));
  auto gate = std::make_shared<FlagGate>(true);  // always says open
  std::atomic<int> runs{0};
  std::atomic<int64_t> deferred_at{0};
  std::atomic<int64_t> rerun_at{0};
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  RegisterGated([&](TaskContext& task) {
    if (++runs == 1) {
      deferred_at = now_ns();
      task.DeferUntilOpen("api");
    } else {
      rerun_at = now_ns();
    }
    return Status::OK();
  });
  ASSERT_TRUE(runtime_->RegisterGate("api", gate).ok());
  ASSERT_TRUE(runtime_->Start().ok());
  auto stored = Await(runtime_->Enqueue("gated", "x").stored);
  ASSERT_TRUE(stored.ok());
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return StatusOf(*stored) == TaskStatus::kSucceeded; }));
  EXPECT_EQ(runs.load(), 2);
  // No spin: the rerun came no sooner than one interval after the defer.
  EXPECT_GE(
      rerun_at - deferred_at,
      std::chrono::duration_cast<std::chrono::nanoseconds>(kInterval).count());
}

TEST_F(GateTest, RegisterGateRefusesBadCallsAndAThrowingGateIsClosed) {
  runtime_ = testing::OpenOrDie(QueueOptions(20ms));
  auto gate = std::make_shared<FlagGate>(true);
  gate->throws_ = true;
  Status s = runtime_->RegisterGate("", gate);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = runtime_->RegisterGate("api", nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("api"), std::string::npos) << s.ToString();
  ASSERT_TRUE(runtime_->RegisterGate("api", gate).ok());
  s = runtime_->RegisterGate("api", gate);
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();
  RegisterGated(testing::Ok);
  ASSERT_TRUE(runtime_->Start().ok());
  s = runtime_->RegisterGate("other", gate);
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();

  ASSERT_TRUE(testing::WaitUntil([&] { return gate->asks_ >= 2; }));
  auto stored = Await(runtime_->Enqueue("gated", "x").stored);
  ASSERT_TRUE(stored.ok());
  int asks = gate->asks_;
  ASSERT_TRUE(testing::WaitUntil([&] { return gate->asks_ >= asks + 3; }));
  EXPECT_EQ(StatusOf(*stored), TaskStatus::kPending);
  gate->throws_ = false;
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return StatusOf(*stored) == TaskStatus::kSucceeded; }));
}

}  // namespace
}  // namespace spool
