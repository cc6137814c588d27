// The Runtime implementation: the public API on top of the actors.

#ifndef SPOOL_RUNTIME_RUNTIME_IMPL_H_
#define SPOOL_RUNTIME_RUNTIME_IMPL_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <spool/runtime.h>

#include "actors/actors.h"
#include "actors/attempt_control.h"
#include "actors/claimed_pool.h"
#include "actors/gateway.h"
#include "actors/handler_registry.h"
#include "actors/lease_fence.h"
#include "actors/replication_log.h"
#include "actors/writer_stats.h"
#include "runtime/admission.h"
#include "runtime/gate_checker.h"
#include "runtime/progress_feed.h"
#include "runtime/remote_tls.h"
#include "runtime/test_hooks.h"
#include "runtime/thread_executor.h"
#include "storage/queries.h"
#include "storage/start_log.h"
#include "storage/task_store.h"
#include "util/metrics.h"

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace spool {

// Loads CAF's middleman into `config` and announces the remote workers'
// message types (runtime/remote_gateway.cc): only with [remote] listen.
void LoadMiddleman(caf::actor_system_config* config);
// Takes CAF's named actors (ConfigServ, SpawnServ) out of the registry, so
// that no network peer reaches them; after the middleman started.
void CloseNamedActors(caf::actor_system& system);

class WatchLink;

// What every call after Close returns or resolves with.
inline Status ClosedError() { return Status::Closed("the runtime is closed"); }

// What every call that would change something returns on a runtime opened
// with Runtime::OpenReadOnly; `call` names it.
inline Status ReadOnlyError(std::string_view call) {
  return Status::FailedPrecondition(
      "the runtime is open read-only (Runtime::OpenReadOnly): " +
      std::string(call) +
      " is refused; it needs the directory opened with Runtime::Open");
}

// What a query needs of the store beyond the counts.
enum class QueryReads : uint8_t {
  kTasks,  // tasks by id, or every task in id order
  kIndex,  // the index too: listings by status, type or group, and the rest
};

// What a query returns on a runtime opened read-only with a scope that
// lacks what it reads (Options::read_only_scope); `call` names it.
Status ScopeError(std::string_view call, ReadOnlyScope scope);

// A future already resolved with `status`, for a call refused before it
// reached an actor.
template <class T>
Future<T> Failed(const Status& status,
                 const std::shared_ptr<Executor>& executor) {
  return MakeReadyFuture<T>(Result<T>(status), executor);
}

// The key ring *options describe (encryption_key and previous keys, or the
// key file), or null without encryption; then erases the raw keys from
// *options, which need them no more. InvalidArgument naming the bad key or
// the key file (storage.encryption_key_file) and its line. Defined in
// runtime/runtime_crypto.cc.
Status KeyRingFromOptions(Options* options,
                          std::shared_ptr<const storage::KeyRing>* keys);

class RuntimeImpl final : public Runtime {
 public:
  static Status Open(const Options& options, TestHooks hooks,
                     std::unique_ptr<Runtime>* runtime, bool read_only = false);
  // See GetWriterStats (runtime/test_hooks.h).
  WriterStatsSnapshot WriterStats() const;
  ~RuntimeImpl() override;

  Status RegisterHandler(std::string_view type, Handler handler,
                         HandlerOptions options) override;
  Status Start() override;
  Future<void> Stop() override;
  spool::RunState RunState() override;
  bool IsClosed() override;
  Ticket Enqueue(TaskSpec task) override;
  BatchTicket EnqueueBatch(std::vector<TaskSpec> tasks) override;
  BatchTicket CommitAppBatch(AppBatch batch) override;
  Future<std::optional<std::string>> GetAppValue(std::string key) override;
  Future<AppPage> ScanAppValues(AppScan scan) override;
  BatchTicket EnqueueChain(std::vector<TaskSpec> tasks) override;
  // EnqueueBatch, or EnqueueChain when `chain`.
  // With `app_writes`, the application writes of CommitAppBatch, stored
  // with the tasks or not at all.
  BatchTicket EnqueueMany(std::vector<TaskSpec> tasks, bool chain,
                          std::vector<AppBatch::Write> app_writes = {});
  Future<TaskStatus> Cancel(TaskId id) override;
  Future<uint64_t> CancelGroup(std::string group) override;
  Future<void> Retry(TaskId id, std::optional<RetryPolicy> policy) override;
  Future<void> Delete(TaskId id) override;
  Future<uint64_t> Purge(PurgeOptions options) override;
  Future<void> Hold(TaskId id) override;
  Future<void> Release(TaskId id) override;
  Status Pause() override;
  Status Resume() override;
  Status PauseType(std::string_view type) override;
  Status ResumeType(std::string_view type) override;
  Status SetGroupConcurrency(std::string_view group,
                             uint32_t max_running) override;
  Status SetGate(std::string_view gate, bool open) override;
  Future<void> CompleteHandOff(TaskId id, std::string reference) override;
  Future<void> FailHandOff(TaskId id, std::string reference,
                           std::string error) override;
  std::optional<double> Progress(TaskId id) override;
  Future<void> ReportProgress(TaskId id, double fraction) override;
  uint64_t SubscribeProgress(
      std::function<void(const ProgressUpdate&)> listener) override;
  Status AddPeriodic(PeriodicTask periodic) override;
  uint64_t Subscribe(std::function<void(const TaskEvent&)> listener) override;
  Status RegisterGate(std::string_view name,
                      std::shared_ptr<Gate> gate) override;
  Status AddRateLimit(std::string_view name, RateLimit limit,
                      std::vector<std::string> types,
                      RateKeyOf key_of) override;
  uint64_t SubscribeStorageHealth(
      std::function<void(const StorageHealthEvent&)> listener) override;
  void Unsubscribe(uint64_t token) override;
  Future<TaskInfo> GetTask(TaskId id) override;
  Future<ReencryptResult> ReencryptAll(ReencryptOptions options) override;
  Future<std::vector<SetAsideTask>> ListSetAside(size_t limit) override;
  Future<BackupInfo> Backup() override;
  Future<BackupInfo> BackupTo(std::string backup_dir) override;
  void FollowLog(FollowRequest request,
                 std::function<void(Result<FollowChunk>)> done) override;
  ReplicationStatus GetReplicationStatus() override;
  Future<uint64_t> ApplyReplicated(
      uint64_t log_id, std::vector<ReplicatedCommit> commits) override;
  Future<uint64_t> Rebase(std::string backup_dir, uint64_t log_id) override;
  Future<void> BeginEpoch(uint64_t epoch) override;
  Status SeedReplicationLog(uint64_t log_id,
                            std::vector<ReplicatedCommit> commits) override;
  void FenceAcknowledgements(
      std::chrono::steady_clock::time_point until) override;
  Future<StatusCounts> CountByStatus() override;
  Statistics GetStatistics() override;
  using Runtime::Drain;
  Future<void> Drain(DrainOptions options) override;
  Future<void> Close() override;

 private:
  // Counts a public call in flight, so that Close waits until every call
  // that passed the closed check has sent its message.
  class CallGuard {
   public:
    explicit CallGuard(RuntimeImpl* runtime);
    // For a query, named by `call`, that reads `reads`: refused() also when
    // the runtime's read-only scope does not load it.
    CallGuard(RuntimeImpl* runtime, std::string_view call, QueryReads reads);
    ~CallGuard();
    bool closed() const { return closed_; }
    // Whether the call must fail at once, and with what (refusal()):
    // ClosedError, or ScopeError.
    bool refused() const { return !refusal_.ok(); }
    const Status& refusal() const { return refusal_; }

   private:
    RuntimeImpl* runtime_;
    bool closed_;
    Status refusal_;
  };

  RuntimeImpl(const Options& options, TestHooks hooks, bool read_only);
  Status OpenInternal();
  // OpenInternal for Runtime::OpenReadOnly: the store as a secondary
  // instance, the readers and the watcher (for its stats), nothing else.
  Status OpenReadOnlyInternal();
  // OpenInternal for a standby: the store, the replica, the readers.
  Status OpenStandbyInternal();
  // A primary that serves standbys: makes the log the writer appends to
  // (runtime/runtime_replication.cc).
  std::shared_ptr<actors::ReplicationLog> MakeReplicationLog();
  // The steps the opens share: the log level, clock and callback executor;
  // the actor system; the reader pool and the watcher.
  void SetUpCallbacks();
  void StartActorSystem();
  void StartReaders();
  // RunClose's steps for a read-only runtime.
  Status CloseReadOnly();
  // OpenInternal's steps, in order: the store, the writer, recovery (which
  // blocks Open until the queue is recovered), then the scheduler with what
  // recovery found.
  Status OpenStore();
  void StartWriter();
  Result<actors::RecoveryResult> Recover();
  void StartScheduler(actors::RecoveryResult recovered);
  // Open, with [remote] listen set: reads the secret, spawns the gateway
  // and publishes it (runtime/remote_gateway.cc). Start lets it hand out
  // leases; Close settles its leases and unpublishes it.
  Status StartGateway();
  // The gateway's TLS files, from options_ (none set: plain BASP).
  RemoteTlsFiles RemoteTls() const {
    return {options_.remote_tls_certificate_file, options_.remote_tls_key_file,
            options_.remote_tls_ca_file};
  }
  void StopGateway();
  // Start: the retention actor, unless every retention age is 0.
  void StartRetention();
  // Close: no retention step after this returns.
  void StopRetention();
  // Opens the start log (storage/start_log.h) for recovery, and after
  // recovery starts this process's records in it. Without one (an
  // in-memory store, or a file that cannot be made), recovery counts every
  // interrupted claim.
  void OpenStartLog();
  void ResetStartLog();
  // `code` (RegisterHandler's HandlerOptions) with every optional field it
  // leaves unset filled: from options_.types[type] when the config gives
  // it, else the default. Code wins over the file, the file over defaults.
  HandlerOptions ResolveHandlerOptions(const std::string& type,
                                       HandlerOptions code) const;
  // Logs a warning for each [types.NAME] of the config that no registered
  // handler takes (at Start): a misspelt type would otherwise go unnoticed.
  void WarnOfTypesWithoutHandlers(
      const actors::HandlerRegistry& registry) const;
  // Start after a Stop: the scheduler dispatches again.
  // REQUIRES: registry_mutex_ held.
  Status Restart();
  // Deletes the stored state of rate limits no longer added. REQUIRES:
  // registry_mutex_ held, the limits fixed (Start).
  void DeleteUnusedRateState();
  // Assigns the task its id, from Options::id_source or the counter, last,
  // once the task is known to be valid, and refuses a task that depends on
  // itself. `what` names the task in errors.
  Status AssignId(actors::NewTask* task, const std::string& what);
  // The next id for a periodic slot (on the scheduler's thread); 0, logged,
  // when the id source's id is refused.
  TaskId PeriodicId();
  // The id source's next id, checked against the last one accepted
  // (Options::id_source's contract). REQUIRES: options_.id_source.
  Result<TaskId> NextSourcedId();
  // Checks a task and turns it into a writer command, without an id yet
  // (AssignId gives it one). `what` names it in errors ("task", "task 3 of
  // the batch" or "periodic task 'name'").
  Result<actors::NewTask> Prepare(TaskSpec& task, const std::string& what,
                                  int64_t now_us);
  // Sends a control command; the future resolves with its result.
  Future<actors::ControlResult> SendControl(actors::ControlCommand command);
  // Runs a control command that works in steps (Purge, ReencryptAll): one
  // writer command per step, the next sent when the last one committed, so
  // that other work commits in between. After each step, `step` folds its
  // result in and returns whether to go on, having made `next` the next
  // step. `done` is called once: with the first error, or with OK after
  // the last step.
  using StepFn = std::function<bool(const actors::ControlResult& result,
                                    actors::ControlCommand* next)>;
  void RunSteps(actors::ControlCommand first, StepFn step,
                std::function<void(const Status&)> done);
  struct StepRun;
  void SendStep(std::shared_ptr<StepRun> run);
  // ReencryptAll's last part: compacts the store on a reader's thread, then
  // resolves `promise` with `result`.
  void CompactAfterReencrypt(Promise<ReencryptResult> promise,
                             ReencryptResult result);
  // Sends a control command to the actor that takes it: the writer, or,
  // for those that name queued tasks, the scheduler first.
  void Deliver(actors::ControlCommand command);
  // A control command whose result is just done or not.
  Future<void> SimpleControl(actors::ControlCommand::Kind kind, TaskId id,
                             std::string text = {}, std::string error = {});
  // Sends a message to the scheduler unless the runtime is closed.
  template <class... Ts>
  Status TellScheduler(Ts&&... xs);
  // Delivers events to the subscribers, on the callback executor.
  void Publish(std::vector<TaskEvent> events);
  template <class T>
  Promise<T> NewPromise() const {
    return Promise<T>(executor_);
  }
  void RunClose(Promise<void> promise);
  Status ShutDownActors();

  Options options_;
  TestHooks hooks_;
  // Opened by Runtime::OpenReadOnly, or a standby: no writer, scheduler or
  // workers exist.
  const bool read_only_;
  // Options::replication_role kStandby: the store is open for writing, by
  // the replica alone (runtime/runtime_replication.cc).
  const bool standby_;
  // What the store opened (Options::read_only_scope; kAll for Open): the
  // queries that read more are refused (ScopeError).
  const ReadOnlyScope scope_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Executor> executor_;
  // Set when the runtime made its own executor; shut down at close.
  std::shared_ptr<ThreadExecutor> own_executor_;
  std::unique_ptr<storage::TaskStore> store_;
  // Null without a start log. Workers write to it and the scheduler clears
  // it; they are gone (or, stuck in a handler at close, never reach it
  // again) before it is destroyed.
  std::unique_ptr<storage::StartLog> start_log_;
  // The live queries the watcher holds; the writer reads it.
  std::shared_ptr<std::atomic<size_t>> live_queries_ =
      std::make_shared<std::atomic<size_t>>(0);
  std::shared_ptr<actors::WriterStats> writer_stats_ =
      std::make_shared<actors::WriterStats>();
  // What GetStatistics reads; the actors update it.
  std::shared_ptr<metrics::Metrics> metrics_ =
      std::make_shared<metrics::Metrics>();
  // metrics_ for the actors to update, or null (TestHooks).
  std::shared_ptr<metrics::Metrics> ActorMetrics() const {
    return hooks_.collect_statistics ? metrics_ : nullptr;
  }
  // Options::log_sink's registration (util/logging.h); 0 without one.
  uint64_t log_sink_token_ = 0;
  // Tasks claimed ahead of the workers (actors/claimed_pool.h).
  std::shared_ptr<actors::ClaimedPool> pool_ =
      std::make_shared<actors::ClaimedPool>();

  std::unique_ptr<caf::actor_system_config> actor_config_;
  std::unique_ptr<caf::actor_system> actor_system_;
  actors::writer_actor writer_;
  // Set once the writer is spawned: what the replication log's
  // acknowledgements go to, without keeping the writer alive.
  caf::weak_actor_ptr weak_writer_;
  // A primary that serves standbys: its log (actors/replication_log.h).
  std::shared_ptr<actors::ReplicationLog> replication_log_;
  // The writer's leadership deadline (FenceAcknowledgements).
  const std::shared_ptr<actors::LeaseFence> fence_ =
      std::make_shared<actors::LeaseFence>();
  // A standby: its only writer.
  actors::replica_actor replica_;
  actors::scheduler_actor scheduler_;
  actors::reader_pool_actor readers_;
  std::vector<actors::worker_actor> workers_;
  // Only with [remote] listen set: the gateway and the port it listens on.
  actors::gateway_actor gateway_;
  // What the gateway's port reaches (actors/gateway_door.h).
  caf::actor gateway_door_;
  uint16_t gateway_port_ = 0;
  uint64_t clock_listener_ = 0;
  // Spawned by Start unless every retention age is 0 (keep forever).
  actors::retention_actor retention_;
  uint64_t retention_listener_ = 0;

  std::atomic<uint64_t> next_id_{1};
  // With Options::id_source: the last id it gave that was accepted (at
  // open, the highest id stored), under id_mutex_, which is held around
  // each call of the source.
  std::mutex id_mutex_;
  TaskId last_sourced_id_ = 0;

  // The bound on enqueues not yet durable (runtime/admission.h). Shared
  // with every enqueue command's `done`, which releases its room. Made at
  // StartWriter, since it sends to the writer.
  std::shared_ptr<Admission> admission_;
  // The named rate limits (AddRateLimit), asked by the workers and the
  // gateway before each attempt of a type they cover. Made at
  // StartScheduler, with the buckets' stored state; null when read-only.
  std::shared_ptr<actors::RateBuckets> rate_buckets_;
  // The application's gates (RegisterGate), asked on a thread of their own.
  std::shared_ptr<GateChecker> gates_ =
      std::make_shared<GateChecker>(options_.gate_recheck_interval);

  std::mutex registry_mutex_;
  // Copy on write before Start, frozen after.
  std::shared_ptr<const actors::HandlerRegistry> registry_;
  std::atomic<bool> started_{false};
  // RunState's answer but for a pause: kIdle, kRunning or kStopping.
  // Changed under registry_mutex_ (and by Close).
  std::atomic<spool::RunState> run_state_{spool::RunState::kIdle};
  // Pause in effect (Pause, Resume, or restored at open).
  std::atomic<bool> paused_{false};
  // The Stop under way, if any (registry_mutex_); Close resolves it with
  // Closed if the scheduler never answers it.
  std::optional<Promise<void>> stop_promise_;
  std::optional<Future<void>> stop_future_;
  std::vector<PeriodicTask> periodic_;
  // The last stored slot of each periodic task, as found at open.
  std::unordered_map<std::string, int64_t> periodic_slots_;

  // Delivers progress to SubscribeProgress listeners; the board, shared
  // with the attempts and the writer, offers it every report.
  std::shared_ptr<ProgressFeed> progress_feed_ =
      std::make_shared<ProgressFeed>();
  std::shared_ptr<ProgressBoard> progress_ = std::make_shared<ProgressBoard>(
      [feed = progress_feed_](TaskId id, double progress) {
        feed->Offer(id, progress);
      });

  // Event subscribers; the count lets the writer skip building events.
  std::mutex subscribers_mutex_;
  struct Subscriber {
    // Held while the listener runs, so that Unsubscribe waits for a call in
    // progress on another thread (its documented blocking) and calls never
    // overlap; recursive, so that a listener may unsubscribe itself without
    // waiting for itself.
    std::recursive_mutex mutex;
    // Cleared by Unsubscribe before it takes the mutex, so that a delivery
    // in progress stops after the current call instead of finishing its
    // events.
    std::atomic<bool> active{true};
    // One of the two is set: task events, or storage health.
    std::function<void(const TaskEvent&)> listener;
    std::function<void(const StorageHealthEvent&)> health_listener;
  };
  // Adds a subscriber; the count of task-event listeners follows.
  uint64_t AddSubscriber(std::shared_ptr<Subscriber> subscriber);
  // Hands a storage health event to its subscribers, on the executor.
  void PublishHealth(StorageHealthEvent event);
  std::map<uint64_t, std::shared_ptr<Subscriber>> subscribers_;
  uint64_t next_subscriber_ = 1;
  std::atomic<size_t> subscriber_count_{0};

  // Set once OpenInternal succeeded; only an opened runtime is closed.
  bool opened_ = false;
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> calls_in_flight_{0};
  std::mutex close_mutex_;
  std::optional<Future<void>> close_future_;
  std::thread closer_;

  // ---- Queries and live queries ----
  // Implemented in runtime/runtime_queries.cc.
 public:
  Future<TaskPage> ListTasks(const TaskQuery& query) override;
  Future<std::string> ListTasksJson(const TaskQuery& query) override;
  Future<std::string> GetTaskJson(TaskId id) override;
  Future<TypeCounts> CountByType() override;
  Future<ConsistencyReport> CheckConsistency() override;
  Future<FailureHistory> GetFailureHistory(TaskId id) override;
  Future<std::optional<TaskInfo>> OldestTask(TaskStatus status) override;
  Future<std::optional<TaskInfo>> NextDueTask() override;
  Future<std::optional<double>> GetProgress(TaskId id) override;
  Status DeclareJsonPayload(std::string_view type) override;
  Result<Watch> WatchTask(TaskId id, WatchCallback<TaskInfo> callback) override;
  Result<Watch> WatchTaskJson(TaskId id,
                              WatchCallback<std::string> callback) override;
  Result<Watch> WatchList(const TaskQuery& query,
                          WatchCallback<TaskPage> callback) override;
  Result<Watch> WatchListJson(const TaskQuery& query,
                              WatchCallback<std::string> callback) override;
  Result<Watch> WatchCountByStatus(
      WatchCallback<StatusCounts> callback) override;
  Result<Watch> WatchCountByType(WatchCallback<TypeCounts> callback) override;
  Future<WatchStats> GetWatchStats() override;

 private:
  // Spawns the watcher and attaches it to the writer (in OpenInternal,
  // after the reader pool).
  void StartQueries();
  // Ends every watch with Closed and stops the watcher (in RunClose, after
  // the last commit, before the reader pool stops).
  void StopQueries();
  // Runs `query` on a reader and resolves the future with what it returns.
  template <class T, class Query>
  Future<T> RunQuery(Query query);
  // Subscribes `callback` to `query`.
  template <class T>
  Result<Watch> SubscribeLive(std::shared_ptr<const actors::LiveQuery> query,
                              WatchCallback<T> callback);
  // The JSON payload types as declared now, and a number that changes with
  // them (live queries of JSON are told apart by it).
  std::shared_ptr<const storage::JsonPayloadTypes> JsonTypes(
      uint64_t* version) const;

  actors::watch_actor watcher_;
  std::shared_ptr<WatchLink> watch_link_;
  std::atomic<uint64_t> next_watch_id_{1};
  mutable std::mutex json_types_mutex_;
  std::shared_ptr<const storage::JsonPayloadTypes> json_types_;
  uint64_t json_types_version_ = 0;
  // ---- End of queries ----
};

}  // namespace spool

#endif  // SPOOL_RUNTIME_RUNTIME_IMPL_H_
