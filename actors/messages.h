// The data carried by messages between spool's actors.
//
// Every message but the remote workers' is local to one process, so those
// types are registered as unsafe (not serializable) message types instead
// of being given inspect() overloads. The remote workers' messages (the
// "Remote" structs below) cross the network through CAF's middleman: each
// has an inspect() overload and a name announced by RegisterRemoteTypes.
// Completions are plain callbacks: the actor that finishes a command calls
// them on its own thread, and they must not block.

#ifndef SPOOL_ACTORS_MESSAGES_H_
#define SPOOL_ACTORS_MESSAGES_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <spool/app_batch.h>
#include <spool/handler.h>
#include <spool/query.h>
#include <spool/replication.h>
#include <spool/status.h>
#include <spool/task.h>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

namespace caf {
class actor_system_config;
}

#include "actors/attempt_control.h"
#include "storage/record.h"
#include "storage/task_store.h"
#include "util/schedule.h"

namespace spool::actors {

// ---- Atoms (at most 10 characters each in CAF 0.17) ----

using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>;
using claim_atom = caf::atom_constant<caf::atom("claim")>;
using settle_atom = caf::atom_constant<caf::atom("settle")>;
using recover_atom = caf::atom_constant<caf::atom("recover")>;
using recovered_atom = caf::atom_constant<caf::atom("recovered")>;
using barrier_atom = caf::atom_constant<caf::atom("barrier")>;
using attach_atom = caf::atom_constant<caf::atom("attach")>;
using commit_atom = caf::atom_constant<caf::atom("commit")>;
using changes_atom = caf::atom_constant<caf::atom("changes")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using outcome_atom = caf::atom_constant<caf::atom("outcome")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using dispatch_atom = caf::atom_constant<caf::atom("dispatch")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using idle_atom = caf::atom_constant<caf::atom("idle")>;
using changed_atom = caf::atom_constant<caf::atom("changed")>;
using control_atom = caf::atom_constant<caf::atom("control")>;
using meta_atom = caf::atom_constant<caf::atom("meta")>;
using pause_atom = caf::atom_constant<caf::atom("pause")>;
using epoch_atom = caf::atom_constant<caf::atom("epoch")>;
using limit_atom = caf::atom_constant<caf::atom("limit")>;
using gate_atom = caf::atom_constant<caf::atom("gate")>;
using watch_atom = caf::atom_constant<caf::atom("watch")>;
using unwatch_atom = caf::atom_constant<caf::atom("unwatch")>;
using watched_atom = caf::atom_constant<caf::atom("watched")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using purged_atom = caf::atom_constant<caf::atom("purged")>;
using hello_atom = caf::atom_constant<caf::atom("hello")>;
using lease_atom = caf::atom_constant<caf::atom("lease")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
using revoke_atom = caf::atom_constant<caf::atom("revoke")>;
using detach_atom = caf::atom_constant<caf::atom("detach")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using challenge_atom = caf::atom_constant<caf::atom("challenge")>;
using replicated_atom = caf::atom_constant<caf::atom("replicated")>;
using ack_check_atom = caf::atom_constant<caf::atom("ackcheck")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using rebase_atom = caf::atom_constant<caf::atom("rebase")>;

// ---- Payloads ----

// A task type's handler and options (defined in handler_registry.h).
struct RegisteredHandler;
// Task type -> handler. Built before start and immutable afterwards, so
// workers share it without locks.
using HandlerRegistry = std::unordered_map<std::string, RegisteredHandler>;

// Called once when a command is finished: OK, or why it failed.
using Completion = std::function<void(const Status&)>;

// A Drain waiting in the scheduler.
struct DrainRequest {
  Completion done;
  // Tasks due later count too.
  bool wait_for_scheduled = false;
  // Zero: no deadline. Real time.
  std::chrono::microseconds timeout{0};
};

// A task validated on the caller's thread, ready to be stored.
struct NewTask {
  TaskId id = 0;
  std::string type;
  std::string payload;
  int32_t priority = 0;
  RetryPolicy retry;
  // 0: may start at once.
  int64_t run_at_us = 0;
  std::string group;
  std::string dedup_key;
  std::string idempotency_key;
  // EnqueueOptions::unique_for, and on_duplicate == kReplacePayload.
  int64_t unique_for_us = 0;
  bool replace_payload = false;
  // Without duplicates or the task itself (checked by the caller).
  std::vector<TaskId> depends_on;
  DependencyFailure on_dependency_failure = DependencyFailure::kCancel;
  int64_t timeout_us = 0;
  uint32_t payload_version = 0;
  // For a periodic slot: stored only if the schedule's last stored slot is
  // earlier, together with the new last slot.
  std::string periodic_name;
  int64_t periodic_slot_us = 0;
};

// Stores tasks (and application writes), all or none, then calls `done` with
// their ids (a deduplicated task's slot holds the id of the task that holds its
// key).
struct EnqueueCommand {
  std::vector<NewTask> tasks;
  // Writes of the application key space (Runtime::CommitAppBatch), staged
  // only if every task is: in the same commit, or not at all.
  std::vector<AppBatch::Write> app_writes;
  std::function<void(const Result<std::vector<TaskId>>&)> done;
};

// What a ControlCommand did.
struct ControlResult {
  // kCancel: the status afterwards.
  TaskStatus status = TaskStatus::kPending;
  // kCancelGroup, kPurge: how many tasks it affected.
  uint64_t count = 0;
  // kPurge: whether another step is needed, and the index key it resumes
  // from. kReencrypt: whether more remain, and the last id examined.
  bool more = false;
  std::string cursor_key;
  TaskId cursor_id = 0;
  // kReencrypt: records sealed again with the current key (count: in
  // `tasks`; this: in `corrupt`), and ids no configured key opens.
  uint64_t resealed_set_aside = 0;
  std::vector<TaskId> unreadable;
};

// A change to existing tasks, decided in the writer against their current
// state.
struct ControlCommand {
  enum class Kind : uint8_t {
    kCancel,
    kCancelGroup,
    kRetry,
    kDelete,
    kHold,
    kRelease,
    kCompleteHandOff,
    kFailHandOff,
    kPurge,
    kReencrypt,
    // Runtime::ReportProgress: checks that the task is running and handed
    // off, then puts `progress` on the board; writes nothing.
    kReportProgress,
    // Records that remote worker `text` leases running attempt
    // `lease_attempt` until `lease_deadline_us`; ignored when the task has
    // moved on to another attempt or state.
    kLease,
  };
  Kind kind = Kind::kCancel;
  TaskId id = 0;
  // The group (kCancelGroup) or hand-off reference.
  std::string text;
  // kCancelGroup: the group in stored form (TaskStore::StoredGroup), as the
  // scheduler knows groups.
  std::string stored_group;
  // The error of kFailHandOff.
  std::string error;
  // kRetry: a new policy, and the registered handlers (a task whose type
  // has none cannot be retried).
  std::optional<RetryPolicy> retry;
  std::shared_ptr<const HandlerRegistry> registry;
  // kPurge: a bit per status to purge, the age cut-off, where to resume, and
  // how many index entries one step examines.
  uint32_t purge_statuses = 0;
  int64_t purge_updated_before_us = 0;
  // The status-index key to resume from; empty: the start.
  std::string purge_cursor_key;
  size_t purge_step = 1000;
  // Empty: every type.
  std::vector<std::string> purge_types;
  // Which failed tasks a purge takes (retention's `failed` and `dead`):
  // all, only those that used every attempt, or only the others.
  enum class FailedTasks : uint8_t { kAll, kOutOfAttempts, kNotOutOfAttempts };
  FailedTasks purge_failed = FailedTasks::kAll;
  // kReencrypt: the family to step through (kTasks, then kCorrupt) and the
  // last id examined; a step examines purge_step records.
  storage::ColumnFamily reencrypt_family = storage::ColumnFamily::kTasks;
  TaskId reencrypt_after = 0;
  // kReportProgress: the fraction, in [0, 1] (checked by the caller).
  double progress = 0;
  // kLease: the attempt leased and its deadline (wall clock, microseconds).
  uint32_t lease_attempt = 0;
  int64_t lease_deadline_us = 0;
  std::function<void(const Result<ControlResult>&)> done;
};

// A task's place in the queue: what the scheduler orders by.
struct QueueEntry {
  TaskId id = 0;
  int32_t priority = 0;
  uint64_t sequence = 0;
  // 0: ready now; else the time it becomes due.
  int64_t due_us = 0;
  // For per-type and per-group limits and fair rotation between groups. The
  // group is in stored form (TaskStore::StoredGroup): an identity only.
  std::string type;
  std::string group;
};

// A claim that committed: the task is `running` on disk and may start.
// Carries what the scheduler needs; the worker reads the task's spec (its
// payload) itself, so the writer never does.
struct ClaimedTask {
  TaskId id = 0;
  // The attempt this claim counted.
  uint32_t attempt = 0;
  uint32_t max_attempts = 1;
  int32_t priority = 0;
  // Per attempt; 0 for none.
  int64_t timeout_us = 0;
  std::string type;
  // The task's group as the scheduler knows groups: in stored form
  // (TaskStore::StoredGroup), like QueueEntry::group.
  std::string group;
  // Set by the scheduler when it dispatches the task: the attempt's
  // control, and its slot in the start log (storage/start_log.h), which the
  // worker fills right before the handler starts.
  std::shared_ptr<internal::AttemptControl> control;
  uint32_t start_slot = UINT32_MAX;
  // The task's last error, as the claim found it, is the one a crash leaves
  // (TaskContext::previous_attempt_interrupted).
  bool previous_attempt_interrupted = false;
  // Snoozes so far (TaskContext::Snooze), for the runtime.max_snoozes bound.
  uint32_t snoozes = 0;
  // The tasks it depends on: the worker reads how they ended
  // (TaskContext::dependencies). Empty for most tasks, which read nothing.
  std::vector<TaskId> depends_on;
};

// The end of one attempt, as a worker reports it.
struct Outcome {
  TaskId id = 0;
  // The attempt this outcome belongs to; a stale outcome is ignored.
  uint32_t attempt = 0;
  // OK: the task succeeded. Otherwise the attempt failed with this error.
  Status status;
  // The failure must not be retried (e.g. no handler for the type).
  bool permanent = false;
  // The handler failed after a cancel, or returned Cancelled.
  bool cancelled = false;
  // The attempt ran past its timeout (the scheduler's verdict).
  bool timed_out = false;
  // The handler handed the task off with this reference.
  std::optional<std::string> handoff_reference;
  // The retry delay the handler asked for, overriding the policy.
  std::optional<int64_t> delay_us;
  // The handler deferred the task until this gate opens: the attempt does
  // not count and the task goes back to the queue.
  std::optional<std::string> deferred_until_gate;
  // The handler snoozed the task for this long (within max_snoozes): the
  // attempt does not count and the task is pending again, due then.
  std::optional<int64_t> snooze_us;
  // The result the handler set (TaskContext::SetResult), kept only if the
  // task succeeds.
  std::optional<std::string> result;
  // False when no handler ran: the claim was given back unstarted (the
  // runtime is closing, or the task was cancelled first). The attempt does
  // not count; a cancelled task ends cancelled, any other goes back to the
  // queue in its place.
  bool started = true;
  // With started == false: why the scheduler gave it back (for the
  // deferred event), and for kGateClosed the gate that closed.
  DeferReason given_back = DeferReason::kNone;
  std::string given_back_gate;
  // With started == false: the task is due again then (task clock, us), not
  // at once (a named rate limit's reserved slot); 0 for at once.
  int64_t given_back_until_us = 0;
  // The handler returned an error after Close asked it to stop
  // (TaskContext::stopping): as with an unstarted claim, the attempt does
  // not count and the task goes back to the queue.
  bool stopped = false;
  // The worker could not read the task's spec (`status` says why): the
  // task is set aside, as a state that fails to read is.
  bool unreadable = false;
  // The attempt's start-log slot, set by the scheduler; it is cleared once
  // this outcome is durable.
  uint32_t start_slot = UINT32_MAX;
  // The attempt ran on a remote worker that was lost (its connection went
  // down or its lease ran out): settled as recovery settles an attempt a
  // crash interrupted (transitions.h, Interrupt), its attempt counted.
  bool interrupted = false;
};

// What RecoverCommand did.
struct Recovered {
  // Attempts counted as interrupted.
  size_t interrupted = 0;
  // Claims that never started, given back without spending an attempt.
  size_t unstarted = 0;
};

// Records the interrupted attempts of tasks a crash left running.
struct RecoverCommand {
  std::vector<TaskId> running;
  // Whether an attempt had started when the process stopped, as the start
  // log recorded it; empty when the log cannot tell (then every attempt
  // counts as started). An attempt that never started is given back.
  std::function<bool(TaskId, uint32_t attempt)> started;
  // Called with what recovery did, or the error.
  std::function<void(const Result<Recovered>&)> done;
};

// What the scheduler enforces for one task type.
struct TypePolicy {
  // 0: no limit beyond the number of workers.
  uint32_t max_concurrent = 0;
  RateLimit rate_limit;
  // Gates that must be open for its tasks to start.
  std::vector<std::string> requires_gates;
};

// One periodic task: its schedule and the task each slot enqueues.
struct PeriodicPlan {
  std::string name;
  Schedule schedule;
  // The id is assigned per slot.
  NewTask task;
  // The first slot to enqueue (computed at Start from the stored last slot
  // and the catch-up rule); later ones follow the schedule.
  int64_t first_slot_us = 0;
};

// The first slot a periodic task enqueues at start: the latest slot missed
// since `last_stored_slot_us` (when catching up), else the next after `now`.
// INT64_MAX when it never fires again.
int64_t FirstPeriodicSlot(const Schedule& schedule, bool catch_up,
                          std::optional<int64_t> last_stored_slot_us,
                          int64_t now_us);

// Meta values to store with the next commit (e.g. rate-limit state); an
// empty value deletes its key.
struct MetaUpdate {
  std::vector<std::pair<std::string, std::string>> values;
};

// The controls a previous run stored (scheduler.h, ControlKey).
struct StoredControls {
  bool paused = false;
  std::unordered_set<std::string> paused_types;
  std::unordered_set<std::string> closed_gates;
  // By stored group (a tag when encrypted); only limits other than 0.
  std::unordered_map<std::string, uint32_t> group_limits;
};

// What recovery found: the interrupted attempts it recorded, the queue as
// storage holds it afterwards, and the scheduler's stored state.
struct RecoveryResult {
  size_t interrupted = 0;
  size_t unstarted = 0;
  std::vector<QueueEntry> queue;
  // Rate-limit state by task type (see scheduler.cc), and the last stored
  // slot of each periodic task, by name.
  std::unordered_map<std::string, int64_t> rate_state;
  std::unordered_map<std::string, int64_t> periodic_slots;
  // Named rate limits' buckets (actors/rate_buckets.h): (name, key, time).
  std::vector<std::tuple<std::string, std::string, int64_t>> rate_buckets;
  StoredControls controls;
};

// Runs recovery once and calls `done` with its result.
struct RecoveryJob {
  std::function<void(const Result<RecoveryResult>&)> done;
};

// What one group commit changed in the queue, sent to the scheduler.
struct QueueChanges {
  // Tasks that may now be claimed, at once or at their due time.
  std::vector<QueueEntry> queued;
  // Tasks that left the queue without being claimed here.
  std::vector<TaskId> dequeued;
  // Claims that committed; their tasks may start.
  std::vector<ClaimedTask> claimed;
  // Claims that were refused: the task was gone, not claimable, or corrupt.
  std::vector<QueueEntry> refused;
  // Claims whose write failed; the tasks go back to the queue.
  std::vector<QueueEntry> claim_failed;
  // Outcomes that committed, and the start-log slots they release.
  size_t settled = 0;
  std::vector<uint32_t> released_slots;
  // Running tasks asked to stop (Cancel): their tokens must be cancelled.
  std::vector<TaskId> cancel_requested;
  // Outcomes whose write failed; the scheduler sends them again later,
  // without running the handler again.
  std::vector<Outcome> unsettled;
  // The error of a failed commit, OK otherwise.
  Status write_status;
};

// What one committed batch changed, for live queries: every task whose
// state changed, and the types, groups (in stored form) and statuses
// (before and after) involved. A query whose filters miss all of them
// cannot have changed.
struct ChangeSet {
  std::vector<TaskId> ids;
  std::vector<std::string> types;
  std::vector<std::string> groups;
  // Bit i set: some task entered or left TaskStatus i.
  uint32_t statuses = 0;
};

// A standby's batch of a primary's commits to apply (spool/replication.h);
// `done` gets the store's position afterwards.
struct ApplyJob {
  uint64_t log_id = 0;
  std::vector<ReplicatedCommit> commits;
  std::function<void(const Result<uint64_t>&)> done;
};

// A standby's new base: the newest backup in `backup_dir` (a base copied
// from the primary) replaces the store, which then follows `log_id`;
// `done` gets the new position.
struct RebaseJob {
  std::string backup_dir;
  uint64_t log_id = 0;
  std::function<void(const Result<uint64_t>&)> done;
};

// A query to run on a consistent snapshot. `run` answers the caller itself;
// `fail` is called instead when the query cannot run (the runtime is closing
// or the reader died).
struct ReadJob {
  std::function<void(const storage::TaskStore::ReadView&)> run;
  std::function<void(const Status&)> fail;
  // Times the pool handed this job to a reader. A job whose reader died
  // before reporting back is queued again, a bounded number of times:
  // queries only read, so running one twice is harmless.
  uint32_t dispatches = 0;
};

// Queries handed to one reader at once, when several wait: it runs them one
// after another, each on its own snapshot, then reports idle once. The pool
// keeps a reference so that it can queue them again if the reader dies
// before reporting back.
using ReadBatch = std::shared_ptr<std::vector<ReadJob>>;

// The end of an attempt run by worker slot `worker`; `idle`: the slot
// takes a new task now. Sent in batches by the gateway.
struct WorkerOutcome {
  uint32_t worker = 0;
  Outcome outcome;
  bool idle = false;
};

// ---- Remote workers (actors/gateway.h, docs/scale-out.md) ----

// The remote workers' handshake (actors/remote_protocol.h): the worker
// sends (challenge_atom, its nonce) and the gateway's door answers with its
// own nonce and a proof that it holds the shared secret; then the worker
// sends this hello, with its proof. The secret itself never travels.

// The worker's hello: who it is, what it serves, and its proof.
struct RemoteHello {
  // The door's nonce this hello answers (single use) and the worker's own.
  std::string door_nonce;
  std::string worker_nonce;
  // HMAC-SHA256 of the nonces and every field below, keyed by the secret
  // (WorkerProof), hex.
  std::string proof;
  // The worker's own name for itself (host and process), for logs and for
  // the lease it holds.
  std::string node;
  std::vector<std::string> types;
  uint32_t concurrency = 1;
};

// The gateway's answer to an accepted hello.
struct RemoteWelcome {
  // Names the connection in every later message.
  uint64_t session = 0;
  // Random, per session: every later message of the session, both ways,
  // carries it; one without it is dropped.
  std::string key;
  int64_t heartbeat_ms = 1000;
  int64_t lease_ms = 10000;
};

// One leased attempt, sent to a remote worker: what its handler's
// TaskContext needs.
struct RemoteLease {
  // Unique per attempt handed out; an outcome names it back.
  uint64_t lease = 0;
  uint64_t task = 0;
  uint32_t attempt = 0;
  uint32_t max_attempts = 1;
  int32_t priority = 0;
  bool previous_attempt_interrupted = false;
  std::string type;
  std::string payload;
  std::string group;
  std::string idempotency_key;
};

// How a leased attempt ended, from the remote worker.
struct RemoteOutcome {
  uint64_t lease = 0;
  uint64_t task = 0;
  uint32_t attempt = 0;
  // spool::StatusCode of the handler's status, and its message.
  uint8_t code = 0;
  std::string message;
  bool permanent = false;
  bool cancelled = false;
  // Close of the worker asked the handler to stop, and it gave up: the task
  // goes back unstarted.
  bool stopped = false;
  // -1: none; else the retry delay the handler asked for.
  int64_t delay_us = -1;
  bool has_result = false;
  std::string result;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RemoteHello& x) {
  return f(caf::meta::type_name("spool.RemoteHello"), x.door_nonce,
           x.worker_nonce, x.proof, x.node, x.types, x.concurrency);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RemoteWelcome& x) {
  return f(caf::meta::type_name("spool.RemoteWelcome"), x.session, x.key,
           x.heartbeat_ms, x.lease_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RemoteLease& x) {
  return f(caf::meta::type_name("spool.RemoteLease"), x.lease, x.task,
           x.attempt, x.max_attempts, x.priority,
           x.previous_attempt_interrupted, x.type, x.payload, x.group,
           x.idempotency_key);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RemoteOutcome& x) {
  return f(caf::meta::type_name("spool.RemoteOutcome"), x.lease, x.task,
           x.attempt, x.code, x.message, x.permanent, x.cancelled, x.stopped,
           x.delay_us, x.has_result, x.result);
}

// Announces the remote messages' types to an actor system's config, on
// both ends of a connection, under the names their inspect() gives.
void RegisterRemoteTypes(caf::actor_system_config* config);

// ---- Live queries ----

// Which changes can affect a live query's result.
struct WatchScope {
  enum class Kind : uint8_t {
    // One task: changes of that id.
    kTask,
    // A listing: changes that touch its status, type and group (each when
    // the listing filters on it).
    kList,
    // Any change (counts).
    kAny,
  };
  Kind kind = Kind::kAny;
  TaskId id = 0;
  std::optional<TaskStatus> status;
  std::string type;
  // In stored form (TaskStore::StoredGroup), as ChangeSet names groups.
  std::string group;
};

// A query the watch actor keeps running. Immutable once made, so that a
// reader may run it while the watch actor holds it. Results travel
// type-erased: each is a Result<T>, T fixed by the query (see key()).
class LiveQuery {
 public:
  virtual ~LiveQuery() = default;

  // The query's identity, including the type of its result: queries with
  // equal keys are equal, and their subscribers share one run.
  virtual const std::string& key() const = 0;

  virtual const WatchScope& scope() const = 0;

  // Runs the query on `view` and returns the hash of its result. Builds the
  // result into *result only when `have_last` is false or the hash differs
  // from `last_hash`, so that an unchanged result costs no copy. The hash
  // and the result come from this one view.
  virtual uint64_t Run(const storage::TaskStore::ReadView& view, bool have_last,
                       uint64_t last_hash,
                       std::shared_ptr<const void>* result) const = 0;

  // A result carrying `error`, for a run that could not happen, and its
  // hash.
  virtual std::shared_ptr<const void> Error(const Status& error,
                                            uint64_t* hash) const = 0;
};

// One subscriber: a latest-value slot that hands results to the
// application's callback through the callback executor. Thread safe.
class WatchSubscriber {
 public:
  virtual ~WatchSubscriber() = default;
  // Offers a result (a Result<T> of the query's type), newer than every one
  // offered before. Replaces one not yet delivered. Never blocks.
  virtual void Offer(const std::shared_ptr<const void>& result) = 0;
  // The runtime closes: delivers Closed, then nothing more.
  virtual void Close() = 0;
};

// Subscribes `subscriber` to `query`.
struct WatchRequest {
  uint64_t id = 0;
  std::shared_ptr<const LiveQuery> query;
  std::shared_ptr<WatchSubscriber> subscriber;
};

// What one run of a live query produced, from the reader.
struct WatchRun {
  // The watched query and which of its runs this is.
  uint64_t query = 0;
  uint64_t run = 0;
  // False when the run could not happen; `error` says why.
  bool ran = false;
  Status error;
  uint64_t hash = 0;
  // Set when the result changed (see LiveQuery::Run).
  std::shared_ptr<const void> result;
};

// Answers a request for the live queries' counters.
using WatchStatsCallback = std::function<void(const WatchStats&)>;

}  // namespace spool::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::Completion)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::DrainRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::EnqueueCommand)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ControlCommand)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::MetaUpdate)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::QueueEntry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<spool::actors::QueueEntry>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ClaimedTask)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::Outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<spool::actors::Outcome>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<spool::actors::WorkerOutcome>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::RecoverCommand)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::QueueChanges)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::RecoveryJob)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::Result<size_t>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::Result<spool::actors::Recovered>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::Result<spool::actors::ControlResult>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ReadJob)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ApplyJob)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::RebaseJob)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ChangeSet)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ReadBatch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::WatchRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::WatchRun)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::WatchStatsCallback)

#endif  // SPOOL_ACTORS_MESSAGES_H_
