#include <algorithm>
#include <cmath>

#include <spool/task.h>

namespace spool {
namespace {

constexpr const char* kStatusNames[kTaskStatusCount] = {
    "pending", "running",   "retry_scheduled", "succeeded",
    "failed",  "cancelled", "waiting",         "held"};

}  // namespace

const char* TaskStatusName(TaskStatus status) {
  auto index = static_cast<size_t>(status);
  return index < kTaskStatusCount ? kStatusNames[index] : "invalid";
}

std::optional<TaskStatus> ParseTaskStatus(std::string_view name) {
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    if (name == kStatusNames[i]) return static_cast<TaskStatus>(i);
  }
  return std::nullopt;
}

bool IsTerminal(TaskStatus status) {
  return status == TaskStatus::kSucceeded || status == TaskStatus::kFailed ||
         status == TaskStatus::kCancelled;
}

Status RetryPolicy::Validate() const {
  if (kind != Kind::kNone && kind != Kind::kFixed &&
      kind != Kind::kExponential) {
    return Status::InvalidArgument("retry policy kind is out of range");
  }
  if (max_attempts < 1) {
    return Status::InvalidArgument("retry max_attempts must be >= 1, got 0");
  }
  if (kind == Kind::kNone) return Status::OK();
  if (initial_delay < Duration(0) || initial_delay > kMaxDelay) {
    return Status::InvalidArgument(
        "retry initial_delay must be between 0 and 365 days, got " +
        std::to_string(initial_delay.count()) + " us");
  }
  if (max_delay < initial_delay || max_delay > kMaxDelay) {
    return Status::InvalidArgument(
        "retry max_delay must be between initial_delay and 365 days, got " +
        std::to_string(max_delay.count()) + " us");
  }
  if (!(jitter >= 0.0 && jitter <= 1.0)) {
    return Status::InvalidArgument("retry jitter must be in [0, 1], got " +
                                   std::to_string(jitter));
  }
  return Status::OK();
}

Duration RetryPolicy::DelayAfter(uint32_t attempts_made,
                                 double unit_random) const {
  switch (kind) {
    case Kind::kNone:
      return Duration(0);
    case Kind::kFixed:
      return initial_delay;
    case Kind::kExponential:
      break;
  }
  uint32_t doublings = attempts_made == 0 ? 0 : attempts_made - 1;
  double delay = static_cast<double>(initial_delay.count());
  // Past 2^40 every sane cap is exceeded; stop before the double overflows.
  delay *= std::ldexp(1.0, static_cast<int>(std::min<uint32_t>(doublings, 40)));
  delay = std::min(delay, static_cast<double>(max_delay.count()));
  if (jitter > 0.0) {
    delay *= 1.0 - jitter + 2.0 * jitter * unit_random;
    delay = std::min(delay, static_cast<double>(max_delay.count()));
  }
  return Duration(static_cast<int64_t>(std::max(delay, 0.0)));
}

const char* TaskEventKindName(TaskEvent::Kind kind) {
  switch (kind) {
    case TaskEvent::Kind::kEnqueued:
      return "enqueued";
    case TaskEvent::Kind::kStarted:
      return "started";
    case TaskEvent::Kind::kRetryScheduled:
      return "retry_scheduled";
    case TaskEvent::Kind::kSucceeded:
      return "succeeded";
    case TaskEvent::Kind::kFailed:
      return "failed";
    case TaskEvent::Kind::kCancelled:
      return "cancelled";
    case TaskEvent::Kind::kTimedOut:
      return "timed_out";
    case TaskEvent::Kind::kDeferred:
      return "deferred";
  }
  return "invalid";
}

const char* DeferReasonName(DeferReason reason) {
  switch (reason) {
    case DeferReason::kNone:
      return "none";
    case DeferReason::kGateClosed:
      return "gate_closed";
    case DeferReason::kSnoozed:
      return "snoozed";
    case DeferReason::kPaused:
      return "paused";
    case DeferReason::kStopping:
      return "stopping";
    case DeferReason::kRecalled:
      return "recalled";
    case DeferReason::kNoWorker:
      return "no_worker";
    case DeferReason::kRateLimited:
      return "rate_limited";
  }
  return "invalid";
}

}  // namespace spool
