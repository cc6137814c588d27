#include "runtime/runtime_impl.h"

#include <chrono>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/reader.h"
#include "actors/recovery.h"
#include "actors/replica.h"
#include "actors/retention.h"
#include "actors/scheduler.h"
#include "actors/worker.h"
#include "actors/writer.h"
#include "runtime/remote_tls.h"
#include "util/logging.h"
#include "util/schedule.h"
#include "util/thread_name.h"

namespace spool {
namespace {

using actors::Completion;

// The longest group, dedup key or idempotency key.
constexpr size_t kMaxKeyBytes = 1024;

// Waits for a command sent to an actor whose completion sets `promise`.
Status Await(const Promise<void>& promise) {
  return promise.GetFuture().Wait().status();
}

// CAF 0.17 keeps a reference to the actor system's logger in a thread-local
// of every thread that spawns an actor, and the system's destructor waits
// for the logger to go. Threads of the application that spawn (Open, Start)
// drop theirs afterwards, or closing would wait for them to exit.
class ForgetActorSystemOnExit {
 public:
  ~ForgetActorSystemOnExit() { caf::logger::set_current_actor_system(nullptr); }
};

// Actor systems whose workers were still running handlers at close. Their
// threads cannot be stopped, and destroying the system would wait for them,
// so they are kept, deliberately, until the process exits.
void Abandon(std::unique_ptr<caf::actor_system> system,
             std::unique_ptr<caf::actor_system_config> config) {
  static std::mutex mutex;
  static auto* abandoned =
      new std::vector<std::pair<caf::actor_system*, caf::actor_system_config*>>;
  std::lock_guard<std::mutex> lock(mutex);
  abandoned->emplace_back(system.release(), config.release());
}

// What RegisterHandler refuses in HandlerOptions, naming the field.
Status ValidateHandlerOptions(const HandlerOptions& options) {
  if (options.retry) {
    Status s = options.retry->Validate();
    if (!s.ok()) return s.WithContext("HandlerOptions::retry");
  }
  if (options.timeout &&
      (*options.timeout < Duration(0) || *options.timeout > kMaxDelay)) {
    return Status::InvalidArgument(
        "HandlerOptions::timeout must be between 0 and 365 days, got " +
        std::to_string(options.timeout->count()) + " us");
  }
  if (options.rate_limit && options.rate_limit->count != 0 &&
      options.rate_limit->period <= Duration(0)) {
    return Status::InvalidArgument(
        "HandlerOptions::rate_limit.period must be > 0, got " +
        std::to_string(options.rate_limit->period.count()) + " us");
  }
  return Status::OK();
}

}  // namespace

Status Runtime::Open(const Options& options,
                     std::unique_ptr<Runtime>* runtime) {
  return RuntimeImpl::Open(options, TestHooks{}, runtime);
}

Future<std::shared_ptr<Runtime>> Runtime::OpenAsync(Options options) {
  // Callbacks inline, on the opening thread: no executor exists yet.
  Promise<std::shared_ptr<Runtime>> promise;
  Future<std::shared_ptr<Runtime>> future = promise.GetFuture();
  std::thread([promise, options = std::move(options)] {
    NameThisThread("spool-open");
    std::unique_ptr<Runtime> runtime;
    Status s = Open(options, &runtime);
    if (s.ok()) {
      promise.Set(std::shared_ptr<Runtime>(std::move(runtime)));
    } else {
      promise.Set(s);
    }
  }).detach();
  return future;
}

Status Runtime::OpenReadOnly(const Options& options,
                             std::unique_ptr<Runtime>* runtime) {
  return RuntimeImpl::Open(options, TestHooks{}, runtime, /*read_only=*/true);
}

Status OpenWithHooks(const Options& options, TestHooks hooks,
                     std::unique_ptr<Runtime>* runtime) {
  return RuntimeImpl::Open(options, std::move(hooks), runtime);
}

WriterStatsSnapshot GetWriterStats(Runtime& runtime) {
  return static_cast<RuntimeImpl&>(runtime).WriterStats();
}

WriterStatsSnapshot RuntimeImpl::WriterStats() const {
  const actors::WriterStats& stats = *writer_stats_;
  auto get = [](const std::atomic<uint64_t>& v) {
    return v.load(std::memory_order_relaxed);
  };
  WriterStatsSnapshot out;
  out.cpu_ns = get(stats.cpu_ns);
  out.commits = get(stats.commits);
  out.tasks_changed = get(stats.tasks_changed);
  out.enqueued = get(stats.enqueued);
  out.claims = get(stats.claims);
  out.outcomes = get(stats.outcomes);
  out.controls = get(stats.controls);
  for (const auto& bucket : stats.commit_sizes) {
    out.commit_sizes.push_back(get(bucket));
  }
  return out;
}

Statistics RuntimeImpl::GetStatistics() {
  Statistics stats = metrics_->Snapshot();
  if (admission_) admission_->Fill(&stats);
  if (rate_buckets_) {
    for (auto& [name, deferred] : rate_buckets_->Deferrals()) {
      stats.rate_limits.push_back(RateLimitStatistics{name, deferred});
    }
  }
  return stats;
}

RuntimeImpl::CallGuard::CallGuard(RuntimeImpl* runtime) : runtime_(runtime) {
  // Sequentially consistent on both sides: either Close sees this call in
  // flight, or this call sees the runtime closed.
  runtime_->calls_in_flight_.fetch_add(1);
  closed_ = runtime_->closed_.load();
  if (closed_) refusal_ = ClosedError();
}

RuntimeImpl::CallGuard::CallGuard(RuntimeImpl* runtime, std::string_view call,
                                  QueryReads reads)
    : CallGuard(runtime) {
  ReadOnlyScope scope = runtime_->scope_;
  bool loaded = scope == ReadOnlyScope::kAll ||
                (scope == ReadOnlyScope::kTasks && reads == QueryReads::kTasks);
  if (!closed_ && !loaded) refusal_ = ScopeError(call, scope);
}

Status ScopeError(std::string_view call, ReadOnlyScope scope) {
  bool counts = scope == ReadOnlyScope::kCounts;
  return Status::FailedPrecondition(
      std::string("the runtime is open read-only with ReadOnlyScope::") +
      (counts ? "kCounts, which loads the task counts alone: "
              : "kTasks, which loads no index: ") +
      std::string(call) + " is refused; it needs Runtime::OpenReadOnly with " +
      (counts ? "ReadOnlyScope::kTasks or kAll" : "ReadOnlyScope::kAll"));
}

RuntimeImpl::CallGuard::~CallGuard() {
  runtime_->calls_in_flight_.fetch_sub(1);
}

RuntimeImpl::RuntimeImpl(const Options& options, TestHooks hooks,
                         bool read_only)
    : options_(options),
      hooks_(std::move(hooks)),
      read_only_(read_only ||
                 options.replication_role == ReplicationRole::kStandby),
      standby_(!read_only &&
               options.replication_role == ReplicationRole::kStandby),
      scope_(read_only ? options.read_only_scope : ReadOnlyScope::kAll),
      registry_(std::make_shared<actors::HandlerRegistry>()) {}

Status RuntimeImpl::Open(const Options& options, TestHooks hooks,
                         std::unique_ptr<Runtime>* runtime, bool read_only) {
  Status s = options.Validate();
  if (!s.ok()) return s;
  if (!read_only && options.read_only_scope != ReadOnlyScope::kAll) {
    return Status::InvalidArgument(
        std::string("Options::read_only_scope is ") +
        ReadOnlyScopeName(options.read_only_scope) +
        ": a scope other than \"all\" is for Runtime::OpenReadOnly only");
  }
  std::unique_ptr<RuntimeImpl> impl(
      new RuntimeImpl(options, std::move(hooks), read_only));
  if (read_only) {
    s = impl->OpenReadOnlyInternal();
  } else if (impl->standby_) {
    s = impl->OpenStandbyInternal();
  } else {
    s = impl->OpenInternal();
  }
  if (!s.ok()) return s;
  *runtime = std::move(impl);
  return Status::OK();
}

void RuntimeImpl::SetUpCallbacks() {
  SetLogLevel(options_.log_level);
  if (options_.log_sink) log_sink_token_ = AddLogSink(options_.log_sink);
  metrics_->watchers = live_queries_;
  clock_ = options_.clock ? options_.clock : SystemClock();
  executor_ = options_.callback_executor;
  if (!executor_) {
    own_executor_ = std::make_shared<ThreadExecutor>();
    executor_ = own_executor_;
  }
  progress_feed_->SetExecutor(executor_);
}

void RuntimeImpl::StartActorSystem() {
  actor_config_ = std::make_unique<caf::actor_system_config>();
  actor_config_->set("scheduler.max-threads",
                     static_cast<size_t>(options_.scheduler_threads));
  // The middleman (its own threads, a socket multiplexer) only when remote
  // workers may connect: without [remote] nothing of it runs.
  if (!options_.remote_listen.empty() && !read_only_) {
    LoadMiddleman(actor_config_.get());
    if (RemoteTls().enabled()) LoadRemoteTls(actor_config_.get(), RemoteTls());
  }
  actor_system_ = std::make_unique<caf::actor_system>(*actor_config_);
}

void RuntimeImpl::StartReaders() {
  actors::ReaderPoolConfig reader_config;
  reader_config.store = store_.get();
  reader_config.readers = static_cast<uint32_t>(options_.readers);
  reader_config.metrics = ActorMetrics();
  readers_ = actors::SpawnReaderPool(*actor_system_, reader_config);
  StartQueries();  // Queries and live queries: the watcher.
}

Status RuntimeImpl::OpenInternal() {
  ForgetActorSystemOnExit forget;
  SetUpCallbacks();
  Status s = OpenStore();
  if (!s.ok()) return s;
  if (!options_.remote_listen.empty()) {
    // Before CAF sees them: it would end the process on a bad file.
    s = CheckRemoteTls("remote.tls_", RemoteTls());
    if (!s.ok()) return s;
  }
  OpenStartLog();

  StartActorSystem();
  StartWriter();
  Result<actors::RecoveryResult> recovered = Recover();
  if (!recovered.ok()) {
    caf::anon_send_exit(writer_, caf::exit_reason::user_shutdown);
    writer_ = nullptr;
    actor_system_.reset();
    store_.reset();
    return recovered.status();
  }
  // What recovery decided from the start log is committed: this process
  // starts its own records.
  ResetStartLog();
  StartScheduler(std::move(recovered).value());
  StartReaders();

  actors::scheduler_actor scheduler = scheduler_;
  clock_listener_ = clock_->AddListener(
      [scheduler] { caf::anon_send(scheduler, actors::tick_atom::value); });
  periodic_ = options_.periodic;
  if (!options_.remote_listen.empty()) {
    Status gateway = StartGateway();
    if (!gateway.ok()) {
      // Open fails; the destructor closes what was opened.
      opened_ = true;
      return gateway;
    }
  }
  opened_ = true;
  return Status::OK();
}

Status RuntimeImpl::OpenReadOnlyInternal() {
  ForgetActorSystemOnExit forget;
  SetUpCallbacks();
  // No start log: it is the holder's, and recovery does not run here.
  Status s = OpenStore();
  if (!s.ok()) return s;
  StartActorSystem();
  StartReaders();  // The watcher has no writer to attach to.
  opened_ = true;
  return Status::OK();
}

Status RuntimeImpl::OpenStandbyInternal() {
  ForgetActorSystemOnExit forget;
  SetUpCallbacks();
  // No start log and no recovery: what runs is the primary's business,
  // and the copy changes only by the primary's commits.
  Status s = OpenStore();
  if (!s.ok()) return s;
  StartActorSystem();
  replica_ = actors::SpawnReplica(*actor_system_, store_.get());
  StartReaders();
  opened_ = true;
  return Status::OK();
}

Status RuntimeImpl::OpenStore() {
  storage::StoreOptions store_options;
  store_options.read_only = read_only_ && !standby_;
  store_options.secondary_path = options_.secondary_path;
  store_options.read_scope = options_.read_only_scope;
  store_options.path = options_.path;
  // A replicated commit is first a synced one.
  store_options.durability = options_.durability == Durability::kReplicated
                                 ? Durability::kSync
                                 : options_.durability;
  store_options.env = hooks_.env;
  store_options.state_cache_entries = options_.writer_state_cache;
  store_options.memtable_bytes = options_.memtable_bytes;
  store_options.time_wal =
      options_.measure_sync_time && hooks_.collect_statistics;
  Status s = KeyRingFromOptions(&options_, &store_options.keys);
  if (!s.ok()) return s;
  store_options.accept_plaintext =
      options_.plaintext_records == PlaintextRecords::kAccept;
  s = storage::TaskStore::Open(store_options, &store_);
  if (!s.ok()) return s;
  next_id_ = store_->reserved_ids();
  if (options_.id_source && !read_only_) {
    // What the source's ids must stay above (Options::id_source).
    s = store_->HighestTaskId(&last_sourced_id_);
    if (!s.ok()) return s.WithContext("reading the highest task id");
  }
  return Status::OK();
}

void RuntimeImpl::StartWriter() {
  actors::WriterConfig writer_config;
  writer_config.store = store_.get();
  writer_config.clock = clock_;
  writer_config.max_batch = options_.writer_max_batch;
  writer_config.before_commit = hooks_.before_commit;
  writer_config.stats = writer_stats_;
  writer_config.metrics = ActorMetrics();
  writer_config.live_queries = live_queries_;
  writer_config.on_events = [this](std::vector<TaskEvent> events) {
    Publish(std::move(events));
  };
  writer_config.events_wanted = [this] { return subscriber_count_.load() > 0; };
  writer_config.progress = progress_;
  writer_config.random_fraction = options_.random_fraction;
  writer_config.on_storage_health = [this](StorageHealthEvent event) {
    PublishHealth(std::move(event));
  };
  if (options_.serve_standbys ||
      options_.durability == Durability::kReplicated) {
    replication_log_ = MakeReplicationLog();
    writer_config.replication = replication_log_;
    if (options_.durability == Durability::kReplicated) {
      writer_config.min_acks = options_.replication_min_acks;
      writer_config.ack_timeout = options_.replication_ack_timeout;
    }
  }
  writer_config.fence = fence_;
  writer_ = actors::SpawnWriter(*actor_system_, std::move(writer_config));
  weak_writer_ = caf::actor_cast<caf::weak_actor_ptr>(writer_);
  // `this` outlives every send: Close ends the admission before the writer.
  admission_ = std::make_shared<Admission>(
      options_, [this](actors::EnqueueCommand command) {
        caf::anon_send(writer_, actors::enqueue_atom::value,
                       std::move(command));
      });
}

Result<actors::RecoveryResult> RuntimeImpl::Recover() {
  Promise<actors::RecoveryResult> recovered;
  auto recovery = actors::SpawnRecovery(*actor_system_, store_.get(),
                                        start_log_.get(), writer_);
  caf::anon_send(recovery, actors::recover_atom::value,
                 actors::RecoveryJob{
                     [recovered](const Result<actors::RecoveryResult>& result) {
                       recovered.Set(result);
                     }});
  // Open blocks the caller's thread by contract, until the queue is
  // recovered; no CAF thread waits here.
  Result<actors::RecoveryResult> result = recovered.GetFuture().Wait();
  if (!result.ok()) return result;
  metrics_->recovered.fetch_add(result->interrupted + result->unstarted,
                                std::memory_order_relaxed);
  if (result->interrupted > 0) {
    Logger()->warn("recovered {} task(s) interrupted by a crash in {}",
                   result->interrupted, options_.path);
  }
  if (result->unstarted > 0) {
    Logger()->warn(
        "{} task(s) were claimed but had not started when the last process "
        "stopped; they are back in the queue of {} with no attempt spent",
        result->unstarted, options_.path);
  }
  return result;
}

void RuntimeImpl::StartScheduler(actors::RecoveryResult recovered) {
  std::function<std::string(std::string_view)> stored_key;
  if (store_->encrypted()) {
    // Bucket keys come from payloads: stored as tags, like groups.
    stored_key = [store = store_.get()](std::string_view key) {
      return store->StoredGroup(key);
    };
  }
  rate_buckets_ = std::make_shared<actors::RateBuckets>(clock_, stored_key);
  for (const auto& [name, key, tat] : recovered.rate_buckets) {
    rate_buckets_->Restore(name, key, tat);
  }
  periodic_slots_ = recovered.periodic_slots;
  paused_ = recovered.controls.paused;
  actors::SchedulerConfig scheduler_config;
  scheduler_config.writer = writer_;
  scheduler_config.clock = clock_;
  scheduler_config.recovered = std::move(recovered);
  scheduler_config.group_concurrency = options_.group_concurrency;
  scheduler_config.on_deferred_gate = [gates = gates_](const std::string& g) {
    gates->Deferred(g);
  };
  for (const auto& [group, limit] : options_.group_limits) {
    // The scheduler knows groups in their stored form (a tag when
    // encrypted), as SetGroupConcurrency tells it.
    scheduler_config.group_limits[store_->StoredGroup(group)] = limit;
  }
  scheduler_config.progress = progress_;
  scheduler_config.allocate_id = [this] { return PeriodicId(); };
  scheduler_config.pool = pool_;
  scheduler_config.rate_buckets = rate_buckets_;
  scheduler_config.claim_ahead = static_cast<size_t>(options_.claim_ahead);
  scheduler_config.start_log = start_log_.get();
  scheduler_config.metrics = ActorMetrics();
  scheduler_ =
      actors::SpawnScheduler(*actor_system_, std::move(scheduler_config));
  caf::anon_send(writer_, actors::attach_atom::value, scheduler_);
}

RuntimeImpl::~RuntimeImpl() {
  // A runtime whose open failed has nothing to close: OpenInternal already
  // released what it had made.
  // A destructor cannot report: Close logs what went wrong.
  if (opened_) static_cast<void>(Close().Wait());
  if (closer_.joinable()) closer_.join();
  if (own_executor_) own_executor_->Shutdown();
  RemoveLogSink(log_sink_token_);
}

void RuntimeImpl::OpenStartLog() {
  // Nothing survives a crash of an in-memory store, so there is nothing to
  // tell apart.
  if (options_.durability == Durability::kMemory) return;
  Status s = storage::StartLog::Open(options_.path, &start_log_);
  if (!s.ok()) {
    Logger()->warn(
        "{}; without a start log, every claim a crash interrupts counts its "
        "attempt, started or not",
        s.ToString());
    start_log_.reset();
    return;
  }
  if (!start_log_->previous_trusted()) {
    Logger()->debug("start log of {} not used for recovery: {}", options_.path,
                    start_log_->why_untrusted());
  }
}

void RuntimeImpl::ResetStartLog() {
  if (!start_log_) return;
  // Every attempt in flight holds a slot until its outcome is durable: the
  // running ones, those claimed ahead or being claimed, and outcomes on
  // their way, with room to spare.
  // Remote workers' slots take start-log slots too: room for a few
  // thousand when the gateway is on.
  const int remote = options_.remote_listen.empty() ? 0 : 4096;
  auto slots = static_cast<uint32_t>(
      2 * (options_.workers + options_.claim_ahead + remote) + 64);
  Status s = start_log_->Reset(slots);
  if (!s.ok()) {
    Logger()->warn(
        "{}; running without a start log: every claim a crash interrupts "
        "counts its attempt",
        s.ToString());
    start_log_.reset();
  }
}

HandlerOptions RuntimeImpl::ResolveHandlerOptions(const std::string& type,
                                                  HandlerOptions code) const {
  static const TypeSettings kNone;
  auto it = options_.types.find(type);
  const TypeSettings& file = it != options_.types.end() ? it->second : kNone;
  if (!code.retry) code.retry = options_.RetryPolicyFor(type);
  if (!code.timeout) code.timeout = file.timeout.value_or(Duration(0));
  if (!code.max_concurrent)
    code.max_concurrent = file.max_concurrent.value_or(0);
  if (!code.rate_limit) {
    code.rate_limit = file.rate_limit_count ? RateLimit{*file.rate_limit_count,
                                                        file.rate_limit_period}
                                            : RateLimit{};
  }
  if (!code.requires_gates) {
    code.requires_gates =
        file.requires_gates.value_or(std::vector<std::string>{});
  }
  return code;
}

void RuntimeImpl::WarnOfTypesWithoutHandlers(
    const actors::HandlerRegistry& registry) const {
  for (const auto& [type, settings] : options_.types) {
    if (registry.count(type) != 0) continue;
    Logger()->warn(
        "the config's [types.{}] names a task type with no handler: its "
        "settings apply to nothing (a misspelt type?)",
        type);
  }
}

Status RuntimeImpl::RegisterHandler(std::string_view type, Handler handler,
                                    HandlerOptions options) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("RegisterHandler");
  if (type.empty())
    return Status::InvalidArgument("task type must not be empty");
  if (type.size() > options_.max_type_bytes) {
    return Status::InvalidArgument(
        "task type is " + std::to_string(type.size()) +
        " bytes; the limit is " + std::to_string(options_.max_type_bytes));
  }
  if (!handler) {
    return Status::InvalidArgument("the handler for task type '" +
                                   std::string(type) + "' is empty");
  }
  Status s = ValidateHandlerOptions(options);
  if (!s.ok()) {
    return s.WithContext("handler for task type '" + std::string(type) + "'");
  }
  options = ResolveHandlerOptions(std::string(type), std::move(options));
  std::lock_guard<std::mutex> lock(registry_mutex_);
  if (started_) {
    return Status::FailedPrecondition(
        "handlers must be registered before Start (task type '" +
        std::string(type) + "')");
  }
  if (registry_->count(std::string(type)) != 0) {
    return Status::FailedPrecondition("task type '" + std::string(type) +
                                      "' already has a handler");
  }
  auto next = std::make_shared<actors::HandlerRegistry>(*registry_);
  next->emplace(std::string(type),
                actors::RegisteredHandler{std::move(handler), options});
  std::atomic_store(&registry_,
                    std::shared_ptr<const actors::HandlerRegistry>(next));
  return Status::OK();
}

Status RuntimeImpl::Start() {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (read_only_) return ReadOnlyError("Start");
  ForgetActorSystemOnExit forget;
  std::lock_guard<std::mutex> lock(registry_mutex_);
  if (started_) return Restart();
  auto registry = std::atomic_load(&registry_);
  actors::DispatchConfig dispatch;
  for (const auto& [type, entry] : *registry) {
    metrics_->Slot(type);  // so that its figures appear from the start
    dispatch.types[type] = actors::TypePolicy{
        entry.options.max_concurrent.value_or(0),
        entry.options.rate_limit.value_or(RateLimit{}),
        entry.options.requires_gates.value_or(std::vector<std::string>{})};
  }
  WarnOfTypesWithoutHandlers(*registry);
  // [rate_limits.NAME] tables; a name the code added is the code's.
  for (const auto& [name, limit] : options_.rate_limits) {
    if (rate_buckets_->Has(name)) continue;
    Status added = rate_buckets_->Add(actors::RateBuckets::Limit{
        name, RateLimit{limit.count, limit.period}, limit.types, nullptr});
    if (!added.ok()) return added.WithContext("rate_limits." + name);
  }
  int64_t now = clock_->Now().time_since_epoch().count();
  for (PeriodicTask& periodic : periodic_) {
    Result<actors::NewTask> task =
        Prepare(periodic.task, "periodic task '" + periodic.name + "'", now);
    if (!task.ok()) return task.status();
    Schedule schedule = *Schedule::Parse(periodic.schedule);
    std::optional<int64_t> last;
    if (auto it = periodic_slots_.find(periodic.name);
        it != periodic_slots_.end()) {
      last = it->second;
    }
    int64_t first =
        actors::FirstPeriodicSlot(schedule, periodic.catch_up, last, now);
    dispatch.periodic.push_back(actors::PeriodicPlan{
        periodic.name, std::move(schedule), std::move(task).value(), first});
  }
  started_ = true;
  DeleteUnusedRateState();
  for (int i = 0; i < options_.workers; ++i) {
    actors::WorkerConfig config;
    config.index = static_cast<uint32_t>(i);
    config.scheduler = scheduler_;
    config.registry = registry;
    config.store = store_.get();
    config.pool = pool_;
    config.start_log = start_log_.get();
    config.clock = clock_;
    config.metrics = ActorMetrics();
    config.max_result_bytes = options_.max_result_bytes;
    config.max_snoozes = options_.max_snoozes;
    config.rate_buckets = rate_buckets_;
    workers_.push_back(actors::SpawnWorker(*actor_system_, std::move(config)));
  }
  dispatch.workers = workers_;
  run_state_ = spool::RunState::kRunning;
  caf::anon_send(scheduler_, actors::start_atom::value, std::move(dispatch));
  // After the scheduler's start: remote slots are numbered after the local
  // workers.
  if (gateway_) caf::anon_send(gateway_, actors::start_atom::value);
  StartRetention();
  gates_->Start([this](const std::string& gate, bool open) {
    // Closed once the runtime closes; nothing to do then.
    static_cast<void>(SetGate(gate, open));
  });
  return Status::OK();
}

// The stored bucket states of rate limits no longer added (by the code or
// the config) would stay in `meta` for good: they go with the next commit.
void RuntimeImpl::DeleteUnusedRateState() {
  std::vector<std::string> keys = rate_buckets_->TakeUnusedRestored();
  if (keys.empty()) return;
  Logger()->info(
      "deleting the stored state of {} rate-limit bucket(s) whose limit is "
      "no longer added",
      keys.size());
  actors::MetaUpdate update;
  for (std::string& key : keys) update.values.emplace_back(std::move(key), "");
  caf::anon_send(writer_, actors::meta_atom::value, std::move(update));
}

Status RuntimeImpl::Restart() {
  switch (run_state_.load()) {
    case spool::RunState::kIdle:
      break;
    case spool::RunState::kStopping:
      return Status::FailedPrecondition(
          "the runtime is stopping: Start it again once Stop's future "
          "resolved");
    default:
      return Status::FailedPrecondition("the runtime is already started");
  }
  run_state_ = spool::RunState::kRunning;
  stop_promise_.reset();
  stop_future_.reset();
  caf::anon_send(scheduler_, actors::start_atom::value);
  return Status::OK();
}

Future<void> RuntimeImpl::Stop() {
  if (read_only_) return Failed<void>(ReadOnlyError("Stop"), executor_);
  CallGuard guard(this);
  if (guard.closed()) return Failed<void>(ClosedError(), executor_);
  std::lock_guard<std::mutex> lock(registry_mutex_);
  spool::RunState state = run_state_.load();
  if (state == spool::RunState::kStopping && stop_future_) return *stop_future_;
  if (state != spool::RunState::kRunning) {
    return MakeReadyFuture<void>(Result<void>(Status::OK()), executor_);
  }
  auto promise = NewPromise<void>();
  stop_promise_ = promise;
  stop_future_ = promise.GetFuture();
  run_state_ = spool::RunState::kStopping;
  // Answered on the scheduler's thread once no handler runs. The runtime
  // outlives the scheduler (Close stops it before anything else goes).
  Completion stopped = [this, promise](const Status& s) {
    {
      std::lock_guard<std::mutex> relock(registry_mutex_);
      // After Close began, RunClose owns the state.
      if (!closed_ && run_state_ == spool::RunState::kStopping) {
        run_state_ = spool::RunState::kIdle;
      }
    }
    promise.Set(Result<void>(s));
  };
  caf::anon_send(scheduler_, actors::stop_atom::value, std::move(stopped),
                 /*closing=*/false);
  return *stop_future_;
}

spool::RunState RuntimeImpl::RunState() {
  spool::RunState state = run_state_.load();
  if (state == spool::RunState::kRunning && paused_) {
    return spool::RunState::kPaused;
  }
  return state;
}

bool RuntimeImpl::IsClosed() { return closed_.load(); }

const char* RunStateName(RunState state) {
  switch (state) {
    case RunState::kIdle:
      return "idle";
    case RunState::kRunning:
      return "running";
    case RunState::kPaused:
      return "paused";
    case RunState::kStopping:
      return "stopping";
  }
  return "invalid";
}

void RuntimeImpl::StartRetention() {
  using FailedTasks = actors::ControlCommand::FailedTasks;
  actors::RetentionConfig config;
  const actors::RetentionRule rules[] = {
      {"succeeded", TaskStatus::kSucceeded, FailedTasks::kAll,
       options_.retention_succeeded.count()},
      {"failed", TaskStatus::kFailed, FailedTasks::kNotOutOfAttempts,
       options_.retention_failed.count()},
      {"dead", TaskStatus::kFailed, FailedTasks::kOutOfAttempts,
       options_.retention_dead.count()},
      {"cancelled", TaskStatus::kCancelled, FailedTasks::kAll,
       options_.retention_cancelled.count()},
  };
  for (const actors::RetentionRule& rule : rules) {
    if (rule.age_us > 0) config.rules.push_back(rule);
  }
  if (config.rules.empty()) return;
  config.writer = writer_;
  config.clock = clock_;
  config.interval_us = options_.retention_interval.count();
  config.batch_size = options_.retention_batch_size;
  config.after_step = hooks_.after_retention_step;
  retention_ = actors::SpawnRetention(*actor_system_, std::move(config));
  actors::retention_actor retention = retention_;
  retention_listener_ = clock_->AddListener(
      [retention] { caf::anon_send(retention, actors::tick_atom::value); });
}

void RuntimeImpl::StopRetention() {
  if (!retention_) return;
  clock_->RemoveListener(retention_listener_);
  Promise<void> stopped;
  caf::anon_send(
      retention_, actors::stop_atom::value,
      Completion([stopped](const Status& s) { stopped.Set(Result<void>(s)); }));
  // A step at the writer answers after its commit.
  Status s = Await(stopped);
  if (!s.ok()) Logger()->warn("close: retention: {}", s.ToString());
  caf::anon_send_exit(retention_, caf::exit_reason::user_shutdown);
  retention_ = nullptr;
}

namespace {

// The longest EnqueueOptions::unique_for.
constexpr Duration kMaxUniqueFor = std::chrono::hours(24 * 3650);

// Why the uniqueness options of a task are refused, naming the argument;
// empty when they are fine.
std::string UniquenessError(const EnqueueOptions& options) {
  using OnDuplicate = EnqueueOptions::OnDuplicate;
  if (options.unique_for < Duration(0) || options.unique_for > kMaxUniqueFor) {
    return "unique_for must be between 0 and 3650 days, got " +
           std::to_string(options.unique_for.count()) + " us";
  }
  if (options.unique_for > Duration(0) && options.dedup_key.empty()) {
    return "unique_for needs a dedup_key: it reserves that key";
  }
  if (static_cast<uint8_t>(options.on_duplicate) >
      static_cast<uint8_t>(OnDuplicate::kReplacePayload)) {
    return "on_duplicate is out of range";
  }
  if (options.on_duplicate != OnDuplicate::kKeepExisting &&
      options.dedup_key.empty()) {
    return "on_duplicate needs a dedup_key: it acts on that key's holder";
  }
  return {};
}

}  // namespace

Result<actors::NewTask> RuntimeImpl::Prepare(TaskSpec& task,
                                             const std::string& what,
                                             int64_t now_us) {
  auto invalid = [&what](const std::string& why) {
    return Status::InvalidArgument(what + ": " + why);
  };
  if (task.type.empty()) return invalid("type must not be empty");
  if (task.type.size() > options_.max_type_bytes) {
    return invalid("type is " + std::to_string(task.type.size()) +
                   " bytes; the limit is " +
                   std::to_string(options_.max_type_bytes));
  }
  if (task.payload.size() > options_.max_payload_bytes) {
    return invalid("payload is " + std::to_string(task.payload.size()) +
                   " bytes; the limit is " +
                   std::to_string(options_.max_payload_bytes) +
                   " (storage.max_payload_bytes)");
  }
  auto registry = std::atomic_load(&registry_);
  auto handler = registry->find(task.type);
  if (handler == registry->end()) {
    std::string known;
    for (const auto& [name, entry] : *registry) {
      known += known.empty() ? "" : ", ";
      known += name;
    }
    return Status::NotFound(
        what + ": no handler is registered for task type '" + task.type +
        "' (registered: " + (known.empty() ? "none" : known) + ")");
  }
  EnqueueOptions& options = task.options;
  const HandlerOptions& defaults = handler->second.options;
  RetryPolicy retry =
      options.retry ? *options.retry : defaults.retry.value_or(RetryPolicy{});
  Status s = retry.Validate();
  if (!s.ok()) return s.WithContext(what);
  if (options.delay < Duration(0) || options.delay > kMaxDelay) {
    return invalid("delay must be between 0 and 365 days, got " +
                   std::to_string(options.delay.count()) + " us");
  }
  Duration timeout = options.timeout ? *options.timeout
                                     : defaults.timeout.value_or(Duration(0));
  if (timeout < Duration(0) || timeout > kMaxDelay) {
    return invalid("timeout must be between 0 and 365 days, got " +
                   std::to_string(timeout.count()) + " us");
  }
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"group", &options.group},
        {"dedup_key", &options.dedup_key},
        {"idempotency_key", &options.idempotency_key}}) {
    if (value->size() > kMaxKeyBytes) {
      return invalid(std::string(name) + " is " +
                     std::to_string(value->size()) + " bytes; the limit is " +
                     std::to_string(kMaxKeyBytes));
    }
  }

  if (std::string why = UniquenessError(options); !why.empty()) {
    return invalid(why);
  }
  if (options.depends_on.size() > kMaxDependencies) {
    return invalid(
        "depends_on has " + std::to_string(options.depends_on.size()) +
        " entries; the limit is " + std::to_string(kMaxDependencies));
  }

  actors::NewTask out;
  out.type = std::move(task.type);
  out.payload = std::move(task.payload);
  out.priority = options.priority;
  out.retry = retry;
  if (options.run_at) {
    out.run_at_us = options.run_at->time_since_epoch().count();
  } else if (options.delay.count() > 0) {
    out.run_at_us = now_us + options.delay.count();
  }
  out.group = std::move(options.group);
  out.dedup_key = std::move(options.dedup_key);
  out.idempotency_key = std::move(options.idempotency_key);
  out.unique_for_us = options.unique_for.count();
  out.replace_payload =
      options.on_duplicate == EnqueueOptions::OnDuplicate::kReplacePayload;
  // Duplicates are dropped, keeping the first occurrence's place.
  for (TaskId dep : options.depends_on) {
    if (std::find(out.depends_on.begin(), out.depends_on.end(), dep) ==
        out.depends_on.end()) {
      out.depends_on.push_back(dep);
    }
  }
  out.on_dependency_failure = options.on_dependency_failure;
  if (static_cast<uint8_t>(out.on_dependency_failure) >
      static_cast<uint8_t>(DependencyFailure::kRun)) {
    return invalid("on_dependency_failure is out of range");
  }
  out.timeout_us = timeout.count();
  out.payload_version = defaults.version;
  return out;
}

namespace {

// The bound on ids from Options::id_source: 2^63, so that the id
// reservation above the highest id (kIdReservationBlock) cannot wrap.
constexpr TaskId kSourcedIdLimit = TaskId{1} << 63;

}  // namespace

Result<TaskId> RuntimeImpl::NextSourcedId() {
  std::lock_guard<std::mutex> lock(id_mutex_);
  TaskId id = options_.id_source();
  if (id == 0 || id >= kSourcedIdLimit) {
    return Status::InvalidArgument("Options::id_source returned " +
                                   std::to_string(id) +
                                   "; ids must be between 1 and 2^63 - 1");
  }
  if (id <= last_sourced_id_) {
    return Status::InvalidArgument(
        "Options::id_source returned " + std::to_string(id) +
        ", not above the last id accepted or stored (" +
        std::to_string(last_sourced_id_) +
        "): ids must increase strictly and never repeat; nothing of the "
        "call was stored");
  }
  last_sourced_id_ = id;
  return id;
}

Status RuntimeImpl::AssignId(actors::NewTask* task, const std::string& what) {
  if (options_.id_source) {
    Result<TaskId> id = NextSourcedId();
    if (!id.ok()) return id.status().WithContext(what);
    task->id = *id;
  } else {
    task->id = next_id_.fetch_add(1);
  }
  if (std::find(task->depends_on.begin(), task->depends_on.end(), task->id) !=
      task->depends_on.end()) {
    return Status::InvalidArgument(what + ": a task cannot depend on itself");
  }
  return Status::OK();
}

TaskId RuntimeImpl::PeriodicId() {
  if (!options_.id_source) return next_id_.fetch_add(1);
  Result<TaskId> id = NextSourcedId();
  if (id.ok()) return *id;
  Logger()->error("a periodic slot is not enqueued: {}",
                  id.status().ToString());
  return 0;
}

Ticket RuntimeImpl::Enqueue(TaskSpec task) {
  CallGuard guard(this);
  if (guard.closed())
    return Ticket{0, Failed<TaskId>(ClosedError(), executor_)};
  if (read_only_) {
    return Ticket{0, Failed<TaskId>(ReadOnlyError("Enqueue"), executor_)};
  }
  int64_t now = clock_->Now().time_since_epoch().count();
  Result<actors::NewTask> prepared = Prepare(task, "task", now);
  Status s = prepared.status();
  if (s.ok()) s = AssignId(&*prepared, "task");
  if (!s.ok()) return Ticket{0, Failed<TaskId>(s, executor_)};

  TaskId id = prepared->id;
  Admission::Cost cost{1, prepared->payload.size() + prepared->type.size()};
  auto promise = NewPromise<TaskId>();
  actors::EnqueueCommand command;
  command.tasks.push_back(std::move(prepared).value());
  command.done = [promise, admission = admission_,
                  cost](const Result<std::vector<TaskId>>& stored) {
    // Released first, so that the room is free once the future resolves.
    admission->Release(cost);
    if (stored.ok()) {
      promise.Set(stored->front());
    } else {
      promise.Set(stored.status());
    }
  };
  s = admission_->Admit(cost, "task", std::move(command));
  if (!s.ok()) return Ticket{0, Failed<TaskId>(s, executor_)};
  return Ticket{id, promise.GetFuture()};
}

BatchTicket RuntimeImpl::EnqueueBatch(std::vector<TaskSpec> tasks) {
  return EnqueueMany(std::move(tasks), /*chain=*/false);
}

BatchTicket RuntimeImpl::EnqueueChain(std::vector<TaskSpec> tasks) {
  return EnqueueMany(std::move(tasks), /*chain=*/true);
}

BatchTicket RuntimeImpl::EnqueueMany(std::vector<TaskSpec> tasks, bool chain,
                                     std::vector<AppBatch::Write> app_writes) {
  using Ids = std::vector<TaskId>;
  CallGuard guard(this);
  if (guard.closed()) {
    return BatchTicket{{}, Failed<Ids>(ClosedError(), executor_)};
  }
  if (read_only_) {
    return BatchTicket{
        {},
        Failed<Ids>(ReadOnlyError(chain ? "EnqueueChain" : "EnqueueBatch"),
                    executor_)};
  }
  if (tasks.empty() && app_writes.empty()) {
    return BatchTicket{{}, MakeReadyFuture<Ids>(Ids{}, executor_)};
  }
  int64_t now = clock_->Now().time_since_epoch().count();
  actors::EnqueueCommand command;
  command.tasks.reserve(tasks.size());
  Admission::Cost cost{tasks.size(), 0};
  for (const AppBatch::Write& write : app_writes) {
    cost.bytes += write.key.size() + (write.value ? write.value->size() : 0);
  }
  command.app_writes = std::move(app_writes);
  for (size_t i = 0; i < tasks.size(); ++i) {
    Result<actors::NewTask> prepared =
        Prepare(tasks[i], "task " + std::to_string(i) + " of the batch", now);
    if (!prepared.ok()) {
      return BatchTicket{{}, Failed<Ids>(prepared.status(), executor_)};
    }
    cost.bytes += prepared->payload.size() + prepared->type.size();
    command.tasks.push_back(std::move(prepared).value());
  }
  Ids ids;
  ids.reserve(tasks.size());
  for (size_t i = 0; i < command.tasks.size(); ++i) {
    Status s = AssignId(&command.tasks[i],
                        "task " + std::to_string(i) + " of the batch");
    if (!s.ok()) return BatchTicket{{}, Failed<Ids>(s, executor_)};
    ids.push_back(command.tasks[i].id);
    auto& deps = command.tasks[i].depends_on;
    if (chain && i > 0 &&
        std::find(deps.begin(), deps.end(), ids[i - 1]) == deps.end()) {
      deps.push_back(ids[i - 1]);
    }
  }
  auto promise = NewPromise<Ids>();
  command.done = [promise, admission = admission_,
                  cost](const Result<Ids>& stored) {
    admission->Release(cost);
    promise.Set(stored);
  };
  Status s = admission_->Admit(cost, "tasks", std::move(command));
  if (!s.ok()) return BatchTicket{{}, Failed<Ids>(s, executor_)};
  return BatchTicket{std::move(ids), promise.GetFuture()};
}

Future<TaskInfo> RuntimeImpl::GetTask(TaskId id) {
  CallGuard guard(this, "GetTask", QueryReads::kTasks);
  if (guard.refused()) return Failed<TaskInfo>(guard.refusal(), executor_);
  auto promise = NewPromise<TaskInfo>();
  actors::ReadJob job;
  job.run = [promise, id](const storage::TaskStore::ReadView& view) {
    storage::TaskBytes task;
    Status s = storage::ReadTask(view, id, &task);
    if (s.IsNotFound()) s = view.ExplainMissing(id, s);
    if (!s.ok()) {
      promise.Set(s);
      return;
    }
    TaskInfo info;
    storage::FillTaskInfo(task.view(), &info);
    promise.Set(std::move(info));
  };
  job.fail = [promise](const Status& s) { promise.Set(s); };
  caf::anon_send(readers_, actors::read_atom::value, std::move(job));
  return promise.GetFuture();
}

Future<StatusCounts> RuntimeImpl::CountByStatus() {
  CallGuard guard(this);
  if (guard.closed()) return Failed<StatusCounts>(ClosedError(), executor_);
  auto promise = NewPromise<StatusCounts>();
  actors::ReadJob job;
  job.run = [promise](const storage::TaskStore::ReadView& view) {
    StatusCounts counts;
    Status s = view.CountByStatus(&counts.by_status);
    if (!s.ok()) {
      promise.Set(s);
      return;
    }
    promise.Set(counts);
  };
  job.fail = [promise](const Status& s) { promise.Set(s); };
  caf::anon_send(readers_, actors::read_atom::value, std::move(job));
  return promise.GetFuture();
}

Future<void> RuntimeImpl::Drain(DrainOptions options) {
  CallGuard guard(this);
  if (guard.closed()) return Failed<void>(ClosedError(), executor_);
  if (read_only_) return Failed<void>(ReadOnlyError("Drain"), executor_);
  if (!started_) {
    return Failed<void>(
        Status::FailedPrecondition("Drain waits for tasks to run: call Start "
                                   "first"),
        executor_);
  }
  if (options.timeout.count() < 0) {
    return Failed<void>(
        Status::InvalidArgument("DrainOptions::timeout must not be negative"),
        executor_);
  }
  auto promise = NewPromise<void>();
  actors::scheduler_actor scheduler = scheduler_;
  // Through the writer first, so that tasks enqueued before this call are
  // stored, and known to the scheduler, before it is asked. The timeout
  // runs from the scheduler's receipt: the barrier is one commit.
  Completion after_commit = [promise, scheduler, options](const Status&) {
    actors::DrainRequest request;
    request.done = [promise](const Status& s) { promise.Set(Result<void>(s)); };
    request.wait_for_scheduled = options.wait_for_scheduled;
    request.timeout = options.timeout;
    caf::anon_send(scheduler, actors::drain_atom::value, std::move(request));
  };
  caf::anon_send(writer_, actors::barrier_atom::value, std::move(after_commit));
  return promise.GetFuture();
}

Future<void> RuntimeImpl::Close() {
  std::lock_guard<std::mutex> lock(close_mutex_);
  if (close_future_) return *close_future_;
  // Callbacks of the close future run inline: the callback executor is one of
  // the things being shut down.
  Promise<void> promise;
  close_future_ = promise.GetFuture();
  closer_ = std::thread([this, promise] { RunClose(promise); });
  return *close_future_;
}

void RuntimeImpl::RunClose(Promise<void> promise) {
  closed_ = true;
  bool was_started = run_state_ != spool::RunState::kIdle;
  while (calls_in_flight_.load() != 0) std::this_thread::yield();
  // Before the writer's last barrier, so that nothing is handed to it after.
  if (admission_) {
    admission_->Close(Status::Closed(
        "the runtime closed while the call waited for room in the writer "
        "(writer.on_full = \"wait\"); nothing of it was stored"));
  }
  if (read_only_) {
    promise.Set(Result<void>(CloseReadOnly()));
    return;
  }

  auto completion = [](const Promise<void>& p) {
    return Completion([p](const Status& s) { p.Set(Result<void>(s)); });
  };

  StopRetention();
  gates_->Stop();
  StopGateway();
  Status result;
  bool handlers_stuck = false;
  Promise<void> stopped;
  if (was_started) run_state_ = spool::RunState::kStopping;
  caf::anon_send(scheduler_, actors::stop_atom::value, completion(stopped),
                 /*closing=*/true);
  if (!stopped.GetFuture().WaitFor(options_.close_timeout)) {
    handlers_stuck = true;
    // The scheduler answers the stop once its handlers have returned; it
    // is late either because one has not, or because it is still busy
    // with what came before the stop (loading a large queue at open).
    result = Status::TimedOut(
        "the scheduler had not stopped after runtime.close_timeout_ms (" +
        std::to_string(options_.close_timeout.count()) +
        " ms): handlers were still running, or it was still loading the "
        "queue; running tasks stay running and are recovered at the next "
        "open");
    Logger()->warn("close: {}", result.message());
  } else {
    run_state_ = spool::RunState::kIdle;
  }
  Promise<void> committed;
  caf::anon_send(writer_, actors::barrier_atom::value, completion(committed));
  Status s = Await(committed);
  if (!s.ok() && result.ok()) result = s.WithContext("close");
  StopQueries();  // Queries and live queries: ends the watches.
  // A backup holds a reader until its copy ends: stop it rather than wait.
  store_->StopBackup();
  Promise<void> readers_stopped;
  caf::anon_send(readers_, actors::stop_atom::value,
                 completion(readers_stopped));
  s = Await(readers_stopped);
  if (!s.ok() && result.ok()) result = s.WithContext("close");

  clock_->RemoveListener(clock_listener_);
  caf::anon_send_exit(scheduler_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(writer_, caf::exit_reason::user_shutdown);
  for (auto& worker : workers_) {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
  }
  // Detached actors' threads end only when the last handle is gone.
  scheduler_ = nullptr;
  writer_ = nullptr;
  // Answers the standbys still waiting, before the executor goes.
  bool shipped = replication_log_ != nullptr;
  replication_log_.reset();
  readers_ = nullptr;
  workers_.clear();
  if (handlers_stuck) {
    Abandon(std::move(actor_system_), std::move(actor_config_));
  } else {
    actor_system_.reset();
    // The writer is gone: every commit it shipped is on this disk or was
    // retracted, so the next primary here may continue the log.
    // (Should the mark stay, the next one starts a new log: safe, slower.)
    if (shipped) {
      s = store_->EndShipping();
      if (!s.ok()) Logger()->warn("close: {}", s.ToString());
    }
  }

  if (options_.durability != Durability::kMemory) {
    // Spares the next open a long log replay.
    s = store_->Flush();
    if (!s.ok() && result.ok()) result = s.WithContext("close");
  }
  store_.reset();
  {
    // A Stop the scheduler never answered (its handlers outlived Close).
    std::lock_guard<std::mutex> lock(registry_mutex_);
    if (stop_promise_) stop_promise_->Set(Result<void>(ClosedError()));
  }
  if (own_executor_) own_executor_->Shutdown();
  promise.Set(Result<void>(result));
}

Status RuntimeImpl::CloseReadOnly() {
  StopQueries();
  Promise<void> readers_stopped;
  caf::anon_send(readers_, actors::stop_atom::value,
                 Completion([readers_stopped](const Status& s) {
                   readers_stopped.Set(Result<void>(s));
                 }));
  Status result = Await(readers_stopped).WithContext("close");
  readers_ = nullptr;
  if (replica_) {
    // Its mailbox is empty once the transport stopped: spoold stops it
    // before Close.
    caf::anon_send_exit(replica_, caf::exit_reason::user_shutdown);
    replica_ = nullptr;
  }
  actor_system_.reset();
  store_.reset();
  if (own_executor_) own_executor_->Shutdown();
  return result;
}

}  // namespace spool
