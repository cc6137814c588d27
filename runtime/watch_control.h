// The runtime's side of a Watch: a latest-value slot per subscription that
// hands results to the application's callback through the callback
// executor, and the unsubscribe handshake that makes "no callback after
// Unsubscribe returns" hold. Not part of the API.

#ifndef SPOOL_RUNTIME_WATCH_CONTROL_H_
#define SPOOL_RUNTIME_WATCH_CONTROL_H_

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include <spool/future.h>
#include <spool/query.h>

#include "actors/actors.h"

namespace spool {

// How Watch objects reach the watcher. Shared by the runtime and every
// Watch, which may outlive the runtime: after Close, Unwatch does nothing.
class WatchLink {
 public:
  explicit WatchLink(actors::watch_actor watcher)
      : watcher_(std::move(watcher)) {}

  // Tells the watcher that subscription `id` ended.
  void Unwatch(uint64_t id);

  // The runtime is closing: drops the watcher's handle, so that no Watch
  // sends to an actor system that is going away.
  void Close();

 private:
  std::mutex mutex_;
  actors::watch_actor watcher_;
};

// Logs a callback that threw; the subscription goes on.
void LogWatchCallbackError(const char* what);

namespace internal {

class WatchControl {
 public:
  WatchControl(uint64_t id, std::shared_ptr<WatchLink> link)
      : id_(id), link_(std::move(link)) {}
  virtual ~WatchControl() = default;
  WatchControl(const WatchControl&) = delete;
  WatchControl& operator=(const WatchControl&) = delete;

  uint64_t id() const { return id_; }
  bool active() const;
  // See Watch::Unsubscribe.
  void Unsubscribe();

 protected:
  // Drops a result offered but not yet delivered. REQUIRES: mutex_ held.
  virtual void DropPending() = 0;

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  // Set by Unsubscribe: nothing is delivered any more.
  bool cancelled_ = false;
  // Set when the runtime closed: only the Closed result is still delivered.
  bool closed_ = false;
  // A callback runs, on running_thread_.
  bool running_ = false;
  std::thread::id running_thread_;
  // A delivery task is queued on the executor or running.
  bool posted_ = false;

 private:
  const uint64_t id_;
  const std::shared_ptr<WatchLink> link_;
  bool unwatched_ = false;
};

// A subscription delivering Result<T> to a WatchCallback<T>.
template <class T>
class TypedWatch final : public WatchControl,
                         public actors::WatchSubscriber,
                         public std::enable_shared_from_this<TypedWatch<T>> {
 public:
  TypedWatch(uint64_t id, std::shared_ptr<WatchLink> link,
             std::shared_ptr<Executor> executor, WatchCallback<T> callback)
      : WatchControl(id, std::move(link)),
        executor_(std::move(executor)),
        callback_(std::move(callback)) {}

  void Offer(const std::shared_ptr<const void>& result) override {
    Put(std::static_pointer_cast<const Result<T>>(result), false);
  }

  void Close() override {
    Put(std::make_shared<const Result<T>>(
            Status::Closed("the runtime closed; the watch ended")),
        true);
  }

 private:
  // Stores `value` as the one pending result and makes sure a delivery task
  // is on its way. Only one task is queued at a time, so deliveries of one
  // watch never overlap and a slow callback skips results instead of
  // queueing them.
  void Put(std::shared_ptr<const Result<T>> value, bool last) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cancelled_ || closed_) return;
      pending_ = std::move(value);
      if (last) closed_ = true;
      if (posted_) return;
      posted_ = true;
    }
    Post();
  }

  void Post() {
    executor_->Post([self = this->shared_from_this()] { self->Deliver(); });
  }

  void Deliver() {
    std::shared_ptr<const Result<T>> value;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cancelled_ || !pending_) {
        posted_ = false;
        return;
      }
      value = std::move(pending_);
      running_ = true;
      running_thread_ = std::this_thread::get_id();
    }
    try {
      callback_(*value);
    } catch (const std::exception& e) {
      LogWatchCallbackError(e.what());
    } catch (...) {
      LogWatchCallbackError("a non-standard exception");
    }
    bool again;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
      again = pending_ != nullptr && !cancelled_;
      if (!again) posted_ = false;
    }
    idle_.notify_all();
    // A newer result came during the callback: deliver it in a task of its
    // own, so that one busy watch does not hold the executor's thread.
    if (again) Post();
  }

  void DropPending() override { pending_.reset(); }

  const std::shared_ptr<Executor> executor_;
  const WatchCallback<T> callback_;
  std::shared_ptr<const Result<T>> pending_;
};

}  // namespace internal
}  // namespace spool

#endif  // SPOOL_RUNTIME_WATCH_CONTROL_H_
