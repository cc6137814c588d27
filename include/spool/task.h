// Tasks: what an application hands spool, and what spool reports back.

#ifndef SPOOL_INCLUDE_TASK_H_
#define SPOOL_INCLUDE_TASK_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/future.h>

namespace spool {

// Identifies a task for its whole life. Ids are unique within one storage
// directory, never reused, and increase in the order Enqueue was called.
using TaskId = uint64_t;

// Wall-clock time, to the microsecond, as spool stores it.
using Timestamp = std::chrono::time_point<std::chrono::system_clock,
                                          std::chrono::microseconds>;
using Duration = std::chrono::microseconds;

// The longest delay, timeout or wait spool accepts anywhere: 365 days. A
// retry delay, a snooze, a rate-limit hold, a handler's timeout and the
// built-in sleep handler's milliseconds are each refused past it, so that
// no conversion of one to Duration (or to a point in time) can overflow.
inline constexpr Duration kMaxDelay = std::chrono::hours(24 * 365);

// The life of a task. Values are stored on disk: never renumber them.
enum class TaskStatus : uint8_t {
  // Stored and waiting for its turn, possibly for its run_at time.
  kPending = 0,
  // A handler is running it (or a crash interrupted that run).
  kRunning = 1,
  // An attempt failed and another is due at next_attempt_at.
  kRetryScheduled = 2,
  // A handler finished it. Terminal.
  kSucceeded = 3,
  // It ran out of attempts, or failed in a way that is never retried.
  // Terminal.
  kFailed = 4,
  // Cancelled before it succeeded. Terminal.
  kCancelled = 5,
  // Waiting for tasks it depends on.
  kWaiting = 6,
  // Parked by Hold until Release.
  kHeld = 7,
};

// The number of TaskStatus values.
inline constexpr size_t kTaskStatusCount = 8;

// "pending", "running", ... The inverse of ParseTaskStatus.
const char* TaskStatusName(TaskStatus status);
// Parses a name produced by TaskStatusName.
std::optional<TaskStatus> ParseTaskStatus(std::string_view name);
// Succeeded, failed or cancelled: nothing will run it again on its own.
bool IsTerminal(TaskStatus status);

// When a failed attempt is tried again.
//
// The delay before attempt n+1 (n >= 1 attempts made so far) is
//   kNone:        no retry at all (max_attempts is treated as 1);
//   kFixed:       initial_delay;
//   kExponential: min(initial_delay * 2^(n-1), max_delay), then scaled by a
//                 random factor in [1 - jitter, 1 + jitter) and capped again.
struct RetryPolicy {
  enum class Kind : uint8_t { kNone = 0, kFixed = 1, kExponential = 2 };

  Kind kind = Kind::kExponential;

  // Attempts in all, the first one included. Must be >= 1.
  // Default: 3.
  uint32_t max_attempts = 3;

  // The first retry's delay. Must be >= 0 and <= max_delay.
  // Default: 1 second.
  Duration initial_delay = std::chrono::seconds(1);

  // The cap on any delay. Must be <= 365 days.
  // Default: 1 hour.
  Duration max_delay = std::chrono::hours(1);

  // Random spread of exponential delays, as a fraction in [0, 1]. Zero keeps
  // delays exact. Default: 0.
  double jitter = 0.0;

  static RetryPolicy None() {
    return {Kind::kNone, 1, Duration(0), Duration(0)};
  }
  static RetryPolicy Fixed(uint32_t max_attempts, Duration delay) {
    return {Kind::kFixed, max_attempts, delay, delay};
  }
  static RetryPolicy Exponential(uint32_t max_attempts, Duration initial_delay,
                                 Duration max_delay, double jitter = 0.0) {
    return {Kind::kExponential, max_attempts, initial_delay, max_delay, jitter};
  }

  // OK, or InvalidArgument naming the field that is out of range.
  Status Validate() const;

  // The delay before the next attempt after `attempts_made` attempts.
  // `unit_random` is a value in [0, 1) used for jitter.
  Duration DelayAfter(uint32_t attempts_made, double unit_random) const;
};

// What a task that waits for others does when one of them fails or is
// cancelled. Values are stored on disk: never renumber them.
enum class DependencyFailure : uint8_t {
  // Cancel this task too (and, transitively, whatever waits for it).
  kCancel = 0,
  // Fail this task too, without running it.
  kFail = 1,
  // Run it anyway, once every dependency has finished.
  kRun = 2,
};

// Per-call options for Enqueue, in the manner of RocksDB's WriteOptions.
struct EnqueueOptions {
  // Higher runs first among tasks that are ready; ties run in enqueue order.
  // Never preempts a running task. Default: 0.
  int32_t priority = 0;

  // Overrides the retry policy registered with the task type's handler.
  // Default: the handler's policy.
  std::optional<RetryPolicy> retry;

  // Earliest time the task may start. Default: now.
  std::optional<Timestamp> run_at;

  // Earliest start as a delay from now; ignored when run_at is set.
  // Default: 0.
  Duration delay = Duration(0);

  // A label for queries, CancelGroup, per-group concurrency limits and fair
  // rotation between groups. Default: none.
  std::string group;

  // While a task with this key is active (not succeeded, failed or
  // cancelled), enqueueing another with the same key stores nothing and
  // resolves with the active task's id. The key is free again once that task
  // ends, or once its unique_for has passed. Default: none.
  std::string dedup_key;

  // With a dedup_key: how long, after the task with that key finishes
  // (succeeded, failed or cancelled), the key stays reserved for it, as
  // while it was active: an Enqueue with the same key within this time
  // stores nothing and resolves with the finished task's id. The window
  // runs from the finish and is stored with the task, so it holds across
  // restarts; Purge and retention keep the task while it is open (Delete
  // by id drops it). Must be >= 0 and at most 3650 days; nonzero needs a
  // dedup_key. Default: 0 (the key is free once the task ends).
  Duration unique_for = Duration(0);

  // What an Enqueue that meets its dedup_key's holder does.
  enum class OnDuplicate : uint8_t {
    // Nothing: the holder stays as it is.
    kKeepExisting = 0,
    // When the holder has not started (pending, retry_scheduled, waiting
    // or held), its payload (and payload version) become this task's, in
    // the same write as the lookup, so a handler that starts it sees the
    // new payload; priority, run_at, group and every other field stay the
    // holder's. A running or finished holder is left as kKeepExisting
    // leaves it. Either way the Enqueue resolves with the holder's id.
    kReplacePayload = 1,
  };
  // Needs a dedup_key when not kKeepExisting. Default: kKeepExisting.
  OnDuplicate on_duplicate = OnDuplicate::kKeepExisting;

  // Stored and shown to the handler (TaskContext::idempotency_key); it never
  // deduplicates. Default: none.
  std::string idempotency_key;

  // Tasks that must finish first. Each must already exist, or come earlier in
  // the same EnqueueBatch. Duplicates are dropped. At most
  // kMaxDependencies entries (InvalidArgument otherwise). Default: none.
  std::vector<TaskId> depends_on;

  // What happens when a dependency fails or is cancelled. Default: kCancel.
  DependencyFailure on_dependency_failure = DependencyFailure::kCancel;

  // Fails an attempt that runs longer than this, and cancels its token.
  // Default: the handler's timeout (none unless set).
  std::optional<Duration> timeout;
};

// The most entries EnqueueOptions::depends_on may hold. Each dependency is
// stored with the task and checked at enqueue, and each finishing
// dependency rewrites its dependents' states, so the list is bounded like
// every other size a caller controls.
inline constexpr size_t kMaxDependencies = 1000;

// One task to enqueue: a registered type name, an opaque payload and options.
struct TaskSpec {
  std::string type;
  std::string payload;
  EnqueueOptions options;
};

// The error text that recovery stores for an attempt a crash interrupted
// (the process stopped, or the machine did, while its handler ran): it is
// the task's last_error and one entry of its failure history, like the error
// of an attempt that failed, and the attempt counts. A handler sees it as
// TaskContext::previous_attempt_interrupted(). Part of the contract: the
// failure history's lines with this error are the interrupted attempts it
// still holds, and TaskInfo::interrupted_attempts counts all of them. A
// claim whose handler never started is not an attempt and leaves no entry.
inline constexpr std::string_view kInterruptedAttemptError =
    "interrupted: the process stopped while the task was running";

// A snapshot of one stored task, as a query returns it.
struct TaskInfo {
  TaskId id = 0;
  std::string type;
  std::string payload;
  TaskStatus status = TaskStatus::kPending;
  int32_t priority = 0;
  // Attempts started so far, including one a crash interrupted.
  uint32_t attempts = 0;
  uint32_t max_attempts = 1;
  Timestamp created_at;
  Timestamp updated_at;
  // When the task may next start; empty when it may start now or is done.
  std::optional<Timestamp> next_attempt_at;
  // The enqueue order: ties between equal priorities go to the lower value.
  uint64_t sequence = 0;
  // The error of the most recent failed attempt; empty if none.
  // kInterruptedAttemptError when a crash interrupted it.
  std::string last_error;

  // One failed attempt, as the history keeps it.
  struct Failure {
    uint32_t attempt = 0;
    Timestamp at;
    std::string error;
  };
  // The most recent failed attempts, oldest first (at most 16). An attempt
  // a crash interrupted is one of them, with error kInterruptedAttemptError;
  // there is no separate count of interrupted attempts: count those entries.
  std::vector<Failure> failures;

  std::string group;
  std::string dedup_key;
  std::string idempotency_key;
  std::vector<TaskId> depends_on;
  DependencyFailure on_dependency_failure = DependencyFailure::kCancel;
  // The per-attempt timeout; zero for none.
  Duration timeout = Duration(0);
  // Cancel was asked while the task ran.
  bool cancel_requested = false;
  // Set while the task is handed off (see TaskContext::HandOff).
  std::string handoff_reference;
  // While a remote worker runs it (docs/scale-out.md): the worker's node
  // name and the lease's first deadline, as recorded when it was leased
  // (heartbeats extend the lease in memory only). Empty and the epoch
  // otherwise.
  std::string remote_node;
  Timestamp lease_deadline{};
  uint32_t payload_version = 0;
  // Times its handler snoozed it (TaskContext::Snooze) since it was
  // enqueued or last retried by hand.
  uint32_t snoozes = 0;
  // Of `attempts`, those a crash interrupted: the process stopped (or was
  // killed) while the attempt ran, and recovery at the next open counted
  // it, with a kInterruptedAttemptError line in the failure history. Unlike
  // that history, which keeps the latest lines only, this count is exact.
  // Since the task was enqueued or last retried by hand.
  uint32_t interrupted_attempts = 0;
  // EnqueueOptions::unique_for as given at enqueue: how long after the task
  // finished its dedup key stays reserved for it; zero for not at all.
  Duration unique_for = Duration(0);
  // What its handler set with TaskContext::SetResult, kept when the task
  // succeeded; empty otherwise.
  std::optional<std::string> result;
};

// Task counts by status, from one consistent snapshot.
struct StatusCounts {
  std::array<uint64_t, kTaskStatusCount> by_status{};

  uint64_t of(TaskStatus status) const {
    return by_status[static_cast<size_t>(status)];
  }
  uint64_t total() const {
    uint64_t sum = 0;
    for (uint64_t count : by_status) sum += count;
    return sum;
  }
};

// What Enqueue returns at once.
struct Ticket {
  // The id assigned to the task. Valid immediately, before the task is
  // stored; use it to correlate, not to query, until `stored` resolves.
  TaskId id = 0;
  // Resolves with the task's id once the task is durable (on disk in sync
  // mode), or with the error that kept it from being stored. When the task
  // was deduplicated (EnqueueOptions::dedup_key), it resolves with the id of
  // the task that holds the key (active, or finished within its unique_for),
  // and nothing new is stored (but see EnqueueOptions::on_duplicate).
  Future<TaskId> stored;
};

// What EnqueueBatch returns at once.
struct BatchTicket {
  // The ids assigned to the tasks, in order. Valid immediately.
  std::vector<TaskId> ids;
  // Resolves with the ids once every task is durable, or with the error that
  // kept all of them from being stored: a batch is stored whole or not at
  // all. A deduplicated task's slot holds the id of the active task that
  // holds its key.
  Future<std::vector<TaskId>> stored;
};

// Which finished tasks Purge removes. A task whose dedup key is still
// reserved (EnqueueOptions::unique_for) is kept until its window closes,
// and so is a task that a waiting task depends on.
struct PurgeOptions {
  // Terminal statuses only (succeeded, failed, cancelled).
  // Default: succeeded.
  std::vector<TaskStatus> statuses = {TaskStatus::kSucceeded};
  // Only tasks whose last change is at least this old. Default: 0 (any age).
  Duration older_than = Duration(0);
  // Only tasks of these types. Default: empty (every type).
  std::vector<std::string> types;
  // The most index entries one purge step examines; each step is one write
  // batch, and other work runs between steps. Default: 1000.
  size_t batch_size = 1000;
};

// What Drain waits for, and for how long.
struct DrainOptions {
  // Also wait for the tasks due later: delayed tasks and scheduled retries,
  // until each is due and has run, so that Drain resolves only when every
  // task is final or held back by someone (paused, behind a closed gate,
  // held, or waiting on such a task). Default: false (tasks due later do not
  // count).
  bool wait_for_scheduled = false;
  // Resolve with TimedOut if the queue has not drained by then; zero for no
  // limit. Measured in real time, not by Options::clock. Must not be
  // negative. Default: no limit.
  Duration timeout = Duration(0);
};

// Why a task went back to the queue without its attempt counting
// (TaskEvent::kDeferred). Values may be compared and named
// (DeferReasonName); they are not stored.
//
// A per-type rate limit never defers a task: spool does not claim a task
// whose type's limit holds it back, so it stays pending, keeps its place
// and emits no event until it starts. A named one does (kRateLimited; see
// spool/rate_limit.h).
enum class DeferReason : uint8_t {
  // The event is not a deferral.
  kNone = 0,
  // A gate is closed (TaskEvent::gate names it): the handler called
  // TaskContext::DeferUntilOpen, or the task was claimed ahead and a gate its
  // type requires (HandlerOptions::requires_gates) closed before it started.
  kGateClosed = 1,
  // The handler snoozed it (TaskContext::Snooze); next_attempt_at is when
  // it is due again.
  kSnoozed = 2,
  // It was claimed ahead and Pause or PauseType came before it started.
  kPaused = 3,
  // The runtime is stopping (Runtime::Stop or Close): it was claimed ahead
  // and had not started, or its handler returned an error after
  // TaskContext::stopping() turned true. It runs at the next Start.
  kStopping = 4,
  // It was claimed ahead and a Cancel, CancelGroup or Hold of it came
  // before it started; that command then applies to it.
  kRecalled = 5,
  // It was claimed ahead for a remote worker (see spool/remote_worker.h),
  // and every connected worker that serves its type left before it started.
  // It runs when a worker for its type connects, or a local worker is free.
  kNoWorker = 6,
  // A named rate limit (Runtime::AddRateLimit) did not allow the attempt
  // yet: its slot is reserved, and next_attempt_at is when it runs.
  kRateLimited = 7,
};

// "none", "gate_closed", "snoozed", "paused", "stopping", "recalled",
// "no_worker", "rate_limited".
const char* DeferReasonName(DeferReason reason);

// Something that happened to a task, delivered to subscribers (see
// Runtime::Subscribe) after the write that recorded it is durable.
struct TaskEvent {
  enum class Kind : uint8_t {
    kEnqueued,        // stored (or retried by hand): it may run
    kStarted,         // an attempt was claimed and starts
    kRetryScheduled,  // an attempt failed; another is scheduled
    kSucceeded,
    kFailed,
    kCancelled,
    kTimedOut,  // an attempt ran past its timeout (a retry or a
                // failure follows as its own event)
    kDeferred,  // its handler deferred it until a gate opens, or
                // snoozed it (next_attempt_at: when it is due again)
  };
  Kind kind = Kind::kEnqueued;
  TaskId id = 0;
  std::string type;
  // The attempt the event is about; 0 before the first.
  uint32_t attempt = 0;
  uint32_t max_attempts = 0;
  // The time the write happened, on the runtime's clock.
  Timestamp at;
  // For failures, retries, timeouts and cancellations of running tasks.
  std::string error;
  // For kRetryScheduled, and kEnqueued with a later start.
  std::optional<Timestamp> next_attempt_at;
  // For kCancelled: the task was running when it was cancelled.
  bool was_running = false;

  // For kEnqueued: the task's EnqueueOptions::dedup_key and
  // idempotency_key, empty when it has none. A task retried by hand
  // (Runtime::Retry) carries its stored keys too.
  std::string dedup_key;
  std::string idempotency_key;
  // For kEnqueued: the earliest start the enqueue asked for
  // (EnqueueOptions::run_at, or now + delay), also when it is already past
  // or the task waits for dependencies first; empty when it asked for none,
  // and for a task retried by hand.
  std::optional<Timestamp> run_at;

  // For kDeferred: why (kNone for every other kind), and for kGateClosed
  // the gate's name.
  DeferReason defer_reason = DeferReason::kNone;
  std::string gate;
};

// The progress a running task reported, as Runtime::SubscribeProgress
// delivers it.
struct ProgressUpdate {
  TaskId id = 0;
  // What was reported: by its handler (TaskContext::ReportProgress, any
  // value) or, for a handed-off task, through Runtime::ReportProgress (a
  // fraction in [0, 1]).
  double progress = 0;
};

// "enqueued", "started", ...
const char* TaskEventKindName(TaskEvent::Kind kind);

// A task enqueued on a schedule (see Runtime::AddPeriodic).
struct PeriodicTask {
  // Unique among the runtime's periodic tasks; part of the slot's identity,
  // so renaming it starts a new series.
  std::string name;
  // A 5-field cron expression (minute hour day-of-month month day-of-week,
  // UTC) or a macro (@hourly, @daily, ...), or a fixed interval
  // ("every 30s", "every 5m", "every 2h", "every 1d"; aligned to the Unix
  // epoch).
  std::string schedule;
  // The task enqueued for each slot; its options apply (run_at and delay
  // are ignored: a slot task may run at its slot time).
  TaskSpec task;
  // After downtime: enqueue only the latest missed slot (true), or none and
  // wait for the next one (false). Default: true.
  bool catch_up = true;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_TASK_H_
