// Future and Promise (include/spool/future.h): an empty Future answers with
// an error instead of crashing, and Then chains.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include <spool/future.h>

#include <gtest/gtest.h>

namespace spool {
namespace {

using namespace std::chrono_literals;

// An executor whose queue the test runs by hand, to see where callbacks go.
class ManualExecutor final : public Executor {
 public:
  void Post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(fn));
  }
  size_t pending() {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.size();
  }
  // Runs everything queued, including what running it queues.
  void RunAll() {
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

 private:
  std::mutex mutex_;
  std::deque<std::function<void()>> queue_;
};

bool IsEmptyFutureError(const Status& s) {
  return s.code() == Status::Code::kFailedPrecondition &&
         s.message().find("the Future is empty") != std::string::npos;
}

TEST(EmptyFutureTest, AnswersWithFailedPreconditionWithoutBlockingOrCrashing) {
  Future<int> empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_TRUE(empty.Ready());
  EXPECT_TRUE(empty.WaitFor(0s));
  const Result<int>& waited = empty.Wait();
  EXPECT_TRUE(IsEmptyFutureError(waited.status()))
      << waited.status().ToString();
  Result<int> copied = Future<int>().Wait();
  EXPECT_TRUE(IsEmptyFutureError(copied.status()));

  Future<void> empty_void;
  EXPECT_TRUE(IsEmptyFutureError(empty_void.Wait().status()));

  // Then runs at once, inline, with the error.
  bool called = false;
  empty.Then([&](const Result<int>& r) {
    called = true;
    EXPECT_TRUE(IsEmptyFutureError(r.status()));
  });
  EXPECT_TRUE(called);
}

TEST(EmptyFutureTest, AMovedFromFutureIsEmptyToo) {
  Promise<int> promise;
  Future<int> future = promise.GetFuture();
  Future<int> taken = std::move(future);
  EXPECT_TRUE(promise.Set(7));
  EXPECT_EQ(*taken.Wait(), 7);
  EXPECT_FALSE(future.valid());  // NOLINT: the point is the moved-from state
  EXPECT_TRUE(IsEmptyFutureError(future.Wait().status()));
}

TEST(EmptyFutureTest, ChainingFromAnEmptyFuturePassesTheErrorOn) {
  Future<int> empty;
  Future<std::string> next = empty.Then([](const Result<int>& r) {
    if (!r.ok()) return Result<std::string>(r.status());
    return Result<std::string>(std::to_string(*r));
  });
  ASSERT_TRUE(next.valid());
  ASSERT_TRUE(next.Ready());
  EXPECT_TRUE(IsEmptyFutureError(next.Wait().status()));
}

TEST(ThenTest, ACallbackReturningAResultMakesTheNextFuture) {
  auto executor = std::make_shared<ManualExecutor>();
  Promise<int> promise(executor);
  Future<std::string> text =
      promise.GetFuture().Then([](const Result<int>& r) -> Result<std::string> {
        if (!r.ok()) return r.status();
        return "n=" + std::to_string(*r);
      });
  Future<size_t> length =
      text.Then([](const Result<std::string>& r) -> Result<size_t> {
        if (!r.ok()) return r.status();
        return r->size();
      });
  EXPECT_FALSE(text.Ready());
  promise.Set(42);
  // The callback runs on the executor, not inline.
  EXPECT_FALSE(text.Ready());
  EXPECT_GT(executor->pending(), 0u);
  executor->RunAll();
  ASSERT_TRUE(text.Ready());
  EXPECT_EQ(*text.Wait(), "n=42");
  ASSERT_TRUE(length.Ready());
  EXPECT_EQ(*length.Wait(), 4u);
}

TEST(ThenTest, AnErrorReachesTheEndOfTheChain) {
  Promise<int> promise;
  int steps = 0;
  Future<void> end = promise.GetFuture()
                         .Then([&](const Result<int>& r) -> Result<int> {
                           ++steps;
                           if (!r.ok()) return r.status();
                           return *r + 1;
                         })
                         .Then([&](const Result<int>& r) -> Result<void> {
                           ++steps;
                           return r.status();
                         });
  promise.Set(Status::NotFound("no such task"));
  ASSERT_TRUE(end.Ready());
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(end.Wait().status().code(), Status::Code::kNotFound);
}

TEST(ThenTest, ACallbackReturningAFutureIsFlattened) {
  Promise<int> first;
  Promise<std::string> second;
  Future<std::string> chained =
      first.GetFuture().Then([&](const Result<int>&) -> Future<std::string> {
        return second.GetFuture();
      });
  first.Set(1);
  // Resolved only once the inner future is.
  EXPECT_FALSE(chained.Ready());
  second.Set(std::string("done"));
  ASSERT_TRUE(chained.Ready());
  EXPECT_EQ(*chained.Wait(), "done");
}

TEST(ThenTest, AThrowingCallbackResolvesTheNextFutureWithAborted) {
  Promise<int> promise;
  Future<int> next = promise.GetFuture().Then([](const Result<int>&) {
    throw std::runtime_error("boom");
    return Result<int>(0);
  });
  Future<int> flat =
      promise.GetFuture().Then([](const Result<int>&) -> Future<int> {
        throw std::runtime_error("bang");
      });
  promise.Set(1);
  ASSERT_TRUE(next.Ready());
  EXPECT_EQ(next.Wait().status().code(), Status::Code::kAborted);
  EXPECT_NE(next.Wait().status().message().find("boom"), std::string::npos);
  ASSERT_TRUE(flat.Ready());
  EXPECT_NE(flat.Wait().status().message().find("bang"), std::string::npos);
}

TEST(ThenTest, AVoidCallbackStillJustAttaches) {
  Promise<int> promise;
  std::atomic<int> seen{0};
  // A callback that returns something other than Result or Future is
  // attached as before, its return value ignored.
  promise.GetFuture().Then([&](const Result<int>& r) { seen = *r; });
  promise.GetFuture().Then([&](const Result<int>&) { return true; });
  promise.Set(5);
  EXPECT_EQ(seen.load(), 5);
}

TEST(ThenTest, ChainsAcrossThreads) {
  Promise<int> promise;
  Future<int> doubled = promise.GetFuture().Then(
      [](const Result<int>& r) -> Result<int> { return *r * 2; });
  std::thread setter([&] { promise.Set(21); });
  ASSERT_TRUE(doubled.WaitFor(10s));
  EXPECT_EQ(*doubled.Wait(), 42);
  setter.join();
}

}  // namespace
}  // namespace spool
