// Handlers: the application code that runs tasks.

#ifndef SPOOL_INCLUDE_HANDLER_H_
#define SPOOL_INCLUDE_HANDLER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/rate_limit.h>
#include <spool/status.h>
#include <spool/task.h>

namespace spool {

namespace internal {
class AttemptControl;
class RateHold;
}  // namespace internal

// How a task this one depends on ended, as its dependent's attempt sees it
// (TaskContext::dependencies).
struct DependencyOutcome {
  TaskId id = 0;
  // Its status when the attempt started: succeeded, failed or cancelled
  // once the dependent may run (a kRun dependent also runs after failures).
  // Empty when the dependency no longer exists (purged, deleted) or its
  // record cannot be read.
  std::optional<TaskStatus> status;
  // Its result (TaskContext::SetResult); empty unless it succeeded with one.
  std::optional<std::string> result;
  // Why it failed or was cancelled (its last error); empty otherwise.
  std::string last_error;
};

// What a handler knows about the attempt it runs, and what it can tell
// spool about it.
//
// The context, and every string_view it returns, is valid only until the
// handler returns. Copy what must outlive the call. Its methods may be called
// from other threads the handler starts, as long as the handler has not
// returned.
class TaskContext {
 public:
  TaskId id() const { return id_; }
  std::string_view type() const { return type_; }
  // The payload, migrated to the handler's version if it was older.
  std::string_view payload() const { return payload_; }
  // 1 for the first attempt; a crash-interrupted attempt counts.
  uint32_t attempt() const { return attempt_; }
  // True when the task's most recent failed attempt before this one was
  // interrupted by a crash (its last error is kInterruptedAttemptError, see
  // spool/task.h): the handler may have done part of its work, or all of
  // it, without the outcome being recorded. For handlers that check what a
  // previous run left behind before doing it again. False when the task has
  // not failed yet, or its last failure was an ordinary one. Runtime::Retry
  // keeps the last error, so the first attempt of a task retried by hand
  // after an interrupted one sees true.
  bool previous_attempt_interrupted() const {
    return previous_attempt_interrupted_;
  }
  uint32_t max_attempts() const { return max_attempts_; }
  int32_t priority() const { return priority_; }
  // The EnqueueOptions::idempotency_key; empty if none.
  std::string_view idempotency_key() const { return idempotency_key_; }
  // The EnqueueOptions::group; empty if none.
  std::string_view group() const { return group_; }

  // True once the task was cancelled (Runtime::Cancel) or its attempt ran
  // past its timeout. The handler should stop soon: returning OK still
  // succeeds the task; returning an error cancels it (or, after a timeout,
  // fails the attempt), without retry after a cancel.
  bool cancelled() const;

  // Waits until cancelled() or `timeout` passes; returns cancelled().
  bool WaitForCancel(Duration timeout) const;

  // True once Runtime::Close began (graceful shutdown). A handler that can
  // stop early should: if it returns an error while stopping() is true (and
  // the task was not cancelled), the attempt does not count and the task
  // goes back to the queue in its place, to run again at the next Start,
  // like a claim that never started. Returning OK still succeeds the task.
  // Close waits for handlers up to runtime.close_timeout_ms either way.
  bool stopping() const;

  // Waits until cancelled(), stopping() or `timeout` passes; returns
  // whether the task was cancelled or the runtime is stopping. For
  // handlers that wait on something and want to give the task back at
  // shutdown.
  bool WaitForCancelOrStop(Duration timeout) const;

  // Reports progress, e.g. a fraction in [0, 1]; readable through
  // Runtime::Progress while the attempt runs, and delivered to
  // Runtime::SubscribeProgress listeners. Kept in memory only. (Once the
  // task is handed off, Runtime::ReportProgress reports for it.)
  void ReportProgress(double progress);

  // Hands the task off: when the handler returns OK, the task stays running,
  // holding `reference`, but releases its worker. Its outcome is reported
  // later with Runtime::CompleteHandOff or FailHandOff. A handed-off task
  // survives restarts (it is not treated as interrupted).
  void HandOff(std::string reference);

  // Overrides the retry delay if this attempt fails (e.g. from an HTTP
  // Retry-After). The attempt still counts.
  void SetRetryDelay(Duration delay);

  // Defers the task until `gate` opens: when the handler returns (whatever
  // it returns), the gate is closed, the task goes back to the queue in its
  // place, and the attempt does not count. For errors that say "not now"
  // (offline, a dependency service down) rather than "this task failed".
  void DeferUntilOpen(std::string gate);

  // Snoozes the task: when the handler returns (whatever it returns), the
  // task goes back to pending, due `delay` from then (0: at once, in its
  // place), the attempt does not count and no failure is recorded. The
  // task's snooze count (TaskInfo::snoozes) goes up by one; a snooze past
  // runtime.max_snoozes (Options::max_snoozes) is refused when the handler
  // returns: the attempt then fails, and counts, with an error that says
  // so. A snooze is ignored once cancelled() is true, and DeferUntilOpen
  // wins over it. Returns InvalidArgument naming `delay` when it is
  // negative or over 365 days (nothing is snoozed then), else OK, so that
  // `return context.Snooze(delay);` both snoozes and reports misuse.
  Status Snooze(Duration delay);

  // Sets the task's result: small bytes stored with the task when this
  // attempt succeeds it (readable as TaskInfo::result, in the task's JSON
  // and by `spool show`, and by dependents as DependencyOutcome::result).
  // Not stored when the attempt fails, is snoozed, deferred or handed off.
  // A later call replaces an earlier one. Returns InvalidArgument naming
  // `result` and the bound when it is larger than storage.max_result_bytes
  // (Options::max_result_bytes); the result is not set then, so that
  // `return context.SetResult(bytes);` fails the attempt with that error.
  Status SetResult(std::string result);

  // How each task this one depends on (EnqueueOptions::depends_on) ended,
  // in the order given, read when the attempt started: for a dependent
  // that runs after a failure (DependencyFailure::kRun) to tell which
  // dependency failed, or to use their results. Empty without dependencies.
  const std::vector<DependencyOutcome>& dependencies() const;

  // Holds the buckets of the named rate limits (Runtime::AddRateLimit) this
  // attempt was admitted under, for `duration` from now: no attempt of
  // those buckets starts before then, and the next ones start at the
  // limit's pace after it. Stored like the limit's state, so a restart
  // keeps the hold. For an API that answers 429 or 503 with a Retry-After,
  // as durable_queue's HTTP adapter honours it: other buckets (other hosts)
  // and other types keep running. A later hold that ends sooner does not
  // shorten one in force. The attempt itself ends as the handler returns.
  //
  // Returns InvalidArgument naming `duration` when it is negative or over
  // 365 days, FailedPrecondition when no named limit covers the task's
  // type, or the attempt runs on a remote worker (spool/remote_worker.h),
  // whose attempts the queue node's limits admit but cannot be held from
  // there.
  Status HoldRateLimits(Duration duration);

 private:
  friend class TaskContextBuilder;
  TaskContext() = default;

  TaskId id_ = 0;
  std::string_view type_;
  std::string_view payload_;
  uint32_t attempt_ = 0;
  uint32_t max_attempts_ = 0;
  int32_t priority_ = 0;
  std::string_view idempotency_key_;
  std::string_view group_;
  internal::AttemptControl* control_ = nullptr;
  internal::RateHold* rate_hold_ = nullptr;
  bool previous_attempt_interrupted_ = false;
  size_t max_result_bytes_ = 0;
  const std::vector<DependencyOutcome>* dependencies_ = nullptr;
};

// Runs one attempt of a task.
//
// Return OK when the task is done. Returning an error, or throwing, fails the
// attempt: its message (or what()) is stored as the task's last error and the
// retry policy decides what happens next. Returning Status::Cancelled cancels
// the task without retry.
//
// Handlers run on spool's worker threads, one task per worker at a time, and
// may block. They may call back into the runtime (Enqueue, GetTask, ...) but
// must not wait for Close or Drain there: those wait for the handler itself.
using Handler = std::function<Status(TaskContext& context)>;

// Turns a payload stored by an older handler version into the current one.
// Returning an error fails the task without retry.
using PayloadMigration = std::function<Result<std::string>(
    uint32_t from_version, std::string_view payload)>;

// Options registered with a task type's handler.
//
// The retry policy, timeout, concurrency limit, rate limit and gates may
// also come from the config file's [types.NAME] table (Options::types), so
// that operators can tune a type without a rebuild. Each of them is a
// std::optional here, so that "left unset in code" is a state of its own
// rather than a value that happens to equal a default: a field set in code
// wins, even when set to what the default would be (e.g. max_concurrent =
// 0 to lift a limit the file sets); a field left unset takes the file's
// value; one the file does not set either takes the default stated below.
// (Treating "equal to the default" as unset would make such code silently
// lose to the file.) The merge happens once, in Runtime::RegisterHandler.
struct HandlerOptions {
  // The retry policy of tasks of this type that do not set their own.
  // Unset: [types.NAME.retry] over the file's [retry] default
  // (Options::default_retry), field by field. Default: unset, which with no
  // file is RetryPolicy{} (exponential, 3 attempts).
  std::optional<RetryPolicy> retry;

  // Which errors are retried; others fail the task at once. Default: null,
  // meaning every error except Cancelled. A filter that throws means no retry.
  std::function<bool(const Status& error)> retry_if;

  // A delay for a particular error (e.g. parsed from a Retry-After), or
  // nullopt for the policy's. Default: null.
  std::function<std::optional<Duration>(const Status& error)> retry_delay;

  // Each attempt's time limit; zero for none. A task's own
  // EnqueueOptions::timeout wins. Unset: [types.NAME] timeout_ms.
  // Default: unset, which with no file is none.
  std::optional<Duration> timeout;

  // At most this many tasks of this type run at once; 0 for no limit beyond
  // the global one. Unset: [types.NAME] concurrency. Default: unset, which
  // with no file is 0.
  std::optional<uint32_t> max_concurrent;

  // Unset: [types.NAME.rate_limit]. Default: unset, which with no file is
  // no limit.
  std::optional<RateLimit> rate_limit;

  // Gates (see Runtime::SetGate) that must all be open for tasks of this
  // type to start. Unset: [types.NAME] gates. Default: unset, which with no
  // file is none.
  std::optional<std::vector<std::string>> requires_gates;

  // The payload schema version this handler reads. Tasks are stored with
  // the version of the handler registered when they were enqueued. Default: 0.
  uint32_t version = 0;

  // Called for payloads stored with an older version. A payload with a newer
  // version than the handler's fails the task without retry. Default: null
  // (older payloads are passed unchanged).
  PayloadMigration migrate;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_HANDLER_H_
