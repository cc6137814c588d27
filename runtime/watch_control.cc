#include "runtime/watch_control.h"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "util/logging.h"

namespace spool {

void WatchLink::Unwatch(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (watcher_) caf::anon_send(watcher_, actors::unwatch_atom::value, id);
}

void WatchLink::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  watcher_ = nullptr;
}

void LogWatchCallbackError(const char* what) {
  Logger()->error("a watch callback threw ({}); the watch goes on", what);
}

namespace internal {

bool WatchControl::active() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !cancelled_ && !closed_;
}

void WatchControl::Unsubscribe() {
  bool unwatch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cancelled_ = true;
    DropPending();
    // A callback running on another thread finishes before this returns;
    // one running on this thread is the caller itself.
    if (running_ && running_thread_ != std::this_thread::get_id()) {
      idle_.wait(lock, [this] { return !running_; });
    }
    unwatch = !unwatched_;
    unwatched_ = true;
  }
  if (unwatch) link_->Unwatch(id_);
}

}  // namespace internal

Watch::Watch(std::shared_ptr<internal::WatchControl> control)
    : control_(std::move(control)) {}

Watch& Watch::operator=(Watch&& other) noexcept {
  if (this != &other) {
    if (control_) control_->Unsubscribe();
    control_ = std::move(other.control_);
  }
  return *this;
}

Watch::~Watch() {
  if (control_) control_->Unsubscribe();
}

bool Watch::active() const { return control_ && control_->active(); }

void Watch::Unsubscribe() {
  if (control_) control_->Unsubscribe();
}

}  // namespace spool
