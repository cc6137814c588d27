// ProgressFeed: delivers progress reports to the listeners of
// Runtime::SubscribeProgress, on the callback executor, coalesced by task.

#ifndef SPOOL_RUNTIME_PROGRESS_FEED_H_
#define SPOOL_RUNTIME_PROGRESS_FEED_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <spool/future.h>
#include <spool/task.h>

namespace spool {

// Held by shared_ptr (a queued delivery keeps it). Thread safe. Offer
// never blocks: it updates a map and, when no delivery is queued, posts one
// to the executor. A delivery hands every listener the latest value of each
// task offered since the last delivery, so a handler that reports in a
// tight loop costs a map update per report and at most one queued delivery
// at a time.
class ProgressFeed : public std::enable_shared_from_this<ProgressFeed> {
 public:
  // REQUIRES: before the first Offer; `executor` outlives the feed's use.
  void SetExecutor(std::shared_ptr<Executor> executor);

  // A report of task `id` (ProgressBoard's listener).
  void Offer(TaskId id, double progress);

  // Adds a listener under `token`. Calls of one listener never overlap.
  void Add(uint64_t token, std::function<void(const ProgressUpdate&)> listener);
  // Removes the listener of `token`, as Runtime::Unsubscribe describes
  // (it waits for a call running on another thread); false when `token`
  // is not one of this feed's.
  bool Remove(uint64_t token);

 private:
  struct Listener {
    // Held while the listener runs; recursive so that a listener may
    // unsubscribe itself.
    std::recursive_mutex mutex;
    std::atomic<bool> active{true};
    std::function<void(const ProgressUpdate&)> call;
  };
  // Runs on the executor: hands the pending reports to every listener.
  void Deliver();

  std::shared_ptr<Executor> executor_;
  std::atomic<size_t> listener_count_{0};
  std::mutex mutex_;
  std::map<uint64_t, std::shared_ptr<Listener>> listeners_;
  std::unordered_map<TaskId, double> pending_;
  bool delivery_queued_ = false;
};

}  // namespace spool

#endif  // SPOOL_RUNTIME_PROGRESS_FEED_H_
