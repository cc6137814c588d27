#include "runtime/progress_feed.h"

#include <vector>

namespace spool {

void ProgressFeed::SetExecutor(std::shared_ptr<Executor> executor) {
  std::lock_guard<std::mutex> lock(mutex_);
  executor_ = std::move(executor);
}

void ProgressFeed::Offer(TaskId id, double progress) {
  // The common case, nobody listening, takes no lock.
  if (listener_count_.load(std::memory_order_acquire) == 0) return;
  std::shared_ptr<Executor> executor;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_[id] = progress;
    if (delivery_queued_ || !executor_) return;
    delivery_queued_ = true;
    executor = executor_;
  }
  executor->Post([feed = shared_from_this()] { feed->Deliver(); });
}

void ProgressFeed::Deliver() {
  std::unordered_map<TaskId, double> reports;
  std::vector<std::shared_ptr<Listener>> listeners;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reports.swap(pending_);
    delivery_queued_ = false;
    for (const auto& [token, listener] : listeners_) {
      listeners.push_back(listener);
    }
  }
  for (const auto& listener : listeners) {
    std::lock_guard<std::recursive_mutex> lock(listener->mutex);
    for (const auto& [id, progress] : reports) {
      if (!listener->active) break;
      listener->call(ProgressUpdate{id, progress});
    }
  }
}

void ProgressFeed::Add(uint64_t token,
                       std::function<void(const ProgressUpdate&)> listener) {
  auto entry = std::make_shared<Listener>();
  entry->call = std::move(listener);
  std::lock_guard<std::mutex> lock(mutex_);
  listeners_.emplace(token, std::move(entry));
  listener_count_.store(listeners_.size(), std::memory_order_release);
}

bool ProgressFeed::Remove(uint64_t token) {
  std::shared_ptr<Listener> listener;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = listeners_.find(token);
    if (it == listeners_.end()) return false;
    listener = std::move(it->second);
    listeners_.erase(it);
    listener_count_.store(listeners_.size(), std::memory_order_release);
  }
  listener->active = false;
  // Waits for a call running on another thread (taken at once on this one).
  std::lock_guard<std::recursive_mutex> lock(listener->mutex);
  return true;
}

}  // namespace spool
