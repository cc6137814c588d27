// Future, Promise and Executor: how spool answers without blocking the caller.
//
// Every spool call that needs the writer, a reader or the scheduler returns at
// once with a Future. The caller may wait on it (Wait, WaitFor), poll it
// (Ready), or attach a callback (Then). Callbacks run on an Executor: by
// default a spool thread that runs nothing else, or one the application
// supplies in Options::callback_executor, for example to have them posted to
// its own event loop.
//
// Thread safety: a Future may be copied and used from any number of threads;
// all copies share one result. A Promise is set once, from any thread.

#ifndef SPOOL_INCLUDE_FUTURE_H_
#define SPOOL_INCLUDE_FUTURE_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <spool/status.h>

namespace spool {

// Runs callbacks on threads of its choosing.
//
// Implementations must be thread safe: Post is called from spool's threads.
// Post must not run `fn` inline while the caller waits for it to return, and
// should not block for long: spool's actors call it.
class Executor {
 public:
  virtual ~Executor() = default;
  // Queues `fn` to run once. Called after the result is final.
  virtual void Post(std::function<void()> fn) = 0;
};

namespace internal {

// The state that a Promise and its Futures share. Not part of the API.
template <class T>
class SharedState : public std::enable_shared_from_this<SharedState<T>> {
 public:
  explicit SharedState(std::shared_ptr<Executor> executor)
      : executor_(std::move(executor)) {}

  // Returns false when a result was already set (the second one is dropped).
  bool Set(Result<T> result) {
    std::vector<std::function<void(const Result<T>&)>> callbacks;
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (result_) return false;
      result_.emplace(std::move(result));
      callbacks.swap(callbacks_);
      wake = waiters_ > 0;
    }
    if (wake) ready_cv_.notify_all();
    for (auto& callback : callbacks) Dispatch(std::move(callback));
    return true;
  }

  bool Ready() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return result_.has_value();
  }

  const Result<T>& Wait() const {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!result_) {
      ++waiters_;
      ready_cv_.wait(lock, [this] { return result_.has_value(); });
      --waiters_;
    }
    return *result_;
  }

  bool WaitFor(std::chrono::nanoseconds timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    if (result_) return true;
    ++waiters_;
    bool ready = ready_cv_.wait_for(lock, timeout,
                                    [this] { return result_.has_value(); });
    --waiters_;
    return ready;
  }

  void Then(std::function<void(const Result<T>&)> callback) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!result_) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    Dispatch(std::move(callback));
  }

 private:
  // REQUIRES: result_ is set (it never changes afterwards, so no lock).
  void Dispatch(std::function<void(const Result<T>&)> callback) {
    if (!executor_) {
      callback(*result_);
      return;
    }
    // The lambda keeps this state, and so the result, alive until it runs.
    executor_->Post(
        [self = this->shared_from_this(), callback = std::move(callback)] {
          callback(*self->result_);
        });
  }

  std::shared_ptr<Executor> executor_;
  mutable std::mutex mutex_;
  mutable std::condition_variable ready_cv_;
  mutable int waiters_ = 0;
  std::optional<Result<T>> result_;
  std::vector<std::function<void(const Result<T>&)>> callbacks_;
};

}  // namespace internal

template <class T>
class Promise;

// The eventual result of an asynchronous spool call.
//
// A default-constructed Future is invalid: valid() is false and every other
// method must not be called.
template <class T>
class Future {
 public:
  Future() = default;

  bool valid() const { return state_ != nullptr; }

  // True once the result is set. Never blocks.
  bool Ready() const { return state_->Ready(); }

  // Blocks the calling thread until the result is set and returns it. The
  // reference stays valid while any copy of this Future lives.
  //
  // Do not call from a handler on the future of work that the same handler
  // must finish first (e.g. Close), or from a callback on the callback
  // executor when that executor has one thread: both wait for themselves.
  const Result<T>& Wait() const& { return state_->Wait(); }

  // The same on a temporary Future, returning a copy: a reference into the
  // temporary's state would dangle at the end of the statement, as in
  // `const auto& r = runtime->GetTask(id).Wait();`.
  Result<T> Wait() && { return state_->Wait(); }

  // Blocks for at most `timeout`. Returns true when the result is set.
  template <class Rep, class Period>
  bool WaitFor(std::chrono::duration<Rep, Period> timeout) const {
    return state_->WaitFor(
        std::chrono::duration_cast<std::chrono::nanoseconds>(timeout));
  }

  // Runs `callback` once with the result, on the executor this Future was
  // made with (see Options::callback_executor). If the result is already set,
  // the callback is queued at once. Any number of callbacks may be attached.
  void Then(std::function<void(const Result<T>&)> callback) const {
    state_->Then(std::move(callback));
  }

 private:
  friend class Promise<T>;
  explicit Future(std::shared_ptr<internal::SharedState<T>> state)
      : state_(std::move(state)) {}

  std::shared_ptr<internal::SharedState<T>> state_;
};

// The producer side of a Future. spool's actors hold Promises; applications
// need one only to write their own asynchronous helpers or tests.
template <class T>
class Promise {
 public:
  // Callbacks of the futures run on `executor`, or inline on the thread that
  // sets the result (or calls Then on a ready future) when it is null.
  explicit Promise(std::shared_ptr<Executor> executor = nullptr)
      : state_(
            std::make_shared<internal::SharedState<T>>(std::move(executor))) {}

  Future<T> GetFuture() const { return Future<T>(state_); }

  // Sets the result and wakes every waiter. Returns false, and changes
  // nothing, when a result was already set.
  bool Set(Result<T> result) const { return state_->Set(std::move(result)); }

 private:
  std::shared_ptr<internal::SharedState<T>> state_;
};

// A future that is already resolved, with callbacks run inline.
template <class T>
Future<T> MakeReadyFuture(Result<T> result,
                          std::shared_ptr<Executor> executor = nullptr) {
  Promise<T> promise(std::move(executor));
  promise.Set(std::move(result));
  return promise.GetFuture();
}

}  // namespace spool

#endif  // SPOOL_INCLUDE_FUTURE_H_
