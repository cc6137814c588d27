// AttemptControl: the state one running attempt shares between its handler
// (through TaskContext), its worker and the scheduler: the cancellation
// token, progress, a hand-off, a retry delay.

#ifndef SPOOL_ACTORS_ATTEMPT_CONTROL_H_
#define SPOOL_ACTORS_ATTEMPT_CONTROL_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <spool/task.h>

namespace spool {

// Progress of running attempts, by task id. Shared by the runtime (which
// answers Runtime::Progress) and the attempts (which report it).
class ProgressBoard {
 public:
  // Called with every Set, on the setting thread, outside the board's
  // lock; it must not block (Runtime::SubscribeProgress's feed).
  using Listener = std::function<void(TaskId id, double progress)>;
  ProgressBoard() = default;
  explicit ProgressBoard(Listener listener) : listener_(std::move(listener)) {}

  void Set(TaskId id, double progress);
  void Clear(TaskId id);
  std::optional<double> Get(TaskId id) const;

 private:
  const Listener listener_;
  mutable std::mutex mutex_;
  std::unordered_map<TaskId, double> progress_;
};

namespace internal {

// Thread safe: the handler, the worker and the scheduler use it at once.
class AttemptControl {
 public:
  AttemptControl(TaskId id, std::shared_ptr<ProgressBoard> progress)
      : id_(id), progress_(std::move(progress)) {}

  // The handler starts now (microseconds on the task clock). A claimed
  // attempt may wait in the pool before it starts; its timeout runs from
  // here.
  void MarkStarted(int64_t now_us) {
    started_us_.store(now_us, std::memory_order_release);
  }
  // When the handler started; 0 while it has not.
  int64_t started_us() const {
    return started_us_.load(std::memory_order_acquire);
  }

  // Sets the token and wakes WaitForCancel. Idempotent.
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  bool WaitForCancel(Duration timeout) const;

  // Close began: sets the stop flag and wakes WaitForCancelOrStop.
  // Idempotent.
  void RequestStop();
  bool stop_requested() const {
    return stop_requested_.load(std::memory_order_acquire);
  }
  // Waits until cancelled(), stop_requested() or `timeout` passes; returns
  // whether either flag is set.
  bool WaitForCancelOrStop(Duration timeout) const;

  void ReportProgress(double progress);
  // Forgets the progress once the attempt ends.
  void ClearProgress();

  void HandOff(std::string reference);

  void SetRetryDelay(Duration delay);
  std::optional<Duration> retry_delay() const;

  void DeferUntilOpen(std::string gate);

  // REQUIRES: a delay TaskContext::Snooze accepted.
  void Snooze(Duration delay);

  // REQUIRES: a result TaskContext::SetResult accepted.
  void SetResult(std::string result);

  // What the handler asked for with HandOff, DeferUntilOpen, Snooze and
  // SetResult.
  struct Requests {
    std::optional<std::string> handoff;
    std::optional<std::string> deferred_gate;
    std::optional<Duration> snooze;
    std::optional<std::string> result;
  };
  // Moves the requests out, under one lock: what the worker reads once the
  // handler returned.
  Requests TakeRequests();

 private:
  const TaskId id_;
  const std::shared_ptr<ProgressBoard> progress_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<int64_t> started_us_{0};
  mutable std::mutex mutex_;
  mutable std::condition_variable cancelled_cv_;
  std::optional<Duration> retry_delay_;
  Requests requests_;
};

}  // namespace internal
}  // namespace spool

#endif  // SPOOL_ACTORS_ATTEMPT_CONTROL_H_
