#include "runtime/thread_executor.h"

#include <exception>

#include <spdlog/spdlog.h>

#include "util/logging.h"

namespace spool {

ThreadExecutor::ThreadExecutor() : thread_([this] { Loop(); }) {}

ThreadExecutor::~ThreadExecutor() { Shutdown(); }

void ThreadExecutor::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopped_) {
      queue_.push_back(std::move(fn));
      if (queue_.size() == 1) wake_.notify_one();
      return;
    }
  }
  fn();
}

void ThreadExecutor::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ThreadExecutor::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {
      // Stopping with nothing left: later posts run inline.
      stopped_ = true;
      return;
    }
    std::function<void()> fn = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      fn();
    } catch (const std::exception& e) {
      Logger()->error("a Future callback threw: {}", e.what());
    } catch (...) {
      Logger()->error("a Future callback threw a non-standard exception");
    }
    lock.lock();
  }
}

}  // namespace spool
