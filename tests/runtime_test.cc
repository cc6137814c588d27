// End-to-end behaviour of a runtime: enqueue, run, retry, drain, close.

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using spool::testing::TempDir;

constexpr auto kWait = 60s;

class RuntimeTest : public ::testing::TestWithParam<Durability> {
 protected:
  Options MakeOptions() {
    Options options;
    options.path = dir_.Sub("queue");
    options.durability = GetParam();
    options.workers = 4;
    return options;
  }
  std::unique_ptr<Runtime> OpenRuntime(const Options& options) {
    std::unique_ptr<Runtime> runtime;
    Status s = Runtime::Open(options, &runtime);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return runtime;
  }
  template <class T>
  static Result<T> Await(const Future<T>& future) {
    EXPECT_TRUE(future.WaitFor(kWait)) << "timed out";
    return future.Wait();
  }
  TempDir dir_;
};

TEST_P(RuntimeTest, EnqueuedTasksRunOnceAndSucceed) {
  auto runtime = OpenRuntime(MakeOptions());
  std::atomic<int> runs{0};
  ASSERT_TRUE(runtime
                  ->RegisterHandler("count",
                                    [&](TaskContext& task) {
                                      EXPECT_EQ(task.payload(), "x");
                                      EXPECT_EQ(task.attempt(), 1u);
                                      runs++;
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(runtime->Start().ok());
  std::vector<Ticket> tickets;
  for (int i = 0; i < 100; ++i)
    tickets.push_back(runtime->Enqueue("count", "x"));
  for (auto& ticket : tickets) {
    const auto& stored = Await(ticket.stored);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    EXPECT_EQ(*stored, ticket.id);
  }
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runs.load(), 100);
  const auto& counts = Await(runtime->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->of(TaskStatus::kSucceeded), 100u);
  EXPECT_EQ(counts->total(), 100u);
  const auto& info = Await(runtime->GetTask(tickets[0].id));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->status, TaskStatus::kSucceeded);
  EXPECT_EQ(info->attempts, 1u);
  ASSERT_TRUE(Await(runtime->Close()).ok());
}

TEST_P(RuntimeTest, FailedAttemptsRetryThenFail) {
  auto runtime = OpenRuntime(MakeOptions());
  std::atomic<int> runs{0};
  HandlerOptions handler_options;
  handler_options.retry = RetryPolicy::Exponential(3, 1ms, 4ms);
  ASSERT_TRUE(runtime
                  ->RegisterHandler(
                      "flaky",
                      [&](TaskContext&) -> Status {
                        runs++;
                        throw std::runtime_error("it broke");
                      },
                      handler_options)
                  .ok());
  ASSERT_TRUE(runtime->Start().ok());
  Ticket ticket = runtime->Enqueue("flaky", "");
  ASSERT_TRUE(Await(ticket.stored).ok());
  ASSERT_TRUE(spool::testing::WaitUntil([&] {
    auto info = runtime->GetTask(ticket.id);
    return info.WaitFor(kWait) && info.Wait().ok() &&
           info.Wait()->status == TaskStatus::kFailed;
  }));
  const auto& info = Await(runtime->GetTask(ticket.id));
  EXPECT_EQ(info->attempts, 3u);
  EXPECT_EQ(runs.load(), 3);
  EXPECT_NE(info->last_error.find("it broke"), std::string::npos)
      << info->last_error;
}

INSTANTIATE_TEST_SUITE_P(AllModes, RuntimeTest,
                         ::testing::Values(Durability::kSync,
                                           Durability::kRelaxed,
                                           Durability::kMemory),
                         [](const auto& param_info) {
                           return std::string(DurabilityName(param_info.param));
                         });

}  // namespace
}  // namespace spool

namespace spool {
namespace {

TEST(OpenAsyncTest, ResolvesWithTheRuntimeOrTheErrorOpenReturns) {
  TempDir dir;
  Options options;
  options.path = dir.Sub("queue");

  Future<std::shared_ptr<Runtime>> opening = Runtime::OpenAsync(options);
  std::promise<bool> callback_ran;
  opening.Then([&](const Result<std::shared_ptr<Runtime>>& result) {
    callback_ran.set_value(result.ok());
  });
  ASSERT_TRUE(opening.WaitFor(kWait));
  const auto& opened = opening.Wait();
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<Runtime> runtime = *opened;
  ASSERT_NE(runtime, nullptr);
  auto ran = callback_ran.get_future();
  ASSERT_EQ(ran.wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(ran.get());

  // The runtime works as one from Open.
  ASSERT_TRUE(runtime->RegisterHandler("t", spool::testing::Ok).ok());
  ASSERT_TRUE(runtime->Start().ok());
  Ticket ticket = runtime->Enqueue("t", "x");
  ASSERT_TRUE(ticket.stored.WaitFor(kWait));
  ASSERT_TRUE(ticket.stored.Wait().ok());

  // A second open of the held directory fails as Open does.
  auto busy = Runtime::OpenAsync(options);
  ASSERT_TRUE(busy.WaitFor(kWait));
  EXPECT_TRUE(busy.Wait().status().IsBusy()) << busy.Wait().status().ToString();

  Options bad;
  auto invalid = Runtime::OpenAsync(bad);
  ASSERT_TRUE(invalid.WaitFor(kWait));
  EXPECT_TRUE(invalid.Wait().status().IsInvalidArgument());

  auto closed = runtime->Close();
  ASSERT_TRUE(closed.WaitFor(kWait));
  EXPECT_TRUE(closed.Wait().ok());
}

}  // namespace
}  // namespace spool
