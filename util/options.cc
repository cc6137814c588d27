#include <string>
#include <utility>

#include <spool/options.h>

namespace spool {

const char* DurabilityName(Durability durability) {
  switch (durability) {
    case Durability::kSync:
      return "sync";
    case Durability::kRelaxed:
      return "relaxed";
    case Durability::kMemory:
      return "memory";
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

namespace {

// The [retention] settings: each age within [0, 3650 days], the interval
// within [1 s, 1 day], the batch within [1, 1000000].
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

}  // namespace

Status Options::Validate() const {
  auto bad = [](const std::string& what) {
    return Status::InvalidArgument(what);
  };
  if (path.empty()) return bad("storage.path must not be empty");
  if (static_cast<int>(durability) > static_cast<int>(Durability::kMemory)) {
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
  if (readers < 1 || readers > 256) {
    return bad("runtime.readers must be in [1, 256], got " +
               std::to_string(readers));
  }
  if (workers < 1 || workers > 4096) {
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
  // A day is far beyond any sane shutdown, and keeps deadline arithmetic in
  // nanoseconds from overflowing.
  if (close_timeout.count() < 0 || close_timeout > std::chrono::hours(24)) {
    return bad("runtime.close_timeout_ms must be in [0, 86400000], got " +
               std::to_string(close_timeout.count()));
  }
  if (Status s = ValidateRetention(*this); !s.ok()) return s;
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
  return Status::OK();
}

}  // namespace spool
