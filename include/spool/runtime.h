// Runtime: a durable task queue embedded in the application.
//
// An application opens a runtime on a storage directory, registers one
// handler per task type, starts it, and enqueues tasks. Each enqueued task is
// on disk before its ticket says it is stored; a handler runs it with bounded
// concurrency; a failed attempt is retried with backoff; a crash interrupts
// nothing for good: at the next open the interrupted attempts are counted and
// the tasks rescheduled.
//
//   std::unique_ptr<spool::Runtime> runtime;
//   spool::Status s = spool::Runtime::Open(options, &runtime);
//   s = runtime->RegisterHandler("email", [](spool::TaskContext& task) {
//     return Send(task.payload());
//   });
//   s = runtime->Start();
//   spool::Ticket ticket = runtime->Enqueue("email", "to=...");
//   ticket.stored.Then([](const spool::Result<spool::TaskId>& stored) { ... });
//
// Thread safety: every method may be called from any thread, concurrently.
// No method blocks the caller except Open and OpenReadOnly (which do the
// start-up disk work), the destructor (which closes), and Unsubscribe while
// a call of that listener runs on another thread (see Unsubscribe).
// Everything else returns at once: a Status for what is decided on the spot,
// a Future for what needs storage or another thread.

#ifndef SPOOL_INCLUDE_RUNTIME_H_
#define SPOOL_INCLUDE_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/app_batch.h>
#include <spool/backup.h>
#include <spool/encryption.h>
#include <spool/future.h>
#include <spool/gate.h>
#include <spool/handler.h>
#include <spool/options.h>
#include <spool/query.h>
#include <spool/rate_limit.h>
#include <spool/replication.h>
#include <spool/statistics.h>
#include <spool/status.h>
#include <spool/storage_health.h>
#include <spool/task.h>

namespace spool {

// Whether a runtime dispatches tasks now (Runtime::RunState).
enum class RunState : uint8_t {
  // Not started yet, or stopped (Runtime::Stop finished): tasks wait, and
  // enqueues, queries and live queries work.
  kIdle = 0,
  // Started: tasks are claimed and run.
  kRunning = 1,
  // Started, with Pause in effect (stored: a pause restored at open shows
  // here once started). Running handlers finish; nothing new starts.
  kPaused = 2,
  // Stop or Close was called and handlers still run; nothing new starts.
  kStopping = 3,
};

// "idle", "running", "paused" or "stopping".
const char* RunStateName(RunState state);

class Runtime {
 public:
  // Opens the storage at options.path (creating it when missing), records
  // the attempts that a crash interrupted and reschedules those tasks. On
  // success stores the runtime in *runtime; the caller owns it.
  //
  // Blocks the calling thread for the disk work. Returns InvalidArgument for
  // bad options, Busy when another process holds the directory, NotSupported
  // when a newer spool wrote it, IOError or Corruption when it cannot be
  // read.
  static Status Open(const Options& options, std::unique_ptr<Runtime>* runtime);

  // Open without blocking the caller: opens on a thread of its own and
  // resolves the future with the runtime, or with the error Open returns.
  // How long an open takes grows with what a crash left: the write-ahead
  // log to replay (at most 64 MiB, RocksDB's max_total_wal_size) and the
  // interrupted attempts to record.
  //
  // The future's callbacks (Then) run on that thread, or on the calling
  // thread when Then is called after it resolved, since no callback executor
  // exists before the runtime does; they may keep or destroy the runtime.
  // The thread ends once they have run. Do not let the process exit before
  // the future resolves: exiting cuts the open short like any thread.
  static Future<std::shared_ptr<Runtime>> OpenAsync(Options options);

  // Opens the storage at options.path for queries only: to inspect a queue
  // that another process holds (and runs), or one no process holds. Takes
  // no lock and writes nothing into the directory: it opens RocksDB as a
  // secondary instance, whose own files go to options.secondary_path (or
  // a temporary directory, removed at close). Each query first catches up
  // with what the holder has written (RocksDB's TryCatchUpWithPrimary), so
  // it sees every write the holder had stored when the query was made.
  //
  // No writer, scheduler, workers or recovery run: nothing is written, no
  // crash is recovered. The queries (GetTask, CountByStatus, ListTasks and
  // the other one-shot queries, ListSetAside) work; every call that would
  // change something (RegisterHandler, Start, Enqueue*, Cancel*, Retry,
  // Delete, Purge, Hold, Release, Pause*, Resume*, SetGate,
  // SetGroupConcurrency, hand-offs, AddPeriodic, ReencryptAll, Drain) and
  // the live queries (Watch*, which need the writer's change notices) fail
  // at once with FailedPrecondition saying the runtime is read-only.
  // Subscribe is accepted but has no events to deliver.
  //
  // options.read_only_scope = ReadOnlyScope::kCounts opens the task counts
  // alone: CountByStatus and CountByType work, and every query that reads
  // tasks or indexes fails at once with FailedPrecondition naming the scope.
  // It opens (and catches up) much faster on a live queue, since only the
  // holder's writes of the counts are replayed: what `spool stats` uses.
  //
  // Blocks the calling thread while RocksDB opens. Returns NotFound when
  // the directory does not exist (it is not created), InvalidArgument when
  // it is not a spool store or for bad options (durability kMemory
  // included), NotSupported when another schema version wrote it,
  // InvalidArgument or Corruption for a wrong encryption key, IOError or
  // Corruption when it cannot be read.
  static Status OpenReadOnly(const Options& options,
                             std::unique_ptr<Runtime>* runtime);

  Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Closes the runtime if Close was not called (see Close), and waits for it.
  virtual ~Runtime() = default;

  // Registers the handler for tasks of `type`, with the retry policy used by
  // tasks that set none. The fields of `options` left unset take the
  // config's [types.NAME] values (Options::types), then the defaults (see
  // HandlerOptions).
  //
  // REQUIRES: called before Start. Returns FailedPrecondition after Start or
  // for a type that already has a handler, InvalidArgument for an empty or
  // oversized type, or an invalid retry policy, timeout or rate limit
  // (naming the field).
  virtual Status RegisterHandler(std::string_view type, Handler handler,
                                 HandlerOptions options = {}) = 0;

  // Starts running tasks. Tasks may be enqueued before Start; they wait.
  // Allowed when idle: before the first Start, or once a Stop finished
  // (Start again then takes up the same handlers, periodic tasks and
  // limits; a periodic task's slots missed while stopped are caught up as
  // after a restart). Returns FailedPrecondition when running, paused or
  // stopping, Closed after Close.
  virtual Status Start() = 0;

  // Stops dispatching without closing: nothing new starts, tasks claimed
  // ahead go back to the queue unstarted (their attempts do not count),
  // and running handlers finish, seeing TaskContext::stopping() turn true
  // as at Close (one that returns an error then gives its task back
  // unstarted; one that returns OK succeeds). The queue stays open
  // meanwhile and afterwards: Enqueue, the control calls, queries and live
  // queries keep working; a handed-off task is not affected and may still
  // be completed; retention goes on purging; periodic tasks are not
  // enqueued while stopped (Start catches up their latest missed slot). A
  // Drain waiting then resolves with Aborted.
  //
  // The future resolves with OK once no handler of this runtime runs; the
  // runtime is then idle (RunState) and Start may be called again. There
  // is no time limit: a handler that never returns keeps it stopping (Close
  // still gives up on it after close_timeout). Stop when idle resolves at
  // once; Stop while stopping returns the same future as the first.
  // Closed after Close (a Stop under way when Close is called resolves
  // once Close stopped the handlers, or with Closed if Close gave up on
  // them); FailedPrecondition on a read-only runtime.
  virtual Future<void> Stop() = 0;

  // What the runtime does now: idle, running, paused or stopping. After
  // Close: kIdle once Close has stopped the handlers (kStopping before).
  // Reads an atomic; never blocks.
  virtual spool::RunState RunState() = 0;

  // Whether Close was called (from that moment on every call that changes
  // something fails with Closed).
  virtual bool IsClosed() = 0;

  // Enqueues one task and returns at once. ticket.id is assigned on the spot;
  // ticket.stored resolves once the task is durable, or with the reason it
  // was not stored: InvalidArgument (empty or oversized type or payload,
  // invalid options, or a task larger than Options::writer_max_pending_bytes
  // by itself), NotFound (a type with no registered handler), Closed, Busy,
  // or the storage error.
  //
  // Back-pressure: at most Options::writer_max_pending_tasks tasks and
  // writer_max_pending_bytes bytes (payloads and type names) are accepted
  // and not yet durable at a time, so that a stalled disk cannot grow the
  // process without bound. A call past a bound never blocks: with
  // WriterFull::kFailBusy (the default) its ticket resolves at once with
  // Busy naming the bound and its value (ticket.id is then 0, and nothing of
  // the call is kept); with WriterFull::kWait it waits, in call order, for
  // room, and its ticket resolves once it is stored (see WriterFull for the
  // bound on what waits). Reads and live queries are served meanwhile. The
  // same holds for EnqueueBatch and EnqueueChain, which count all their
  // tasks and are admitted or refused whole.
  virtual Ticket Enqueue(TaskSpec task) = 0;

  Ticket Enqueue(std::string type, std::string payload,
                 EnqueueOptions options = {}) {
    return Enqueue(
        TaskSpec{std::move(type), std::move(payload), std::move(options)});
  }

  // Enqueues several tasks atomically: all are stored, or none. Validation
  // errors name the offending task by index; a batch with more tasks or
  // bytes than a writer_max_pending_* bound by itself is refused with
  // InvalidArgument naming `tasks` and the bound. Busy as for Enqueue.
  virtual BatchTicket EnqueueBatch(std::vector<TaskSpec> tasks) = 0;

  // Enqueues tasks that run one after another: each depends on the one
  // before it (besides its own depends_on), with its on_dependency_failure
  // policy deciding what a failed step does to the rest (by default: cancel
  // them). Stored atomically, like EnqueueBatch.
  virtual BatchTicket EnqueueChain(std::vector<TaskSpec> tasks) = 0;

  // ---- The application key space (spool/app_batch.h) ----

  // Commits the batch's writes of the application key space and its tasks
  // in one write batch: all are durable before ticket.stored resolves with
  // the tasks' ids (in the batch's order, as EnqueueBatch), or none is
  // stored and it resolves with why. The tasks are checked as EnqueueBatch
  // checks them (InvalidArgument naming the task by index, NotFound for a
  // missing dependency, ...); the writes count against
  // writer_max_pending_bytes with the payloads. A batch with writes and no
  // task is fine; an empty one resolves at once. Closed after Close,
  // FailedPrecondition on a read-only runtime.
  virtual BatchTicket CommitAppBatch(AppBatch batch) = 0;

  // The value of `key` in the application key space, as of one snapshot
  // taken on a reader, or nullopt when it has none. InvalidArgument for an
  // empty key or one longer than AppBatch::kMaxKeyBytes; Corruption naming
  // the key for a value no configured key opens.
  virtual Future<std::optional<std::string>> GetAppValue(std::string key) = 0;

  // One page of the application key space in key order, on one snapshot
  // (see AppScan, AppPage). InvalidArgument for a limit outside
  // 1..AppScan::kMaxLimit.
  virtual Future<AppPage> ScanAppValues(AppScan scan) = 0;

  // The task as stored now. NotFound for an unknown id; Corruption naming
  // the id when its record fails verification or cannot be decrypted, or
  // the task is set aside (see ListSetAside).
  virtual Future<TaskInfo> GetTask(TaskId id) = 0;

  // Task counts by status, from one snapshot.
  virtual Future<StatusCounts> CountByStatus() = 0;

  // ---- Queries and live queries ----
  // See spool/query.h for pagination and the guarantees of Watch. Every
  // query runs on a reader, on one snapshot; none waits for the writer.

  // One page of the tasks that match `query`, in ascending id order.
  // InvalidArgument for a limit outside 1..kMaxPageSize, a malformed cursor
  // or one of another query.
  virtual Future<TaskPage> ListTasks(const TaskQuery& query) = 0;

  // ListTasks as one JSON object, built on the reader straight from the
  // stored records, ready to send as an HTTP body:
  //   {"tasks":[<task>,...],"next_cursor":"..."|null,"unreadable":[id,...]}
  // Each <task> is the object described in spool/query.h ("Task JSON").
  virtual Future<std::string> ListTasksJson(const TaskQuery& query) = 0;

  // GetTask as one JSON object, as in ListTasksJson. NotFound for an unknown
  // id; Corruption when its record fails verification.
  virtual Future<std::string> GetTaskJson(TaskId id) = 0;

  // Task counts by type and status, from one snapshot.
  virtual Future<TypeCounts> CountByType() = 0;

  // Reads the whole store on one snapshot: verifies every task's record
  // and compares the index with the entries the records imply. A damaged
  // store is a report that is not ok(), not an error; the error is for a
  // store that cannot be read at all. For tools (spool verify): its cost
  // grows with the store, and it holds a reader meanwhile.
  virtual Future<ConsistencyReport> CheckConsistency() = 0;

  // The failed attempts of task `id`. NotFound for an unknown id.
  virtual Future<FailureHistory> GetFailureHistory(TaskId id) = 0;

  // The task with `status` that was enqueued first (the lowest id), or
  // nullopt when no task has that status.
  virtual Future<std::optional<TaskInfo>> OldestTask(TaskStatus status) = 0;

  // The waiting task that becomes due first (a delayed task or a retry, by
  // next_attempt_at), or nullopt when none waits for a time.
  virtual Future<std::optional<TaskInfo>> NextDueTask() = 0;

  // Declares that payloads of tasks of `type` hold JSON, so that the JSON
  // queries embed them instead of encoding them in base64. A payload that is
  // not valid JSON is still written as base64, so a wrong declaration never
  // breaks the output. Applies to queries made after it returns. May be
  // called at any time, for types with or without a handler.
  // InvalidArgument for an empty or oversized type.
  virtual Status DeclareJsonPayload(std::string_view type) = 0;

  // Live queries: each delivers its query's result now and again whenever
  // it changes, through `callback` on the callback executor, until the
  // returned Watch is unsubscribed or destroyed. InvalidArgument for a null
  // callback or an invalid query (as ListTasks), Closed after Close.
  virtual Result<Watch> WatchTask(TaskId id,
                                  WatchCallback<TaskInfo> callback) = 0;
  virtual Result<Watch> WatchTaskJson(TaskId id,
                                      WatchCallback<std::string> callback) = 0;
  virtual Result<Watch> WatchList(const TaskQuery& query,
                                  WatchCallback<TaskPage> callback) = 0;
  virtual Result<Watch> WatchListJson(const TaskQuery& query,
                                      WatchCallback<std::string> callback) = 0;
  virtual Result<Watch> WatchCountByStatus(
      WatchCallback<StatusCounts> callback) = 0;
  virtual Result<Watch> WatchCountByType(
      WatchCallback<TypeCounts> callback) = 0;

  // Counters of the live queries. Resolves after every change committed
  // before the call has been matched against the subscriptions.
  virtual Future<WatchStats> GetWatchStats() = 0;
  // ---- End of queries ----

  // What the runtime has done since it was opened and what it holds now
  // (spool/statistics.h, which says which figures are exact). Reads
  // counters the actors keep as they work: never waits for an actor or the
  // disk, takes no lock the hot path takes, and costs microseconds. Valid
  // after Close too (the figures as they were left).
  virtual Statistics GetStatistics() = 0;

  // ---- Task control ----
  //
  // Each is one write batch: the task and everything it affects (e.g.
  // dependents cancelled in cascade) change together or not at all.

  // Cancels a task. Pending, waiting, held and retry-scheduled tasks are
  // cancelled at once. A running task is asked to stop: the request is
  // stored (it survives a crash) and its handler's TaskContext::cancelled()
  // turns true; the task ends cancelled if the handler fails, succeeded if
  // it returns OK. Resolves with the status after the call; a finished task
  // is left as it is. NotFound for an unknown id.
  virtual Future<TaskStatus> Cancel(TaskId id) = 0;

  // Cancels every active task of `group`, as Cancel does. Resolves with how
  // many were cancelled or asked to stop.
  virtual Future<uint64_t> CancelGroup(std::string group) = 0;

  // Runs a failed or cancelled task again, with a fresh attempt budget and,
  // if given, a new retry policy. It keeps its id, payload and place in the
  // order. FailedPrecondition when it is not failed or cancelled, when
  // another active task holds its dedup key, or when one of its
  // dependencies failed (unless it runs anyway on failure).
  virtual Future<void> Retry(TaskId id,
                             std::optional<RetryPolicy> policy = {}) = 0;

  // Deletes a finished task. FailedPrecondition for an active task, or one a
  // waiting task depends on.
  virtual Future<void> Delete(TaskId id) = 0;

  // Deletes finished tasks in bounded steps, with other work running in
  // between. Skips tasks a waiting task depends on. Resolves with how many
  // were deleted.
  virtual Future<uint64_t> Purge(PurgeOptions options = {}) = 0;

  // Parks a pending, waiting or retry-scheduled task until Release.
  // FailedPrecondition for a running or finished task.
  virtual Future<void> Hold(TaskId id) = 0;
  // Returns a held task to the queue (or to waiting for its dependencies).
  // For a task set aside because its record could not be read, once it can
  // be (its key is configured again): returns it to where it belongs, a
  // queued task to the queue, a held or waiting one as for a held one, a
  // running one as a crash leaves it (the attempt counts as interrupted),
  // a finished one to plain view. FailedPrecondition while it still cannot
  // be read.
  virtual Future<void> Release(TaskId id) = 0;

  // Stops starting tasks (all, or of one type); running ones finish. Due
  // retries wait too.
  //
  // Pauses, gates and group limits are stored: the runtime writes each
  // change with its next commit, within milliseconds and without blocking
  // the caller, and Open restores them, after a crash too. A change made
  // just before a crash may be lost; a Drain called after the change
  // resolves only after it was handed to the writer, so anything enqueued
  // after that Drain is stored after it.
  virtual Status Pause() = 0;
  virtual Status Resume() = 0;
  virtual Status PauseType(std::string_view type) = 0;
  virtual Status ResumeType(std::string_view type) = 0;

  // Opens or closes a named gate. Tasks whose handler requires a closed gate
  // (HandlerOptions::requires_gates) wait, keeping their attempts; running
  // ones are not stopped. Gates start open; a closed one is stored (see
  // Pause), as is one closed by TaskContext::DeferUntilOpen.
  virtual Status SetGate(std::string_view gate, bool open) = 0;

  // Registers a gate whose state `gate` computes (spool/gate.h): spool asks
  // its IsOpen() every Options::gate_recheck_interval on a thread of its
  // own, and again right after a handler defers on it, and opens or closes
  // the gate named `name` with the answer. SetGate on that name still works,
  // until the next answer. REQUIRES: before Start. InvalidArgument for an
  // empty name or a null gate; FailedPrecondition after Start, for a name
  // already registered, or on a read-only runtime.
  virtual Status RegisterGate(std::string_view name,
                              std::shared_ptr<Gate> gate) = 0;

  // Adds a rate limit named `name` shared by the tasks of `types`: at most
  // `limit.count` attempts per `limit.period` start across all of them,
  // retries included, or, with `key_of`, that many per bucket, the bucket
  // being the key key_of returns for an attempt (e.g. one per API host:
  // spool/rate_limit.h says how it runs). An attempt a limit does not allow
  // yet goes back to the queue due at the slot it reserved, without
  // spending the attempt (TaskEvent::kDeferred, DeferReason::kRateLimited);
  // other buckets and types keep running. A type may be in several named
  // limits, and have its own HandlerOptions::rate_limit too: an attempt
  // starts when all of them allow it. A handler can hold its bucket for a
  // while (TaskContext::HoldRateLimits). The buckets' state is stored, like
  // a per-type limit's, so a restart keeps it; keep the same name for the
  // same limit across restarts. Attempts leased to remote workers are
  // admitted the same way, on this node. The config file's
  // [rate_limits.NAME] tables (Options::rate_limits) add limits without a
  // key function at Start; a name added here is this call's, and its table
  // is not used.
  //
  // REQUIRES: before Start. InvalidArgument naming the field for an empty or
  // oversized name, a count of 0, a period outside [1 ms, 24 h], no types
  // or an empty type; FailedPrecondition after Start, for a name already
  // added, or on a read-only runtime.
  virtual Status AddRateLimit(std::string_view name, RateLimit limit,
                              std::vector<std::string> types,
                              RateKeyOf key_of = nullptr) = 0;

  // At most `max_running` tasks of `group` run at once; 0 removes the limit
  // set here, and the config's limit applies again: the group's
  // [groups.NAME] concurrency (Options::group_limits) if it has one, else
  // Options::group_concurrency. Stored (see Pause): a limit set here wins
  // over the config's, across restarts, until it is set to 0.
  virtual Status SetGroupConcurrency(std::string_view group,
                                     uint32_t max_running) = 0;

  // Reports the outcome of a task its handler handed off
  // (TaskContext::HandOff). `reference` must match the one handed off.
  // FailHandOff follows the task's retry policy.
  virtual Future<void> CompleteHandOff(TaskId id, std::string reference) = 0;
  virtual Future<void> FailHandOff(TaskId id, std::string reference,
                                   std::string error) = 0;

  // The progress the running attempt of task `id` last reported
  // (TaskContext::ReportProgress), or nullopt when it reported none or is
  // not running (an unknown id included). Progress is kept in memory, by
  // the process that runs the task.
  //
  // The future resolves at once, with callbacks on the callback executor
  // like every other query's. Closed after Close; FailedPrecondition on a
  // read-only runtime (Runtime::OpenReadOnly), which runs nothing and so
  // cannot see another process's progress.
  virtual Future<std::optional<double>> GetProgress(TaskId id) = 0;

  // Reports the progress of a task handed off (TaskContext::HandOff), whose
  // work goes on outside its handler: e.g. from the process or callback
  // that does it. `fraction` is in [0, 1]. It is readable through
  // GetProgress and Progress and delivered to SubscribeProgress listeners,
  // until the hand-off ends (CompleteHandOff, FailHandOff, Cancel). Kept in
  // memory only, like a handler's progress: a restart forgets it.
  //
  // Resolves once the writer checked the task, with the batch it was in
  // (the report itself writes nothing): OK; InvalidArgument naming `fraction`
  // for NaN or a value outside [0, 1] (at once); NotFound for an unknown id;
  // FailedPrecondition naming the task's status when it is not a running,
  // handed-off task (a task still in its handler reports through
  // TaskContext::ReportProgress); Closed after Close; FailedPrecondition on
  // a read-only runtime.
  virtual Future<void> ReportProgress(TaskId id, double fraction) = 0;

  // Calls `listener` with each progress report of a running or handed-off
  // task (TaskContext::ReportProgress, Runtime::ReportProgress), on the
  // callback executor, without polling. Reports are coalesced: while a
  // delivery is queued, later reports of the same task replace earlier
  // ones, so a listener sees every task's latest value but may miss
  // intermediate ones, and a handler reporting in a tight loop costs one
  // map update per report. Calls of one listener never overlap. The token
  // ends the subscription through Unsubscribe, with the same guarantees as
  // for Subscribe. A null listener is ignored (the token is 0).
  virtual uint64_t SubscribeProgress(
      std::function<void(const ProgressUpdate&)> listener) = 0;

  // GetProgress's synchronous form, kept for compatibility: returns the
  // value on the caller's thread without a future (it never blocks: it reads
  // an in-memory table). Unlike GetProgress it also answers after Close and
  // on a read-only runtime (where nothing runs: nullopt).
  virtual std::optional<double> Progress(TaskId id) = 0;

  // Registers a task enqueued on a schedule; each slot is enqueued exactly
  // once, even across restarts. REQUIRES: before Start. InvalidArgument for
  // a bad schedule or task, FailedPrecondition for a duplicate name.
  virtual Status AddPeriodic(PeriodicTask periodic) = 0;

  // Calls `listener` for every task event, on the callback executor, after
  // the write that caused it is durable. Calls of one listener never
  // overlap. Returns a token for Unsubscribe.
  virtual uint64_t Subscribe(
      std::function<void(const TaskEvent&)> listener) = 0;
  // Calls `listener` for every storage failure and recovery
  // (spool/storage_health.h), on the callback executor (in the order they
  // happened with the default one-thread executor); calls of one listener
  // never overlap. Returns a token for Unsubscribe, which ends
  // it as it ends an event subscription. A read-only runtime writes
  // nothing, so reports nothing.
  virtual uint64_t SubscribeStorageHealth(
      std::function<void(const StorageHealthEvent&)> listener) = 0;

  // Ends the subscription of `token` (from Subscribe, SubscribeProgress or
  // SubscribeStorageHealth): once Unsubscribe returns, the listener
  // is not running and no call of it starts again, even for events already
  // queued on the executor. So an object whose listener captures it may be
  // destroyed right after Unsubscribe returns.
  //
  // Unlike the other calls, it may block: while a call of the listener runs
  // on another thread, Unsubscribe waits for that call to return (as
  // Watch::Unsubscribe does), and no more: the rest of the events being
  // delivered with it are dropped. Do not call it while holding a lock that the
  // listener takes, or from a thread the listener waits for. Called from
  // inside the listener itself it returns at once, without waiting, and no
  // call starts after the current one. An unknown or already unsubscribed
  // token is ignored.
  virtual void Unsubscribe(uint64_t token) = 0;

  // ---- Encryption at rest (spool/encryption.h) ----

  // Seals every stored record that the current key did not seal (earlier
  // keys, plaintext) again with the current key, set-aside ones included,
  // in bounded steps through the writer while the queue works; then, if
  // asked, compacts the storage. Records no configured key opens are left
  // as they are and reported. FailedPrecondition without a key.
  virtual Future<ReencryptResult> ReencryptAll(
      ReencryptOptions options = {}) = 0;

  // Up to `limit` tasks set aside because their records could not be read
  // (a key that is gone, altered bytes, a damaged record), in id order,
  // each with why it cannot be read now, or OK when it can be again.
  virtual Future<std::vector<SetAsideTask>> ListSetAside(
      size_t limit = 1000) = 0;

  // ---- Backups (spool/backup.h) ----

  // Makes a new backup of the store in Options::backup_dir while the queue
  // works, and resolves with what it made. The backup holds every commit
  // acknowledged before the call, in the state it had then; the writer is
  // held up no longer than a memtable flush. One reader runs it meanwhile
  // (Options::readers says how many serve queries), and the oldest backups
  // beyond Options::backup_keep are deleted after it. FailedPrecondition
  // when no backup_dir is configured, Busy while another backup of this
  // runtime runs, Aborted when the runtime closes first (nothing of the
  // unfinished backup is kept), Closed after Close, NotSupported for an
  // in-memory store or a read-only runtime, IOError naming the directory
  // when the disk fails.
  virtual Future<BackupInfo> Backup() = 0;

  // As Backup, into `backup_dir` (created with mode 0700 when missing)
  // instead of Options::backup_dir. InvalidArgument for an empty path or
  // one inside the store's directory.
  virtual Future<BackupInfo> BackupTo(std::string backup_dir) = 0;

  // ---- Replication (spool/replication.h, docs/replication.md) ----

  // A primary that serves standbys (Options::serve_standbys, or durability
  // kReplicated): records request.standby's acknowledgement of
  // request.applied, then calls `done` on the callback executor with the
  // commits after it, at once or as soon as one is committed within
  // request.wait. InvalidArgument for a bad name, max_bytes or wait;
  // FailedPrecondition on a runtime that serves no standbys; Closed after
  // Close. Returns at once.
  virtual void FollowLog(FollowRequest request,
                         std::function<void(Result<FollowChunk>)> done) = 0;

  // The runtime's role, position, log and standbys. Never blocks.
  virtual ReplicationStatus GetReplicationStatus() = 0;

  // A standby (Options::replication_role kStandby): applies a primary's
  // commits of log `log_id` in order and syncs them; resolves with the
  // store's new position. InvalidArgument when the first commit does not
  // follow the store's position (nothing applied), Corruption when the
  // commits are not its primary's, FailedPrecondition on a primary.
  virtual Future<uint64_t> ApplyReplicated(
      uint64_t log_id, std::vector<ReplicatedCommit> commits) = 0;

  // A standby: replaces its copy with the newest backup in `backup_dir` (a
  // base made by the primary's BackupTo and copied here), verified, and
  // follows `log_id` from its position; resolves with that position.
  // Queries in progress finish first on the old copy; queries meanwhile
  // wait for the new one. Corruption naming the file for a damaged backup
  // (the old copy stays). FailedPrecondition on a primary.
  virtual Future<uint64_t> Rebase(std::string backup_dir, uint64_t log_id) = 0;

  // ---- Failover (docs/replication.md, "Failover") ----

  // A primary elected with `epoch` (its etcd leader key's create revision,
  // or any number that grows with each leader): commits "epoch `epoch`
  // starts here" as the next commit, which standbys apply like any other.
  // From then on the primary's answers to standbys carry the epoch, and a
  // standby that holds commits of an older epoch past that start copies a
  // new base. Resolves after the local sync (it waits for no standby): call
  // it before serving writes. OK at once when the store is of `epoch`
  // already; FailedPrecondition when it is of a later one, or on a
  // standby; InvalidArgument for 0.
  virtual Future<void> BeginEpoch(uint64_t epoch) = 0;

  // A primary just promoted from a standby, before BeginEpoch: the commits
  // of log `log_id` it applied last (StandbyFollower::TakeRecent), so that
  // standbys a few commits behind it follow on instead of copying a base.
  // They must be contiguous and end at the store's position before the
  // log's first commit; the newest that fit replication.log_bytes are kept.
  // InvalidArgument (nothing kept) when `log_id` is not this primary's log
  // or the positions do not fit; FailedPrecondition on a runtime that
  // serves no standbys. No commits: OK, nothing to do.
  virtual Status SeedReplicationLog(uint64_t log_id,
                                    std::vector<ReplicatedCommit> commits) = 0;

  // A clustered primary's leadership deadline: commits are acknowledged to
  // their callers only before `until`, and enqueues after it are refused
  // with Busy, so that a primary whose lease lapsed (paused, or cut off
  // from etcd) says "stored" to no one while another may be elected. Call
  // it again after each renewal; until the first call nothing is fenced.
  // Never blocks.
  virtual void FenceAcknowledgements(
      std::chrono::steady_clock::time_point until) = 0;

  // Resolves once every task enqueued before the call is stored and nothing
  // can run: no task is ready, being claimed or running. Tasks waiting for a
  // later time, paused (Pause, PauseType) or behind a closed gate do not
  // count; tasks held back by a rate limit do. With
  // options.wait_for_scheduled, tasks due later count too (see
  // DrainOptions): "wait until every task is final" without polling.
  // FailedPrecondition before Start, InvalidArgument for a negative
  // timeout, TimedOut past options.timeout, Closed if the runtime closes
  // first, Aborted if Stop is called first. Called while the runtime is
  // stopped (idle after Stop), it resolves at once when nothing is ready,
  // else once the queue drained after the next Start.
  virtual Future<void> Drain(DrainOptions options) = 0;

  // Drain with the default options: tasks due later do not count, no time
  // limit.
  Future<void> Drain() { return Drain(DrainOptions{}); }

  // Stops taking calls (later calls fail with Closed), lets running handlers
  // finish for up to Options::close_timeout, records their outcomes, flushes
  // and closes the storage. Resolves with OK, or TimedOut when handlers were
  // still running at the timeout: their tasks stay `running` on disk and are
  // recovered at the next open. Idempotent: later calls return the same
  // future. Must not be waited on from a handler.
  //
  // The close future's callbacks (Then) do not run on the callback
  // executor, which Close shuts down: they run inline, on the thread that
  // sets the result (spool's closing thread, once the storage is closed),
  // or on the calling thread when Then is called after the future resolved.
  // Keep them short. They may call Close again (it returns the same,
  // resolved future) and any other method (which fails with Closed), but
  // must not destroy the runtime: the destructor waits for that thread.
  virtual Future<void> Close() = 0;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_RUNTIME_H_
