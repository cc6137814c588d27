// Options: every setting of a spool runtime, with its default.
//
// Options is a plain struct. Fill it in code, or load it from a TOML file with
// LoadOptions (spool/config.h); config/spool.toml documents every key.

#ifndef SPOOL_INCLUDE_OPTIONS_H_
#define SPOOL_INCLUDE_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/clock.h>
#include <spool/future.h>
#include <spool/task.h>

namespace spool {

// When a write counts as stored.
enum class Durability : uint8_t {
  // The write-ahead log is fsynced before the caller is told. Survives a
  // process crash and a power failure.
  kSync = 0,
  // The write-ahead log is written but not fsynced. Survives a process crash;
  // the last writes may be lost on power failure.
  kRelaxed = 1,
  // Nothing touches the disk: the storage engine runs on an in-memory file
  // system, through the same code path. For tests and ephemeral queues.
  kMemory = 2,
  // As kSync, and then Options::replication_min_acks standbys have applied
  // and synced the commit (spool/replication.h, docs/replication.md):
  // survives the loss of the primary's disk. An enqueue is refused with
  // Busy while fewer standbys are connected; a commit they do not
  // acknowledge within replication_ack_timeout fails its callers with
  // TimedOut (it is stored on the primary, not replicated).
  kReplicated = 3,
};

// "sync", "relaxed", "memory" or "replicated".
const char* DurabilityName(Durability durability);

enum class LogLevel : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// "trace", "debug", "info", "warn", "error" or "off".
const char* LogLevelName(LogLevel level);

// Receives spool's log lines: the level and the message (no time stamp, no
// level text, no line feed). Called from spool's threads (the writer's, the
// workers', the caller's of Open), one line at a time; it must not block
// long, and must not call back into the runtime.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// What an encrypted store does with task records stored in plaintext.
enum class PlaintextRecords : uint8_t {
  // Open refuses a store that holds tasks but was never encrypted; a
  // plaintext record met later is set aside as unreadable.
  kRefuse = 0,
  // Plaintext records are read, and encrypted when next written or by
  // Runtime::ReencryptAll: turns encryption on for an existing store.
  kAccept = 1,
};

// "refuse" or "accept".
const char* PlaintextRecordsName(PlaintextRecords value);

// What Runtime::OpenReadOnly loads of the directory.
enum class ReadOnlyScope : uint8_t {
  // Everything: every query works.
  kAll = 0,
  // The tasks and the counts, without the index: GetTask, GetTaskJson,
  // GetFailureHistory, ListSetAside, CountByStatus, CountByType, and
  // ListTasks and ListTasksJson without a filter (every task in id order,
  // what `spool export` reads) work; listings by status, type or group,
  // OldestTask, NextDueTask and CheckConsistency fail at once with
  // FailedPrecondition. On a live queue it opens faster than kAll, since
  // the holder's index writes in its log are not replayed.
  kTasks = 2,
  // The task counts and nothing else: CountByStatus and CountByType work;
  // every query that reads tasks or their indexes (GetTask, ListTasks,
  // GetTaskJson, ListTasksJson, GetFailureHistory, OldestTask, NextDueTask,
  // CheckConsistency, ListSetAside) fails at once with FailedPrecondition.
  // The counts are kept apart from the tasks in storage, so this open reads
  // and replays only them: on a live queue whose holder has much unflushed
  // log, it opens in a fraction of the time of kAll (docs/cli.md, `spool
  // stats`).
  kCounts = 1,
};

// "all", "tasks" or "counts".
const char* ReadOnlyScopeName(ReadOnlyScope scope);

// What an Enqueue, EnqueueBatch or EnqueueChain call gets when the writer
// already holds Options::writer_max_pending_tasks tasks or
// writer_max_pending_bytes bytes accepted but not yet durable (a disk that
// stalls, a burst faster than the disk). Either way the call returns at once.
enum class WriterFull : uint8_t {
  // Its ticket resolves at once with Busy naming the bound and its value;
  // nothing of the call is kept. The caller decides: retry later, shed, or
  // answer 503 (spoold does).
  kFailBusy = 0,
  // The call waits in a first-in first-out line, held by spool, and is
  // handed to the writer as soon as room is freed; its ticket resolves once
  // it is stored, as usual. The line is bounded too, by the same two
  // values: when it already holds that many tasks or bytes, the call is
  // refused with Busy as in kFailBusy. So at most twice the bounds are held
  // in memory, and a caller that outruns the disk for good is still told.
  // Statistics::waiting_tasks shows the line; Close fails what waits in it
  // with Closed (it was never handed to the writer, so nothing is lost that
  // a ticket said was stored).
  kWait = 1,
};

// "busy" or "wait".
const char* WriterFullName(WriterFull value);

// What a runtime is to replication (spool/replication.h).
enum class ReplicationRole : uint8_t {
  // Runs tasks, and serves standbys when Options::serve_standbys is set.
  kPrimary = 0,
  // Holds a copy that a primary's commits keep current: every call that
  // would change it is refused with FailedPrecondition; reads serve the
  // copy; Runtime::ApplyReplicated and Runtime::Rebase change it. No
  // handler runs, and nothing is recovered or purged.
  kStandby = 1,
};

// "primary" or "standby".
const char* ReplicationRoleName(ReplicationRole role);
// A retry policy as a [retry] or [types.NAME.retry] table gives it: each
// field given or not, so that a type's table may change one field of the
// default policy and keep the rest.
struct RetrySettings {
  // policy: "none", "fixed" or "exponential". Default: unset.
  std::optional<RetryPolicy::Kind> kind;
  // attempts: RetryPolicy::max_attempts. Default: unset.
  std::optional<uint32_t> max_attempts;
  // base_ms: RetryPolicy::initial_delay (a fixed policy's one delay).
  // Default: unset.
  std::optional<Duration> initial_delay;
  // max_ms: RetryPolicy::max_delay. Default: unset.
  std::optional<Duration> max_delay;
  // jitter: RetryPolicy::jitter. Default: unset.
  std::optional<double> jitter;

  // `base` with the fields given here put in its place.
  RetryPolicy Over(RetryPolicy base) const;
  // Whether no field is given.
  bool empty() const;
};

// One task type's settings from the config file's [types.NAME] table. Each
// field is given or not; a handler's HandlerOptions field set in code wins
// over it, and a field given neither here nor in code takes its default
// (spool/handler.h, HandlerOptions).
// A [rate_limits.NAME] table (Options::rate_limits).
struct NamedRateLimitSettings {
  // count: attempts per period, in [1, 1000000]. Default: 0, refused by
  // Validate (the table must set it).
  uint32_t count = 0;
  // period_ms: in [1 ms, 24 h]. Default: 1 s.
  Duration period = std::chrono::seconds(1);
  // types: the task types it spans; at least one. Default: none.
  std::vector<std::string> types;

  bool operator==(const NamedRateLimitSettings& o) const {
    return count == o.count && period == o.period && types == o.types;
  }
};

struct TypeSettings {
  // concurrency: HandlerOptions::max_concurrent. Default: unset.
  std::optional<uint32_t> max_concurrent;
  // timeout_ms: HandlerOptions::timeout; zero for none. Default: unset.
  std::optional<Duration> timeout;
  // rate_limit.count: HandlerOptions::rate_limit's count (0: no limit);
  // unset: no rate limit comes from the file. Default: unset.
  std::optional<uint32_t> rate_limit_count;
  // rate_limit.period_ms: its period, used with rate_limit_count.
  // Default: 1 s.
  Duration rate_limit_period = std::chrono::seconds(1);
  // gates: HandlerOptions::requires_gates. Default: unset.
  std::optional<std::vector<std::string>> requires_gates;
  // retry: over Options::default_retry, field by field; a handler's
  // HandlerOptions::retry, set in code, replaces the whole policy.
  // Default: no field given.
  RetrySettings retry;
};

struct Options {
  // ---- Storage ----

  // The storage directory. Created when missing (its parent must exist),
  // with mode 0700: it holds every payload; an existing directory keeps its
  // mode. Only one runtime, in one process, may hold it at a time.
  // Required, even for kMemory, where it names the in-memory directory.
  std::string path;

  // When a write counts as stored. Default: kSync.
  Durability durability = Durability::kSync;

  // Runtime::OpenReadOnly only: the directory where RocksDB's secondary
  // instance keeps its own files (its info log); created when missing, kept
  // at close; created with mode 0700. Must not be inside `path`. Empty: a
  // new temporary directory (0700), removed at close. No config key.
  // Default: empty.
  std::string secondary_path;

  // Runtime::OpenReadOnly only: what the open loads (ReadOnlyScope).
  // Runtime::Open refuses anything but kAll. No config key. Default: kAll.
  ReadOnlyScope read_only_scope = ReadOnlyScope::kAll;

  // The largest payload Enqueue accepts, in bytes. Default: 1 MiB.
  size_t max_payload_bytes = 1 << 20;

  // The longest task type name, in bytes. Default: 128.
  size_t max_type_bytes = 128;

  // The largest result a handler may set (TaskContext::SetResult), in
  // bytes; it is stored in the task's state. Config key
  // storage.max_result_bytes, in [0, 16 MiB]. Default: 64 KiB.
  size_t max_result_bytes = size_t{64} << 10;

  // The size of each of the storage engine's in-memory write buffers
  // (RocksDB memtables), in bytes. A task's successive states that land in
  // the same buffer are flushed to disk only once, so a buffer that holds a
  // task's whole life saves most of the background flush and compaction
  // work. The log a crash leaves to replay stays capped at 64 MiB whatever
  // this is. Config key storage.memtable_bytes. Default: 64 MiB.
  size_t memtable_bytes = size_t{64} << 20;

  // ---- Encryption at rest (spool/encryption.h) ----

  // The key that seals task records: 32 raw bytes (AES-256), e.g. from
  // GenerateEncryptionKey. Payloads, errors, groups, dedup and idempotency
  // keys and every other record field are encrypted; groups and dedup keys
  // appear in indexes only as keyed hashes. Empty: no encryption, unless
  // encryption_key_file names a key. Default: empty.
  std::string encryption_key;

  // Earlier keys (32 raw bytes each), still accepted for reading what they
  // sealed: key rotation. Requires encryption_key. Default: empty.
  std::vector<std::string> previous_encryption_keys;

  // A file of keys, one per line as 64 hex digits: the first is the current
  // key, later ones previous keys; blank lines and lines starting with '#'
  // are skipped. Read by Runtime::Open (and OpenReadOnly), which refuses a
  // file that group or others may access (chmod 600). Excludes
  // encryption_key. Default: empty.
  std::string encryption_key_file;

  // With a key: what to do with task records stored in plaintext.
  // Default: kRefuse.
  PlaintextRecords plaintext_records = PlaintextRecords::kRefuse;

  // ---- Actors and threads ----

  // Reader actors answering queries, each on its own thread. Default: 2.
  int readers = 2;

  // Worker actors running handlers, each on its own thread. This is the
  // global concurrency limit: at most this many handlers run at once.
  // 0 (only in code, and only with remote_listen set): no local worker, a
  // queue node whose tasks all run on remote workers. Default: 4.
  int workers = 4;

  // The most tasks kept claimed ahead of the workers: stored as running
  // before a worker is free for them, so that a worker finishing one task
  // starts the next without waiting for a write. The scheduler keeps as
  // many as the workers finish during one commit, up to this; 0 claims a
  // task only for an idle worker. Only tasks without a concurrency limit
  // (per type or group) are claimed ahead. After a crash of the process,
  // a claimed task that never started goes back to the queue with its
  // attempt not spent; after a crash of the machine, its attempt counts
  // (docs/architecture.md, "Claims ahead"). Default: 256.
  int claim_ahead = 256;

  // Threads of CAF's shared scheduler. Only the watcher (live queries)
  // runs on it; the writer, scheduler, readers, workers and recovery each
  // have a thread of their own (docs/architecture.md, "Actors and their
  // threads"). Default: 2.
  int scheduler_threads = 2;

  // The most commands the writer folds into one write batch and one sync.
  // Default: 1024.
  size_t writer_max_batch = 1024;

  // The most queued tasks whose states the writer keeps in memory, so that
  // claiming them reads nothing from storage (about 250 bytes each). The
  // oldest-stored queued tasks are kept, as they are claimed first; running
  // tasks are kept regardless. 0 keeps no queued task. Default: 65536.
  size_t writer_state_cache = 65536;

  // The most tasks, and the most bytes of their payloads and type names
  // (nothing else of a task is counted), that Enqueue, EnqueueBatch and
  // EnqueueChain calls may have handed to the writer and not yet seen
  // resolved: accepted, not yet durable (or failed). A task counts from the
  // call until its ticket resolves. A call that does not fit gets what
  // on_writer_full says; a batch or chain counts all its tasks and is
  // admitted or refused whole, and one larger than a bound by itself is
  // refused with InvalidArgument. Near a bound, calls racing each other may
  // be refused a little early, never let past it. 0 lifts that bound; with
  // both 0 nothing is counted (the Statistics' pending figures read 0).
  // Periodic tasks the runtime enqueues itself are not counted. Config keys
  // writer.max_pending_tasks and writer.max_pending_bytes.
  // Default: 100,000 tasks and 64 MiB.
  size_t writer_max_pending_tasks = 100'000;
  size_t writer_max_pending_bytes = size_t{64} << 20;

  // What a call past one of those bounds gets (WriterFull). Config key
  // writer.on_full. Default: kFailBusy.
  WriterFull on_writer_full = WriterFull::kFailBusy;

  // At most this many tasks of one group run at once; 0 for no limit.
  // group_limits and Runtime::SetGroupConcurrency override it per group.
  // Default: 0.
  uint32_t group_concurrency = 0;

  // The most times one task may be snoozed (TaskContext::Snooze) before a
  // snooze counts as a failed attempt; a manual Retry starts the count
  // again. 0: every snooze fails its attempt. Config key
  // runtime.max_snoozes, in [0, 1000000]. Default: 100.
  uint32_t max_snoozes = 100;
  // ---- Per type and per group settings (config: [retry], [types.NAME],
  // [groups.NAME]) ----

  // The retry policy of task types whose handler sets none in code and
  // whose [types.NAME.retry] does not give every field: config [retry].
  // Default: RetryPolicy{} (exponential, 3 attempts, 1 s doubling to 1 h).
  RetryPolicy default_retry;

  // Settings by task type, what handlers get for the HandlerOptions fields
  // their code leaves unset (spool/handler.h). A type that never gets a
  // handler is named in a warning at Start: most likely a typo.
  // Default: none.
  std::map<std::string, TypeSettings> types;

  // The concurrency limit of each named group, over group_concurrency
  // (0: no limit for that group, whatever group_concurrency is). A limit
  // set by Runtime::SetGroupConcurrency wins over it, and is stored: it
  // keeps winning after a restart until it is set to 0 (docs in
  // spool/runtime.h). Default: none.
  std::map<std::string, uint32_t> group_limits;

  // Named rate limits from [rate_limits.NAME] tables: each is added at
  // Start as Runtime::AddRateLimit(NAME, {count, period}, types) would add
  // it, one bucket for all its types (a key function is code's only). A
  // name the code adds itself is code's: its AddRateLimit wins and the
  // table is not used. Default: none.
  std::map<std::string, NamedRateLimitSettings> rate_limits;

  // The retry policy handlers of `type` get when their code sets none:
  // types[type].retry over default_retry.
  RetryPolicy RetryPolicyFor(const std::string& type) const;

  // How often each gate registered with Runtime::RegisterGate is asked
  // whether it is open (spool/gate.h). Config key
  // runtime.gate_recheck_interval_ms: 1 to 86,400,000. Default: 1 s.
  std::chrono::milliseconds gate_recheck_interval = std::chrono::seconds(1);

  // ---- Shutdown ----

  // How long Close waits for running handlers before it gives up on them.
  // Their tasks stay `running` and are recovered at the next open.
  // Default: 30 s.
  std::chrono::milliseconds close_timeout = std::chrono::seconds(30);

  // ---- Remote workers (config section [remote], docs/scale-out.md) ----

  // "HOST:PORT" where the worker gateway listens for spool-worker
  // processes (spool::RemoteWorker); "" keeps it off and the runtime
  // takes no network work at all. Beyond loopback, Open refuses it
  // without TLS (remote_tls_*) unless remote_allow_insecure is set.
  // Default: "" (off).
  std::string remote_listen;
  // A file holding the shared secret every remote worker must present
  // before it is handed a task. Required when remote_listen is set; like
  // spoold's bearer token file it must not be readable by group or others.
  // Default: "".
  std::string remote_secret_file;
  // How long a remote worker's lease on a task lasts without a heartbeat;
  // past it the attempt counts as interrupted and the task runs elsewhere.
  // Default: 10 s.
  std::chrono::milliseconds remote_lease = std::chrono::seconds(10);
  // How often remote workers send heartbeats; below remote_lease.
  // Default: 1 s.
  std::chrono::milliseconds remote_heartbeat = std::chrono::seconds(1);
  // The most tasks leased to one remote worker beyond its declared
  // concurrency, so that it never waits for a round trip. Default: 16.
  int remote_claim_ahead = 16;
  // TLS for the gateway (libcaf_openssl): the gateway's certificate and
  // private key (PEM; the key file must not be readable by group or
  // others), and the CA that signed the workers' certificates. All three or
  // none. With them, every worker must present a certificate of that CA
  // before any CAF message is read, and the traffic is encrypted; the
  // secret's challenge-response still follows. Default: "" (plain BASP).
  std::string remote_tls_certificate_file;
  std::string remote_tls_key_file;
  std::string remote_tls_ca_file;
  // Lets remote_listen be beyond loopback without TLS. The gateway's
  // traffic is then not encrypted: whoever can read it sees payloads and
  // session keys (never the secret), and whoever reaches the port can send
  // CAF messages before the handshake (docs/security.md). Only for a
  // trusted network. Default: false.
  bool remote_allow_insecure = false;

  // ---- Retention (config section [retention]) ----
  //
  // After Start, the runtime deletes finished tasks once they are older
  // than these (their last change, on `clock`), as Purge would: a bounded
  // batch at a time, every retention_interval, never a task a waiting task
  // depends on or one whose dedup key is still reserved (unique_for).
  // Duration(0) keeps such tasks forever. spool has no status of its own
  // for dead tasks: a task that failed after its last allowed attempt
  // (attempts == max_attempts) is `dead` here; one that failed with
  // attempts left (a permanent error, a dependency that failed) is
  // `failed`. Each is between 0 and 3650 days.

  // Succeeded tasks. Default: 24 hours.
  Duration retention_succeeded = std::chrono::hours(24);
  // Failed tasks that had attempts left. Default: 7 days.
  Duration retention_failed = std::chrono::hours(24 * 7);
  // Failed tasks that used every attempt. Default: 30 days.
  Duration retention_dead = std::chrono::hours(24 * 30);
  // Cancelled tasks. Default: 7 days.
  Duration retention_cancelled = std::chrono::hours(24 * 7);
  // From the start of one pass to the start of the next (at once after a
  // pass that took longer); the first runs at Start. Between 1 second and
  // 1 day. Default: 1 minute.
  Duration retention_interval = std::chrono::minutes(1);
  // The most index entries one step examines (PurgeOptions::batch_size).
  // After each step retention waits nine times as long as the step took,
  // so that it takes about a tenth of the writer's time. Between 1 and
  // 1_000_000. Default: 1000.
  size_t retention_batch_size = 1000;

  // ---- Backups (spool/backup.h) ----

  // Where Runtime::Backup() makes backups: a directory outside `path`,
  // created with mode 0700 at the first backup. Empty: Backup() is refused
  // (BackupTo still takes a directory). Default: empty.
  std::string backup_dir;
  // How many backups Backup() and BackupTo keep: after each new one, the
  // oldest beyond this many are deleted (the files they share with newer
  // ones stay). Between 1 and 10,000. Default: 10.
  uint32_t backup_keep = 10;

  // ---- Replication (spool/replication.h) ----

  // Default: kPrimary.
  ReplicationRole replication_role = ReplicationRole::kPrimary;
  // For spoold's transport (docs/replication.md); the runtime does not
  // read them. A standby's primary, as "http://HOST:PORT" or
  // "https://HOST:PORT"; the name it gives itself (1 to 64 of
  // [A-Za-z0-9._-]; empty: "standby-" and its process id); the file of the
  // secret standbys present to the primary (both sides; at least 16 bytes,
  // mode 0600); and the CA file that verifies an https primary. Default:
  // all empty.
  std::string replication_primary;
  std::string replication_name;
  std::string replication_secret_file;
  std::string replication_ca_file;

  // Keeps a replication log that standbys follow (Runtime::FollowLog):
  // standbys copy commits asynchronously unless durability is kReplicated,
  // which implies this. Costs a copy of each commit's write batch. Not with
  // kMemory. Default: false.
  bool serve_standbys = false;
  // kReplicated: how many standbys must acknowledge each commit before
  // its callers are told. Between 1 and 16. Default: 1.
  uint32_t replication_min_acks = 1;
  // kReplicated: how long a commit waits for them; also how long a
  // standby stays connected without asking. Between 10 ms and 10 min.
  // Default: 5 s.
  std::chrono::milliseconds replication_ack_timeout = std::chrono::seconds(5);
  // The most bytes of commit data the log keeps in memory; a standby
  // further behind copies a new base. Between 1 MiB and 16 GiB.
  // Default: 64 MiB.
  uint64_t replication_log_bytes = uint64_t{64} << 20;

  // ---- Time, callbacks and logging ----

  // The source of time for timestamps, delays and backoff. Default: null,
  // meaning SystemClock().
  std::shared_ptr<Clock> clock;

  // Where task ids come from, instead of spool's own counter (ids reserved
  // on disk in blocks, increasing in the order Enqueue is called). Called
  // once per task at Enqueue, EnqueueBatch, EnqueueChain (on the caller's
  // thread) and for each periodic slot (on the scheduler's thread), one
  // call at a time (spool holds a lock around it, so the source need not
  // be thread safe); it must not block or call into the runtime.
  //
  // Contract: every id is in [1, 2^63) and greater than every id it
  // returned before and than every id in the store, across restarts (a
  // clock-based id, e.g. microseconds since an epoch with a counter in its
  // low bits, keeps to it). spool checks that before it stores anything:
  // an id that is 0, 2^63 or more, or not above the last one (at open: the
  // highest id stored) is refused, and the call's ticket resolves with
  // InvalidArgument naming Options::id_source, the id and the bound; a
  // batch or chain is then refused whole. So a faulty source costs that
  // call, never a task in the store. A refused id is not remembered: the
  // next call is judged against the last id accepted (the ids a refused
  // batch took before its bad one count as accepted). No config key.
  // Default: null, meaning spool's counter.
  std::function<TaskId()> id_source;

  // The random fraction in [0, 1) that spreads the delays of exponential
  // retry policies with jitter (RetryPolicy::DelayAfter's unit_random),
  // e.g. a constant in tests, to make delays exact. Called on the writer's
  // thread, once per failed attempt; it must not block or call into the
  // runtime. A value outside [0, 1) is clamped into it (NaN counts as 0.5,
  // the policy's plain delay). No config key. Default: null, meaning a
  // uniform pseudo-random generator seeded at open.
  std::function<double()> random_fraction;

  // Runs Future::Then callbacks. Default: null, meaning one spool thread
  // that runs nothing else.
  std::shared_ptr<Executor> callback_executor;

  // Log level of spool's spdlog logger "spool". At kDebug every batch commit
  // is logged with its size and time. Default: kWarn.
  LogLevel log_level = LogLevel::kWarn;

  // Where spool's log lines go instead of stderr, e.g. into the embedding
  // application's logger. Lines below log_level are not produced. spool's
  // logger is one per process, shared by the runtimes in it: the sink
  // receives the lines of every runtime of the process while this runtime
  // is open, from Open until the runtime is destroyed; while any runtime
  // has a sink, stderr gets none. Not settable from a config file.
  // Default: null, meaning stderr.
  LogSink log_sink;

  // Whether Statistics::sync_seconds is measured: each commit then turns
  // RocksDB's perf timing on for its write, which costs the writer about
  // 15 % more CPU per drained task on a 2-core machine (docs/experiments.md,
  // entry 22). Off, sync_seconds stays empty and everything else is kept.
  // Not settable from a config file yet. Default: false.
  bool measure_sync_time = false;

  // ---- Periodic tasks ----

  // Added at Start as if by Runtime::AddPeriodic; in a config file, one
  // [periodic.NAME] table each. Their task types need handlers by then.
  // Default: none.
  std::vector<PeriodicTask> periodic;

  // OK, or InvalidArgument naming the first field out of range.
  Status Validate() const;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_OPTIONS_H_
