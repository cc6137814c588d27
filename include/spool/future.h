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
//
// Chaining: Then with a callback that returns a Result<U> (or a Future<U>)
// returns a Future<U> of what it returns, so that steps compose without
// blocking:
//
//   runtime->Enqueue("email", "to=...").stored
//       .Then([&](const Result<TaskId>& id) -> Future<TaskInfo> {
//         if (!id.ok()) return MakeReadyFuture<TaskInfo>(id.status());
//         return runtime->GetTask(*id);
//       })
//       .Then([](const Result<TaskInfo>& info) { ... });

#ifndef SPOOL_INCLUDE_FUTURE_H_
#define SPOOL_INCLUDE_FUTURE_H_

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
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

template <class T>
class Future;
template <class T>
class Promise;

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

  const std::shared_ptr<Executor>& executor() const { return executor_; }

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

// The result an empty (default-constructed) Future answers with.
inline Status EmptyFutureError() {
  return Status::FailedPrecondition(
      "the Future is empty: it was default-constructed (or moved from) and "
      "no spool call made it");
}

// A state already set to EmptyFutureError, with callbacks run inline, that
// every empty Future<T> uses. Never destroyed, so that it outlives any
// Future in a static.
//
// GCC 12 warns, wrongly, that the destroyed Result<T> (an error, no value)
// may hold an uninitialized value when T holds a vector; the pragma keeps
// that false positive out of builds with -Werror.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <class T>
const std::shared_ptr<SharedState<T>>& EmptyState() {
  static const auto* state = [] {
    auto made = std::make_shared<SharedState<T>>(nullptr);
    made->Set(Result<T>(EmptyFutureError()));
    return new std::shared_ptr<SharedState<T>>(std::move(made));
  }();
  return *state;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// What Then's callback returns, sorted: void, Result<U> or Future<U>.
template <class R>
struct ThenReturn {
  static constexpr bool kChains = false;
};
template <class U>
struct ThenReturn<Result<U>> {
  static constexpr bool kChains = true;
  static constexpr bool kFlattens = false;
  using Value = U;
};
template <class U>
struct ThenReturn<Future<U>> {
  static constexpr bool kChains = true;
  static constexpr bool kFlattens = true;
  using Value = U;
};

}  // namespace internal

// The eventual result of an asynchronous spool call.
//
// A default-constructed (or moved-from) Future is empty: valid() is false,
// and it behaves as a Future already resolved with FailedPrecondition ("the
// Future is empty: ..."): Ready() and WaitFor() return true at once, Wait()
// returns that error without blocking, and Then runs its callback with it
// inline, on the calling thread. It never crashes and never blocks.
template <class T>
class Future {
 public:
  Future() = default;

  // False for an empty Future (see the class comment).
  bool valid() const { return state_ != nullptr; }

  // True once the result is set (always for an empty Future). Never blocks.
  bool Ready() const { return state().Ready(); }

  // Blocks the calling thread until the result is set and returns it. The
  // reference stays valid while any copy of this Future lives (for an empty
  // Future: for the life of the program).
  //
  // Do not call from a handler on the future of work that the same handler
  // must finish first (e.g. Close), or from a callback on the callback
  // executor when that executor has one thread: both wait for themselves.
  const Result<T>& Wait() const& { return state().Wait(); }

  // The same on a temporary Future, returning a copy: a reference into the
  // temporary's state would dangle at the end of the statement, as in
  // `const auto& r = runtime->GetTask(id).Wait();`.
  Result<T> Wait() && { return state().Wait(); }

  // Blocks for at most `timeout`. Returns true when the result is set.
  template <class Rep, class Period>
  bool WaitFor(std::chrono::duration<Rep, Period> timeout) const {
    return state().WaitFor(
        std::chrono::duration_cast<std::chrono::nanoseconds>(timeout));
  }

  // Runs `callback` once with the result, on the executor this Future was
  // made with (see Options::callback_executor). If the result is already set,
  // the callback is queued at once. Any number of callbacks may be attached.
  //
  // What Then returns depends on what `callback` returns:
  //   - void (or any other type, which is ignored): nothing; the callback is
  //     attached, as above;
  //   - Result<U>: a Future<U> that resolves with what the callback
  //     returned, once it ran;
  //   - Future<U>: a Future<U> that resolves with that future's result,
  //     once both are set (for a next step that is itself asynchronous).
  // The returned Future's callbacks run on this Future's executor. If a
  // chaining callback throws, the returned Future resolves with Aborted
  // naming the exception; a void callback must not throw.
  //
  // The callback receives every result, errors included: a step that only
  // makes sense on success checks ok() and passes the error on, e.g.
  // `if (!r.ok()) return r.status();` for a Result<U> return.
  template <class F>
  auto Then(F&& callback) const {
    using R = std::decay_t<std::invoke_result_t<F&, const Result<T>&>>;
    if constexpr (!internal::ThenReturn<R>::kChains) {
      state().Then(
          std::function<void(const Result<T>&)>(std::forward<F>(callback)));
    } else {
      return Chain<R>(std::forward<F>(callback));
    }
  }

 private:
  friend class Promise<T>;
  explicit Future(std::shared_ptr<internal::SharedState<T>> state)
      : state_(std::move(state)) {}

  internal::SharedState<T>& state() const {
    return state_ != nullptr ? *state_ : *internal::EmptyState<T>();
  }

  template <class R, class F>
  Future<typename internal::ThenReturn<R>::Value> Chain(F&& callback) const;

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

namespace internal {

// What a chaining Then callback that threw stands for: an Aborted result.
template <class R>
R ChainError(const std::string& message) {
  using U = typename ThenReturn<R>::Value;
  if constexpr (ThenReturn<R>::kFlattens) {
    return MakeReadyFuture<U>(Result<U>(Status::Aborted(message)));
  } else {
    return R(Status::Aborted(message));
  }
}

}  // namespace internal

template <class T>
template <class R, class F>
Future<typename internal::ThenReturn<R>::Value> Future<T>::Chain(
    F&& callback) const {
  using U = typename internal::ThenReturn<R>::Value;
  internal::SharedState<T>& from = state();
  Promise<U> next(from.executor());
  from.Then([next, fn = std::decay_t<F>(std::forward<F>(callback))](
                const Result<T>& result) mutable {
    R returned = [&]() -> R {
      try {
        return fn(result);
      } catch (const std::exception& e) {
        return internal::ChainError<R>(std::string("a Then callback threw: ") +
                                       e.what());
      } catch (...) {
        return internal::ChainError<R>("a Then callback threw");
      }
    }();
    if constexpr (internal::ThenReturn<R>::kFlattens) {
      returned.Then([next](const Result<U>& inner) { next.Set(inner); });
    } else {
      next.Set(std::move(returned));
    }
  });
  return next.GetFuture();
}

}  // namespace spool

#endif  // SPOOL_INCLUDE_FUTURE_H_
