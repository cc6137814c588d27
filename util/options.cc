#include <string>
#include <utility>

#include <spool/options.h>

#include "util/loopback.h"
#include "util/paths.h"

namespace spool {
namespace {

// The upper ends of writer.max_pending_tasks and writer.max_pending_bytes:
// far past any sane bound (config/config.cc repeats them).
constexpr size_t kMaxPendingTasks = 100'000'000;
constexpr size_t kMaxPendingBytes = size_t{1} << 40;

}  // namespace

const char* DurabilityName(Durability durability) {
  switch (durability) {
    case Durability::kSync:
      return "sync";
    case Durability::kRelaxed:
      return "relaxed";
    case Durability::kMemory:
      return "memory";
    case Durability::kReplicated:
      return "replicated";
  }
  return "invalid";
}

const char* ReplicationRoleName(ReplicationRole role) {
  switch (role) {
    case ReplicationRole::kPrimary:
      return "primary";
    case ReplicationRole::kStandby:
      return "standby";
  }
  return "invalid";
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kOff:
      return "off";
  }
  return "invalid";
}

const char* PlaintextRecordsName(PlaintextRecords value) {
  switch (value) {
    case PlaintextRecords::kRefuse:
      return "refuse";
    case PlaintextRecords::kAccept:
      return "accept";
  }
  return "invalid";
}

const char* ReadOnlyScopeName(ReadOnlyScope scope) {
  switch (scope) {
    case ReadOnlyScope::kAll:
      return "all";
    case ReadOnlyScope::kTasks:
      return "tasks";
    case ReadOnlyScope::kCounts:
      return "counts";
  }
  return "invalid";
}

const char* WriterFullName(WriterFull value) {
  switch (value) {
    case WriterFull::kFailBusy:
      return "busy";
    case WriterFull::kWait:
      return "wait";
  }
  return "invalid";
}

RetryPolicy RetrySettings::Over(RetryPolicy base) const {
  if (kind) base.kind = *kind;
  if (max_attempts) base.max_attempts = *max_attempts;
  if (initial_delay) base.initial_delay = *initial_delay;
  if (max_delay) base.max_delay = *max_delay;
  if (jitter) base.jitter = *jitter;
  return base;
}

bool RetrySettings::empty() const {
  return !kind && !max_attempts && !initial_delay && !max_delay && !jitter;
}

RetryPolicy Options::RetryPolicyFor(const std::string& type) const {
  auto it = types.find(type);
  return it == types.end() ? default_retry
                           : it->second.retry.Over(default_retry);
}

namespace {

// The longest delay or timeout a config may set: spool::kMaxDelay, a year.
constexpr int64_t kMaxDelayMs =
    std::chrono::duration_cast<std::chrono::milliseconds>(kMaxDelay).count();
// The largest count a concurrency limit, attempt budget or rate may have.
constexpr uint32_t kMaxCount = 1'000'000;

std::string Milliseconds(Duration d) {
  return std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

// A retry policy's fields, named as the config spells them under `prefix`
// ("retry" or "types.NAME.retry").
Status ValidateRetry(const RetryPolicy& retry, const std::string& prefix) {
  auto bad = [&prefix](const std::string& what) {
    return Status::InvalidArgument(prefix + "." + what);
  };
  if (retry.kind != RetryPolicy::Kind::kNone &&
      retry.kind != RetryPolicy::Kind::kFixed &&
      retry.kind != RetryPolicy::Kind::kExponential) {
    return bad("policy is out of range");
  }
  if (retry.max_attempts < 1 || retry.max_attempts > kMaxCount) {
    return bad("attempts must be in [1, 1000000], got " +
               std::to_string(retry.max_attempts));
  }
  if (retry.initial_delay < Duration(0) || retry.initial_delay > kMaxDelay) {
    return bad("base_ms must be in [0, " + std::to_string(kMaxDelayMs) +
               "], got " + Milliseconds(retry.initial_delay));
  }
  if (retry.max_delay < retry.initial_delay || retry.max_delay > kMaxDelay) {
    return bad("max_ms must be in [base_ms (" +
               Milliseconds(retry.initial_delay) + "), " +
               std::to_string(kMaxDelayMs) + "], got " +
               Milliseconds(retry.max_delay));
  }
  if (!(retry.jitter >= 0.0 && retry.jitter <= 1.0)) {
    return bad("jitter must be in [0, 1], got " + std::to_string(retry.jitter));
  }
  return Status::OK();
}

// A type or group name as messages show it: cut to 64 bytes (at a UTF-8
// character's start), so that a stray megabyte name is not echoed whole.
std::string NameForMessage(const std::string& name) {
  constexpr size_t kMaxBytes = 64;
  if (name.size() <= kMaxBytes) return name;
  size_t cut = kMaxBytes;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return name.substr(0, cut) + "...";
}

Status ValidateType(const std::string& type, const TypeSettings& settings,
                    const Options& options) {
  const std::string prefix = "types." + NameForMessage(type);
  auto bad = [&prefix](const std::string& what) {
    return Status::InvalidArgument(prefix + what);
  };
  if (type.empty()) return bad(": a task type name must not be empty");
  if (type.size() > options.max_type_bytes) {
    return bad(": the type name is " + std::to_string(type.size()) +
               " bytes; storage.max_type_bytes is " +
               std::to_string(options.max_type_bytes));
  }
  if (settings.max_concurrent && *settings.max_concurrent > kMaxCount) {
    return bad(".concurrency must be in [0, 1000000], got " +
               std::to_string(*settings.max_concurrent));
  }
  if (settings.timeout &&
      (*settings.timeout < Duration(0) || *settings.timeout > kMaxDelay)) {
    return bad(".timeout_ms must be in [0, " + std::to_string(kMaxDelayMs) +
               "], got " + Milliseconds(*settings.timeout));
  }
  if (settings.rate_limit_count && *settings.rate_limit_count > kMaxCount) {
    return bad(".rate_limit.count must be in [0, 1000000], got " +
               std::to_string(*settings.rate_limit_count));
  }
  if (settings.rate_limit_period < std::chrono::milliseconds(1) ||
      settings.rate_limit_period > std::chrono::hours(24)) {
    return bad(".rate_limit.period_ms must be in [1, 86400000], got " +
               Milliseconds(settings.rate_limit_period));
  }
  if (settings.requires_gates) {
    for (const std::string& gate : *settings.requires_gates) {
      if (gate.empty()) return bad(".gates: a gate name must not be empty");
    }
  }
  return ValidateRetry(settings.retry.Over(options.default_retry),
                       prefix + ".retry");
}

// The longest group name, as Enqueue allows it (runtime/runtime_impl.cc).
constexpr size_t kMaxGroupBytes = 1024;

// [rate_limits.NAME]: as Runtime::AddRateLimit checks its arguments.
Status ValidateNamedRateLimits(const Options& options) {
  for (const auto& [name, limit] : options.rate_limits) {
    std::string subject = "rate_limits." + NameForMessage(name);
    if (name.empty() || name.size() > 256) {
      return Status::InvalidArgument(
          "rate_limits: a limit's name must be 1 to 256 bytes, got " +
          std::to_string(name.size()));
    }
    if (limit.count < 1 || limit.count > kMaxCount) {
      return Status::InvalidArgument(subject +
                                     ".count must be in [1, 1000000], got " +
                                     std::to_string(limit.count));
    }
    if (limit.period < std::chrono::milliseconds(1) ||
        limit.period > std::chrono::hours(24)) {
      return Status::InvalidArgument(
          subject + ".period_ms must be in [1, 86400000], got " +
          Milliseconds(limit.period));
    }
    if (limit.types.empty()) {
      return Status::InvalidArgument(subject +
                                     ".types must name at least one type");
    }
  }
  return Status::OK();
}

Status ValidatePerTypeAndGroup(const Options& options) {
  Status s = ValidateRetry(options.default_retry, "retry");
  if (!s.ok()) return s;
  for (const auto& [type, settings] : options.types) {
    s = ValidateType(type, settings, options);
    if (!s.ok()) return s;
  }
  for (const auto& [group, limit] : options.group_limits) {
    if (group.empty()) {
      return Status::InvalidArgument("groups: a group name must not be empty");
    }
    if (group.size() > kMaxGroupBytes) {
      return Status::InvalidArgument(
          "groups." + NameForMessage(group) + ": the group name is " +
          std::to_string(group.size()) + " bytes; the limit is 1024");
    }
    if (limit > kMaxCount) {
      return Status::InvalidArgument(
          "groups." + NameForMessage(group) +
          ".concurrency must be in [0, 1000000], got " + std::to_string(limit));
    }
  }
  return ValidateNamedRateLimits(options);
}

}  // namespace

namespace {

// The [retention] settings: each age within [0, 3650 days], the interval
// within [1 s, 1 day], the batch within [1, 1000000].
// [remote]: the listen address, its secret, and lease timings that let a
// heartbeat arrive before its lease runs out.
Status ValidateRemote(const Options& o) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument(why);
  };
  if (o.remote_lease < std::chrono::milliseconds(100) ||
      o.remote_lease > std::chrono::hours(1)) {
    return bad("remote.lease_ms must be in [100, 3600000], got " +
               std::to_string(o.remote_lease.count()));
  }
  if (o.remote_heartbeat < std::chrono::milliseconds(10) ||
      o.remote_heartbeat > std::chrono::minutes(10)) {
    return bad("remote.heartbeat_ms must be in [10, 600000], got " +
               std::to_string(o.remote_heartbeat.count()));
  }
  if (o.remote_claim_ahead < 0 || o.remote_claim_ahead > 4096) {
    return bad("remote.claim_ahead must be in [0, 4096], got " +
               std::to_string(o.remote_claim_ahead));
  }
  if (o.remote_listen.empty()) return Status::OK();
  if (o.remote_heartbeat >= o.remote_lease) {
    return bad("remote.heartbeat_ms (" +
               std::to_string(o.remote_heartbeat.count()) +
               ") must be below remote.lease_ms (" +
               std::to_string(o.remote_lease.count()) +
               "), or every lease runs out between two heartbeats");
  }
  size_t colon = o.remote_listen.rfind(':');
  std::string port =
      colon == std::string::npos ? "" : o.remote_listen.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 &&
                port.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || !digits || std::stoi(port) > 65535) {
    return bad(
        "remote.listen must be \"HOST:PORT\" with a port in [0, "
        "65535], got \"" +
        o.remote_listen + "\"");
  }
  if (o.remote_secret_file.empty()) {
    return bad(
        "remote.secret_file must name the shared secret's file when "
        "remote.listen is set: a gateway without one would hand tasks "
        "to any peer");
  }
  const bool tls = !o.remote_tls_certificate_file.empty() ||
                   !o.remote_tls_key_file.empty() ||
                   !o.remote_tls_ca_file.empty();
  if (!tls && !o.remote_allow_insecure &&
      !IsLoopbackHost(o.remote_listen.substr(0, colon))) {
    return bad("remote.listen \"" + o.remote_listen +
               "\" is beyond loopback, and the gateway's traffic would not "
               "be encrypted: set remote.tls_certificate_file, "
               "remote.tls_key_file and remote.tls_ca_file, or listen on "
               "127.0.0.1, or on a trusted network only set "
               "remote.allow_insecure = true");
  }
  return Status::OK();
}

Status ValidateRetention(const Options& o) {
  using std::chrono::hours;
  for (const auto& [name, age] :
       {std::pair<const char*, Duration>{"succeeded", o.retention_succeeded},
        {"failed", o.retention_failed},
        {"dead", o.retention_dead},
        {"cancelled", o.retention_cancelled}}) {
    if (age < Duration(0) || age > hours(24 * 3650)) {
      return Status::InvalidArgument(std::string("retention.") + name +
                                     " must be between 0 and 3650 days, got " +
                                     std::to_string(age.count()) + " us");
    }
  }
  if (o.retention_interval < std::chrono::seconds(1) ||
      o.retention_interval > hours(24)) {
    return Status::InvalidArgument(
        "retention.interval must be between 1 second and 1 day, got " +
        std::to_string(o.retention_interval.count()) + " us");
  }
  if (o.retention_batch_size < 1 || o.retention_batch_size > 1'000'000) {
    return Status::InvalidArgument(
        "retention.batch_size must be in [1, 1000000], got " +
        std::to_string(o.retention_batch_size));
  }
  return Status::OK();
}

// The backup directory must not be the store or lie inside it: RocksDB
// would copy the backups into the next backup, and a restore into the
// store's place would remove them.
Status ValidateBackup(const Options& o) {
  if (o.backup_keep < 1 || o.backup_keep > 10'000) {
    return Status::InvalidArgument("backup.keep must be in [1, 10000], got " +
                                   std::to_string(o.backup_keep));
  }
  if (!o.backup_dir.empty() && IsSameOrWithin(o.backup_dir, o.path)) {
    return Status::InvalidArgument("backup.dir " + o.backup_dir +
                                   " must lie outside storage.path " + o.path);
  }
  return Status::OK();
}

Status ValidateReplication(const Options& o) {
  if (o.replication_role == ReplicationRole::kStandby &&
      o.durability == Durability::kMemory) {
    return Status::InvalidArgument(
        "a standby (replication.role = \"standby\") needs a store on disk; "
        "storage.durability is \"memory\"");
  }
  bool replicated = o.durability == Durability::kReplicated;
  if (o.durability == Durability::kMemory && o.serve_standbys) {
    return Status::InvalidArgument(
        "replication.serve_standbys needs a store on disk; storage.durability "
        "is \"memory\"");
  }
  if (!replicated && !o.serve_standbys) return Status::OK();
  if (o.replication_min_acks < 1 || o.replication_min_acks > 16) {
    return Status::InvalidArgument(
        "replication.min_acks must be in [1, 16], got " +
        std::to_string(o.replication_min_acks));
  }
  if (o.replication_ack_timeout < std::chrono::milliseconds(10) ||
      o.replication_ack_timeout > std::chrono::minutes(10)) {
    return Status::InvalidArgument(
        "replication.ack_timeout_ms must be in [10, 600000], got " +
        std::to_string(o.replication_ack_timeout.count()));
  }
  if (o.replication_log_bytes < (uint64_t{1} << 20) ||
      o.replication_log_bytes > (uint64_t{16} << 30)) {
    return Status::InvalidArgument(
        "replication.log_bytes must be in [1048576, 17179869184], got " +
        std::to_string(o.replication_log_bytes));
  }
  return Status::OK();
}

}  // namespace

Status Options::Validate() const {
  auto bad = [](const std::string& what) {
    return Status::InvalidArgument(what);
  };
  if (path.empty()) return bad("storage.path must not be empty");
  if (static_cast<int>(durability) >
      static_cast<int>(Durability::kReplicated)) {
    return bad("storage.durability is out of range");
  }
  if (memtable_bytes < (size_t{1} << 20) ||
      memtable_bytes > (size_t{1} << 30)) {
    return bad("storage.memtable_bytes must be in [1048576, 1073741824], got " +
               std::to_string(memtable_bytes));
  }
  if (static_cast<int>(read_only_scope) >
      static_cast<int>(ReadOnlyScope::kTasks)) {
    return bad("read_only_scope is out of range");
  }
  if (max_payload_bytes == 0)
    return bad("storage.max_payload_bytes must be > 0");
  if (max_payload_bytes > (size_t{1} << 30)) {
    return bad("storage.max_payload_bytes must be <= 1 GiB");
  }
  if (max_type_bytes == 0 || max_type_bytes > 4096) {
    return bad("storage.max_type_bytes must be in [1, 4096]");
  }
  if (max_result_bytes > (size_t{16} << 20)) {
    return bad("storage.max_result_bytes must be in [0, 16777216], got " +
               std::to_string(max_result_bytes));
  }
  if (max_snoozes > 1'000'000) {
    return bad("runtime.max_snoozes must be in [0, 1000000], got " +
               std::to_string(max_snoozes));
  }
  if (readers < 1 || readers > 256) {
    return bad("runtime.readers must be in [1, 256], got " +
               std::to_string(readers));
  }
  // 0 local workers: a queue node whose tasks all run on remote workers.
  if (workers < (remote_listen.empty() ? 1 : 0) || workers > 4096) {
    return bad("runtime.workers must be in [1, 4096], got " +
               std::to_string(workers));
  }
  if (claim_ahead < 0 || claim_ahead > 4096) {
    return bad("runtime.claim_ahead must be in [0, 4096], got " +
               std::to_string(claim_ahead));
  }
  if (scheduler_threads < 1 || scheduler_threads > 256) {
    return bad("runtime.scheduler_threads must be in [1, 256], got " +
               std::to_string(scheduler_threads));
  }
  if (group_concurrency > 1'000'000) {
    return bad("runtime.group_concurrency must be in [0, 1000000], got " +
               std::to_string(group_concurrency));
  }
  if (writer_state_cache > 16'777'216) {
    return bad("writer.state_cache must be in [0, 16777216], got " +
               std::to_string(writer_state_cache));
  }
  if (writer_max_batch < 1 || writer_max_batch > 1'000'000) {
    return bad("writer.max_batch must be in [1, 1000000], got " +
               std::to_string(writer_max_batch));
  }
  if (writer_max_pending_tasks > kMaxPendingTasks) {
    return bad("writer.max_pending_tasks must be in [0, " +
               std::to_string(kMaxPendingTasks) + "], got " +
               std::to_string(writer_max_pending_tasks));
  }
  if (writer_max_pending_bytes > kMaxPendingBytes) {
    return bad("writer.max_pending_bytes must be in [0, " +
               std::to_string(kMaxPendingBytes) + "], got " +
               std::to_string(writer_max_pending_bytes));
  }
  if (static_cast<int>(on_writer_full) > static_cast<int>(WriterFull::kWait)) {
    return bad("writer.on_full is out of range");
  }
  // A day is far beyond any sane shutdown, and keeps deadline arithmetic in
  // nanoseconds from overflowing.
  if (close_timeout.count() < 0 || close_timeout > std::chrono::hours(24)) {
    return bad("runtime.close_timeout_ms must be in [0, 86400000], got " +
               std::to_string(close_timeout.count()));
  }
  if (gate_recheck_interval.count() < 1 ||
      gate_recheck_interval > std::chrono::hours(24)) {
    return bad(
        "runtime.gate_recheck_interval_ms must be in [1, 86400000], "
        "got " +
        std::to_string(gate_recheck_interval.count()));
  }
  if (Status s = ValidateRemote(*this); !s.ok()) return s;
  if (Status s = ValidateRetention(*this); !s.ok()) return s;
  if (Status s = ValidateBackup(*this); !s.ok()) return s;
  if (Status s = ValidateReplication(*this); !s.ok()) return s;
  if (static_cast<int>(log_level) > static_cast<int>(LogLevel::kOff)) {
    return bad("log.level is out of range");
  }
  // Key material is never quoted, only its size.
  auto key_size = [](const std::string& name, const std::string& key) {
    return name + " is " + std::to_string(key.size()) +
           " bytes; an AES-256 key is exactly 32 bytes";
  };
  if (!encryption_key.empty() && encryption_key.size() != 32) {
    return bad(key_size("encryption_key", encryption_key));
  }
  for (size_t i = 0; i < previous_encryption_keys.size(); ++i) {
    if (previous_encryption_keys[i].size() != 32) {
      return bad(key_size("previous_encryption_keys[" + std::to_string(i) + "]",
                          previous_encryption_keys[i]));
    }
  }
  if (!encryption_key.empty() && !encryption_key_file.empty()) {
    return bad("set encryption_key or storage.encryption_key_file, not both");
  }
  if (!previous_encryption_keys.empty() && encryption_key.empty()) {
    return bad("previous_encryption_keys needs a current encryption_key");
  }
  if (static_cast<int>(plaintext_records) >
      static_cast<int>(PlaintextRecords::kAccept)) {
    return bad("storage.plaintext_records is out of range");
  }
  return ValidatePerTypeAndGroup(*this);
}

}  // namespace spool
