#include "actors/attempt_control.h"

#include <spool/handler.h>

namespace spool {

void ProgressBoard::Set(TaskId id, double progress) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    progress_[id] = progress;
  }
  if (listener_) listener_(id, progress);
}

void ProgressBoard::Clear(TaskId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  progress_.erase(id);
}

std::optional<double> ProgressBoard::Get(TaskId id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = progress_.find(id);
  if (it == progress_.end()) return std::nullopt;
  return it->second;
}

namespace internal {

void AttemptControl::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_.store(true, std::memory_order_release);
  }
  cancelled_cv_.notify_all();
}

bool AttemptControl::WaitForCancel(Duration timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cancelled_cv_.wait_for(lock, timeout, [this] { return cancelled(); });
}

void AttemptControl::RequestStop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_.store(true, std::memory_order_release);
  }
  cancelled_cv_.notify_all();
}

bool AttemptControl::WaitForCancelOrStop(Duration timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cancelled_cv_.wait_for(
      lock, timeout, [this] { return cancelled() || stop_requested(); });
}

void AttemptControl::ReportProgress(double progress) {
  if (progress_) progress_->Set(id_, progress);
}

void AttemptControl::ClearProgress() {
  if (progress_) progress_->Clear(id_);
}

void AttemptControl::HandOff(std::string reference) {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_.handoff = std::move(reference);
}

void AttemptControl::SetRetryDelay(Duration delay) {
  std::lock_guard<std::mutex> lock(mutex_);
  retry_delay_ = delay;
}

std::optional<Duration> AttemptControl::retry_delay() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return retry_delay_;
}

void AttemptControl::DeferUntilOpen(std::string gate) {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_.deferred_gate = std::move(gate);
}

void AttemptControl::Snooze(Duration delay) {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_.snooze = delay;
}

void AttemptControl::SetResult(std::string result) {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_.result = std::move(result);
}

AttemptControl::Requests AttemptControl::TakeRequests() {
  std::lock_guard<std::mutex> lock(mutex_);
  Requests taken = std::move(requests_);
  requests_ = Requests();
  return taken;
}

}  // namespace internal

// TaskContext forwards to the attempt's control. A context without one (never
// made by spool itself) behaves as an attempt nobody cancels.

bool TaskContext::cancelled() const {
  return control_ != nullptr && control_->cancelled();
}

bool TaskContext::WaitForCancel(Duration timeout) const {
  return control_ != nullptr && control_->WaitForCancel(timeout);
}

bool TaskContext::stopping() const {
  return control_ != nullptr && control_->stop_requested();
}

bool TaskContext::WaitForCancelOrStop(Duration timeout) const {
  return control_ != nullptr && control_->WaitForCancelOrStop(timeout);
}

void TaskContext::ReportProgress(double progress) {
  if (control_ != nullptr) control_->ReportProgress(progress);
}

void TaskContext::HandOff(std::string reference) {
  if (control_ != nullptr) control_->HandOff(std::move(reference));
}

void TaskContext::SetRetryDelay(Duration delay) {
  if (control_ != nullptr) control_->SetRetryDelay(delay);
}

void TaskContext::DeferUntilOpen(std::string gate) {
  if (control_ != nullptr) control_->DeferUntilOpen(std::move(gate));
}

namespace {
// The longest snooze, as the longest EnqueueOptions::delay: 365 days.
constexpr Duration kMaxSnooze = kMaxDelay;
const std::vector<DependencyOutcome> kNoDependencies;
}  // namespace

Status TaskContext::Snooze(Duration delay) {
  if (delay < Duration(0) || delay > kMaxSnooze) {
    return Status::InvalidArgument(
        "Snooze: delay must be between 0 and 365 days, got " +
        std::to_string(delay.count()) + " us");
  }
  if (control_ != nullptr) control_->Snooze(delay);
  return Status::OK();
}

Status TaskContext::SetResult(std::string result) {
  if (result.size() > max_result_bytes_) {
    return Status::InvalidArgument(
        "SetResult: result is " + std::to_string(result.size()) +
        " bytes; the limit is " + std::to_string(max_result_bytes_) +
        " (storage.max_result_bytes)");
  }
  if (control_ != nullptr) control_->SetResult(std::move(result));
  return Status::OK();
}

const std::vector<DependencyOutcome>& TaskContext::dependencies() const {
  return dependencies_ != nullptr ? *dependencies_ : kNoDependencies;
}

}  // namespace spool
