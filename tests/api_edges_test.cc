// The sharp edges of the runtime's API that issue 15's audit found, held to
// their documented contracts: Unsubscribe's blocking, the close future's
// inline callbacks, and GetProgress.

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using spool::testing::Await;
using spool::testing::OpenOrDie;
using spool::testing::TempDir;
using spool::testing::WaitUntil;

Options MemoryOptions(const TempDir& dir) {
  Options options;
  options.path = dir.Sub("q");
  options.durability = Durability::kMemory;
  options.workers = 2;
  return options;
}

// A one-shot signal between threads, bounded: a hang fails the test.
class Signal {
 public:
  void Set() { promise_.Set(Result<void>()); }
  bool Wait() const { return promise_.GetFuture().WaitFor(30s); }
  bool IsSet() const { return promise_.GetFuture().Ready(); }

 private:
  Promise<void> promise_;
};

// Returns once everything posted to the runtime's callback executor before
// the call has run: the executor has one thread and runs in order.
void FlushCallbacks(Runtime& runtime) {
  Signal flushed;
  runtime.CountByStatus().Then(
      [&](const Result<StatusCounts>&) { flushed.Set(); });
  ASSERT_TRUE(flushed.Wait());
}

std::vector<TaskSpec> Tasks(int n) {
  std::vector<TaskSpec> tasks;
  for (int i = 0; i < n; ++i) tasks.push_back(TaskSpec{"t", "x", {}});
  return tasks;
}

TEST(UnsubscribeTest, WaitsForTheRunningCallOnlyAndNothingMoreIsDelivered) {
  TempDir dir;
  auto runtime = OpenOrDie(MemoryOptions(dir));
  ASSERT_TRUE(runtime->RegisterHandler("t", testing::Ok).ok());
  std::atomic<int> calls{0};
  Signal entered, release;
  uint64_t token = runtime->Subscribe([&](const TaskEvent&) {
    if (++calls == 1) {
      entered.Set();
      EXPECT_TRUE(release.Wait());
    }
  });
  // One commit: its three events are delivered together.
  ASSERT_TRUE(Await(runtime->EnqueueBatch(Tasks(3)).stored).ok());
  ASSERT_TRUE(entered.Wait());

  std::atomic<bool> returned{false};
  std::thread unsubscriber([&] {
    runtime->Unsubscribe(token);
    returned = true;
  });
  // It blocks while the listener runs on the executor's thread...
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(returned.load()) << "Unsubscribe did not wait for the call";
  // ...and returns once that call does.
  release.Set();
  EXPECT_TRUE(WaitUntil([&] { return returned.load(); }));
  unsubscriber.join();
  EXPECT_EQ(calls.load(), 1);

  // The rest of that delivery, and every later one, is dropped.
  ASSERT_TRUE(Await(runtime->EnqueueBatch(Tasks(2)).stored).ok());
  FlushCallbacks(*runtime);
  EXPECT_EQ(calls.load(), 1);
  runtime->Unsubscribe(token);  // again: ignored
  runtime->Unsubscribe(12345);  // unknown: ignored
}

TEST(UnsubscribeTest, FromInsideTheListenerReturnsAtOnceWithoutDeadlock) {
  TempDir dir;
  auto runtime = OpenOrDie(MemoryOptions(dir));
  ASSERT_TRUE(runtime->RegisterHandler("t", testing::Ok).ok());
  std::atomic<int> calls{0};
  std::atomic<bool> unsubscribed{false};
  std::atomic<uint64_t> token{0};
  token = runtime->Subscribe([&](const TaskEvent&) {
    ++calls;
    runtime->Unsubscribe(token.load());
    unsubscribed = true;
  });
  ASSERT_TRUE(Await(runtime->EnqueueBatch(Tasks(3)).stored).ok());
  ASSERT_TRUE(WaitUntil([&] { return unsubscribed.load(); }));
  ASSERT_TRUE(Await(runtime->EnqueueBatch(Tasks(2)).stored).ok());
  FlushCallbacks(*runtime);
  // No call after the one that unsubscribed, in its delivery or later.
  EXPECT_EQ(calls.load(), 1);
}

TEST(CloseFutureTest, CallbacksRunInlineAndMayCallCloseAgain) {
  TempDir dir;
  auto runtime = OpenOrDie(MemoryOptions(dir));
  ASSERT_TRUE(runtime->RegisterHandler("t", testing::Ok).ok());
  ASSERT_TRUE(runtime->Start().ok());
  const std::thread::id test_thread = std::this_thread::get_id();

  Signal ran;
  std::atomic<bool> again_ready{false}, again_ok{false}, again_inline{false};
  std::atomic<bool> on_test_thread{true};
  Future<void> closed = runtime->Close();
  closed.Then([&](const Result<void>& result) {
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    on_test_thread = std::this_thread::get_id() == test_thread;
    // Close again from the callback: the same, resolved future, at once.
    Future<void> again = runtime->Close();
    again_ready = again.Ready();
    again_ok = again.Wait().ok();
    bool attached_ran = false;
    again.Then([&](const Result<void>&) { attached_ran = true; });
    again_inline = attached_ran;  // ran inside Then, on this thread
    // Other calls fail with Closed instead of blocking.
    EXPECT_EQ(runtime->Enqueue("t", "x").stored.Wait().status().code(),
              Status::Code::kClosed);
    ran.Set();
  });
  ASSERT_TRUE(ran.Wait()) << "the close callback never ran";
  ASSERT_TRUE(Await(closed).ok());
  EXPECT_TRUE(again_ready.load());
  EXPECT_TRUE(again_ok.load());
  EXPECT_TRUE(again_inline.load());

  // Attached after it resolved: runs inline, on the calling thread, before
  // Then returns (not on the callback executor, which is shut down).
  std::thread::id ran_on;
  closed.Then(
      [&](const Result<void>&) { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, test_thread);
}

TEST(GetProgressTest, ResolvesWithTheRunningAttemptsProgress) {
  TempDir dir;
  auto runtime = OpenOrDie(MemoryOptions(dir));
  Signal reported, release;
  ASSERT_TRUE(runtime
                  ->RegisterHandler("t",
                                    [&](TaskContext& task) {
                                      task.ReportProgress(0.5);
                                      reported.Set();
                                      EXPECT_TRUE(release.Wait());
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(runtime->Start().ok());
  Result<TaskId> id = Await(runtime->Enqueue("t", "x").stored);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(reported.Wait());

  Result<std::optional<double>> progress = Await(runtime->GetProgress(*id));
  ASSERT_TRUE(progress.ok()) << progress.status().ToString();
  EXPECT_EQ(*progress, std::optional<double>(0.5));
  EXPECT_EQ(runtime->Progress(*id), std::optional<double>(0.5));
  // Its callbacks run like every query's, on the callback executor.
  Signal called;
  runtime->GetProgress(*id).Then([&](const Result<std::optional<double>>& r) {
    EXPECT_TRUE(r.ok());
    called.Set();
  });
  EXPECT_TRUE(called.Wait());
  // Unknown ids report nothing.
  progress = Await(runtime->GetProgress(*id + 1000));
  ASSERT_TRUE(progress.ok());
  EXPECT_FALSE(progress->has_value());

  release.Set();
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  progress = Await(runtime->GetProgress(*id));
  ASSERT_TRUE(progress.ok());
  EXPECT_FALSE(progress->has_value()) << "progress outlived the attempt";

  ASSERT_TRUE(Await(runtime->Close()).ok());
  EXPECT_EQ(Await(runtime->GetProgress(*id)).status().code(),
            Status::Code::kClosed);
}

TEST(GetProgressTest, ARuntimeOpenedReadOnlyRefusesIt) {
  TempDir dir;
  Options options;
  options.path = dir.Sub("q");
  {
    auto runtime = OpenOrDie(options);
    ASSERT_TRUE(Await(runtime->Close()).ok());
  }
  std::unique_ptr<Runtime> reader;
  Status s = Runtime::OpenReadOnly(options, &reader);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Result<std::optional<double>> progress = Await(reader->GetProgress(1));
  EXPECT_EQ(progress.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(progress.status().message().find("GetProgress"), std::string::npos)
      << progress.status().ToString();
}

}  // namespace
}  // namespace spool
