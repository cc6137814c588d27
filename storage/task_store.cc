#include "storage/task_store.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <system_error>

#include <flatbuffers/flatbuffers.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/slice.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_batch.h>

#include "storage/rocks_status.h"
#include "storage/task_record_generated.h"
#include "storage/task_store_internal.h"

namespace spool::storage {
namespace {

constexpr const char* kFamilyNames[] = {"tasks", "index", "meta", "corrupt",
                                        "app"};
static_assert(sizeof(kFamilyNames) / sizeof(kFamilyNames[0]) ==
              static_cast<size_t>(ColumnFamily::kCount));

// The families of schema version 1 (spool 0.1), which named each index.
// Only used to recognise such a directory and say so.
constexpr const char* kVersion1Families[] = {
    "ready",   "scheduled", "running", "by_status",
    "by_type", "by_group",  "dedup",   "waiting_on"};

constexpr const char* kMetaSchemaVersion = "schema_version";
// The writer's state, rewritten by every commit as one value: the number of
// batches committed, the next enqueue sequence, the first id not reserved,
// and the count of tasks in each status (big-endian, in that order). One
// value, so that a commit writes one meta entry, not one per figure.
constexpr const char* kMetaWriterState = "writer_state";

struct WriterStateValue {
  uint64_t committed_batches = 0;
  uint64_t next_sequence = 1;
  uint64_t reserved_ids = 1;
  StatusCountArray counts{};
};

std::string EncodeWriterState(const WriterStateValue& state) {
  std::string value;
  value.reserve(24 + 8 * kTaskStatusCount);
  PutBigEndian64(&value, state.committed_batches);
  PutBigEndian64(&value, state.next_sequence);
  PutBigEndian64(&value, state.reserved_ids);
  PutCounts(&value, state.counts);
  return value;
}

bool DecodeWriterState(std::string_view value, WriterStateValue* state) {
  if (value.size() != 24 + 8 * kTaskStatusCount) return false;
  state->committed_batches = GetBigEndian64(value.data());
  state->next_sequence = GetBigEndian64(value.data() + 8);
  state->reserved_ids = GetBigEndian64(value.data() + 16);
  value.remove_prefix(24);
  return GetCounts(&value, &state->counts);
}

std::string EncodeCounts(const StatusCountArray& counts) {
  std::string value;
  PutCounts(&value, counts);
  return value;
}

rocksdb::Slice AsSlice(std::string_view s) {
  return rocksdb::Slice(s.data(), s.size());
}

std::string_view AsView(const rocksdb::Slice& s) {
  return std::string_view(s.data(), s.size());
}

// What `builder` holds: the encoding it finished last.
std::string_view BuilderBytes(const flatbuffers::FlatBufferBuilder& builder) {
  return std::string_view(
      reinterpret_cast<const char*>(builder.GetBufferPointer()),
      builder.GetSize());
}

Status TaskMissing(TaskId id) {
  return Status::NotFound("task " + std::to_string(id) + " does not exist");
}

// The first failure that a task with `total` failures still keeps: the
// history holds the last kMaxFailureHistory.
uint32_t FirstKeptFailure(uint32_t total) {
  return total > kMaxFailureHistory ? total - kMaxFailureHistory : 0;
}

bool IsActive(TaskStatus status) { return !IsTerminal(status); }

bool IsQueued(TaskStatus status) {
  return status == TaskStatus::kPending ||
         status == TaskStatus::kRetryScheduled;
}

// Memtable insert hints. A skiplist insert searches from the top unless it
// lands next to the previous insert; a batch's inserts land in several
// places (the pending range, the running range, ...), so without help
// nearly every one searches the whole list. With a prefix extractor for
// hints, RocksDB keeps an insert position per prefix, and an insert next
// to the last one of its prefix is nearly free.
//
// Index keys: status, group and waiting entries end in an id, and ids
// arrive mostly in ascending order within (status, type), (group) and
// (dependency): the key without its id is the prefix. Due entries are in
// due-time order: one prefix. Dedup keys land anywhere: no hint.
class IndexFrontTransform final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "spool.IndexFront"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    if (static_cast<IndexKind>(key[0]) == IndexKind::kDue) {
      return rocksdb::Slice(key.data(), 1);
    }
    return rocksdb::Slice(key.data(), key.size() - 8);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    if (key.size() < 1) return false;
    switch (static_cast<IndexKind>(key[0])) {
      case IndexKind::kStatus:
      case IndexKind::kType:
      case IndexKind::kGroup:
      case IndexKind::kWaiting:
        return key.size() > 8;
      case IndexKind::kDue:
        return true;
      default:
        return false;
    }
  }
};

// Meta keys are few and rewritten by every commit (the writer state, the
// counts of a type): each key is its own prefix, so that its new version
// goes in right next to its last.
class WholeKeyTransform final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "spool.WholeKey"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return key;
  }
  bool InDomain(const rocksdb::Slice&) const override { return true; }
};

// A task's values: a commit writes them in id order (Commit sorts them),
// one ascending sweep. Without a hint, an insert that does not land right
// next to the previous one searches from the top, and the next state is
// never adjacent to the last (the next task's spec lies between them). One
// hint for the whole family lets RocksDB walk forward from the last insert
// instead.
class OneFrontTransform final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "spool.OneFront"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), 0);
  }
  bool InDomain(const rocksdb::Slice&) const override { return true; }
};

rocksdb::ColumnFamilyOptions FamilyOptions(
    ColumnFamily family, const std::shared_ptr<rocksdb::Cache>& cache,
    size_t memtable_bytes) {
  rocksdb::ColumnFamilyOptions cf;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  // Values are fetched by key: a bloom filter saves a disk read on misses.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10, false));
  table.cache_index_and_filter_blocks = true;
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // Tasks are written and consumed quickly: in a memtable that holds a
  // task's whole life, its states collapse into one and its index entries
  // (a put, then its single delete) die before any flush. 64 MiB instead of
  // 16 cut a 100,000-task drain's CPU by 15 % and raised its median rate
  // 1.18x (docs/experiments.md, 32). The log a crash leaves stays
  // capped by max_total_wal_size.
  cf.write_buffer_size = memtable_bytes;
  switch (family) {
    case ColumnFamily::kIndex:
      cf.memtable_insert_with_hint_prefix_extractor =
          std::make_shared<IndexFrontTransform>();
      cf.compression = rocksdb::kNoCompression;
      // Compact files that are mostly deletions, so scans at open stay
      // cheap.
      cf.table_properties_collector_factories.emplace_back(
          rocksdb::NewCompactOnDeletionCollectorFactory(128, 64, 0.5));
      break;
    case ColumnFamily::kTasks:
      cf.memtable_insert_with_hint_prefix_extractor =
          std::make_shared<OneFrontTransform>();
      cf.compression = rocksdb::kLZ4Compression;
      break;
    case ColumnFamily::kMeta:
      cf.memtable_insert_with_hint_prefix_extractor =
          std::make_shared<WholeKeyTransform>();
      break;
    default:
      break;
  }
  return cf;
}

// Index kinds whose staged entries a transaction's own reads see (see
// WriteTxn): the ones commands read while they stage.
bool IsOverlaid(std::string_view key) {
  if (key.empty()) return false;
  switch (static_cast<IndexKind>(key[0])) {
    case IndexKind::kDedup:
    case IndexKind::kWaiting:
    case IndexKind::kGroup:
      return true;
    default:
      return false;
  }
}

}  // namespace

const char* ColumnFamilyName(ColumnFamily family) {
  auto index = static_cast<size_t>(family);
  return index < static_cast<size_t>(ColumnFamily::kCount) ? kFamilyNames[index]
                                                           : "invalid";
}

std::vector<IndexEntry> IndexEntriesOf(const StateRecord& state) {
  std::vector<IndexEntry> entries;
  entries.reserve(5 + state.depends_on.size());
  std::string status_value;
  if (IsQueued(state.status)) {
    status_value =
        EncodeQueueValue({state.priority, state.sequence, state.next_attempt_us,
                          state.stored_group});
    if (state.next_attempt_us != 0) {
      entries.push_back({DueIndexKey(state.next_attempt_us, state.sequence),
                         IdValue(state.id)});
    }
  }
  entries.push_back({StatusIndexKey(state.status, state.type, state.id),
                     std::move(status_value)});
  entries.push_back({TypeIndexKey(state.type, state.id), ""});
  if (state.status == TaskStatus::kWaiting) {
    for (TaskId dependency : state.depends_on) {
      entries.push_back({WaitingIndexKey(dependency, state.id), ""});
    }
  }
  if (!state.stored_group.empty()) {
    entries.push_back({GroupIndexKey(state.stored_group, state.id),
                       std::string(1, static_cast<char>(state.status))});
  }
  // A finished task keeps its key while it may still hold a reservation
  // (unique_for): whether the window is still open depends on the time, so
  // the writer judges that at each lookup and releases a closed one
  // (unique_for_us set to 0), which removes the entry.
  if (!state.stored_dedup_key.empty() &&
      (IsActive(state.status) || state.unique_for_us > 0)) {
    entries.push_back(
        {DedupIndexKey(state.stored_dedup_key), IdValue(state.id)});
  }
  return entries;
}

TaskStore::TaskStore(const StoreOptions& options)
    : options_(options), states_(options.state_cache_entries) {}

TaskStore::~TaskStore() {
  CloseDb();
  if (!temp_secondary_path_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temp_secondary_path_, ignored);
  }
}

Status TaskStore::CatchUp() const {
  if (!options_.read_only) return Status::OK();
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  std::unique_lock<std::shared_mutex> no_views(catch_up_mutex_);
  return FromRocks(db_->TryCatchUpWithPrimary(),
                   "catching up with the holder of " + options_.path);
}

void TaskStore::CloseDb() {
  if (!db_) return;
  for (auto*& handle : handles_) {
    if (handle != nullptr) db_->DestroyColumnFamilyHandle(handle);
    handle = nullptr;
  }
  if (default_handle_ != nullptr) {
    db_->DestroyColumnFamilyHandle(default_handle_);
    default_handle_ = nullptr;
  }
  // A close after a write failure reports it again; there is nothing more
  // to do about it here.
  db_->Close().PermitUncheckedError();
  db_.reset();
  states_.Clear();
}

Status TaskStore::Reopen() {
  if (options_.read_only) return ReadOnlyStore(options_.path, "Reopen");
  std::unique_lock<std::shared_mutex> lock(db_mutex_);
  CloseDb();
  Status s = OpenDb();
  if (s.ok()) s = LoadMeta();
  if (!s.ok()) CloseDb();
  return s;
}

Status TaskStore::Open(const StoreOptions& options,
                       std::unique_ptr<TaskStore>* store) {
  if (options.path.empty()) {
    return Status::InvalidArgument("storage path is empty");
  }
  if (options.read_only && options.durability == Durability::kMemory) {
    return Status::InvalidArgument(
        "an in-memory store (durability \"memory\") cannot be opened "
        "read-only: no other process can hold it");
  }
  if (!options.read_only && options.read_scope != ReadOnlyScope::kAll) {
    return Status::InvalidArgument(
        std::string("read scope \"") + ReadOnlyScopeName(options.read_scope) +
        "\" is for read-only opens only; a store opened for writing opens "
        "every family");
  }
  std::unique_ptr<TaskStore> result(new TaskStore(options));
  Status s = result->OpenDb();
  if (!s.ok()) return s;
  s = result->LoadMeta();
  if (!s.ok()) return s;
  *store = std::move(result);
  return Status::OK();
}

namespace {

rocksdb::DBOptions QueueDbOptions(rocksdb::Env* env) {
  rocksdb::DBOptions db_options;
  if (env != nullptr) db_options.env = env;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  // One writer thread: pipelining the WAL and memtable writes of concurrent
  // writers buys nothing and costs latency.
  db_options.enable_pipelined_write = false;
  // Likewise, inserting into memtables from several threads at once; and
  // RocksDB ignores memtable insert hints when it is on.
  db_options.allow_concurrent_memtable_write = false;
  // With several column families a rarely written one (meta, corrupt) pins
  // old logs; cap the total so they get flushed.
  db_options.max_total_wal_size = 64 << 20;
  // Reuse log files: an fdatasync of an overwritten file skips the metadata
  // write that an appended file needs (docs/experiments.md).
  db_options.recycle_log_file_num = 4;
  db_options.keep_log_file_num = 4;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.avoid_unnecessary_blocking_io = true;
  // Sized for a queue, whose store holds few table files: opening them
  // needs no pool of 16 threads, nor the statistics RocksDB reads from
  // every file to tune compaction; and the log a crash leaves is replayed
  // into memtables without first flushing them to small files (the log is
  // kept until they are flushed).
  db_options.max_file_opening_threads = 1;
  db_options.skip_stats_update_on_db_open = true;
  db_options.avoid_flush_during_recovery = true;
  return db_options;
}

// The schema version a directory's meta family records, read without
// opening it for writing; 0 when it records none.
uint32_t RecordedVersion(const rocksdb::DBOptions& db_options,
                         const std::string& path,
                         const std::vector<std::string>& families) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : families) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &handles,
                                    &raw)
           .ok()) {
    return 0;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  uint32_t version = 0;
  for (size_t i = 0; i < families.size(); ++i) {
    std::string value;
    if (families[i] == "meta" &&
        db->Get(rocksdb::ReadOptions(), handles[i], kMetaSchemaVersion, &value)
            .ok() &&
        value.size() == 4) {
      version = GetBigEndian32(value.data());
    }
  }
  for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
  db->Close().PermitUncheckedError();
  return version;
}

Status VersionRefused(const std::string& path, uint32_t version) {
  std::string written = version == 0
                            ? std::string("an unknown schema version")
                            : "schema version " + std::to_string(version);
  std::string advice =
      version != 0 && version < kSchemaVersion
          ? "; spool is 0.x and does not convert stores: finish its tasks "
            "with the spool that wrote it, or start with a new directory"
          : "; it was written by a newer spool";
  return Status::NotSupported(
      "storage directory " + path + " was written by " + written +
      ", and this spool reads schema version " +
      std::to_string(kSchemaVersion) + " only" + advice);
}

}  // namespace

// Creates directory `path` with mode 0700 when it does not exist: it will
// hold every payload and error, and RocksDB's own mkdir follows the umask
// (0755 under the usual 022, so that every user could list it and read the
// files in it, which RocksDB creates 0644). Only the last component, as
// RocksDB would. An existing directory keeps its mode: the operator chose
// it. `what` names the directory in errors.
Status CreatePrivateDirectory(const std::string& path, const char* what) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) {
    return Status::OK();
  }
  return Status::IOError(std::string("cannot create ") + what + " " + path +
                         ": " + std::strerror(errno));
}

Status TaskStore::PrepareReadOnly(rocksdb::DBOptions* db_options) {
  const std::string& path = options_.path;
  std::error_code error;
  auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) {
    return Status::NotFound("storage directory " + path + " does not exist");
  }
  if (!std::filesystem::is_directory(status)) {
    return Status::InvalidArgument("storage directory " + path +
                                   " is not a directory");
  }
  if (!std::filesystem::exists(std::filesystem::path(path) / "CURRENT",
                               error)) {
    return Status::InvalidArgument(
        "storage directory " + path +
        " is not a spool store (it holds no RocksDB database)");
  }
  if (options_.secondary_path.empty()) {
    std::string pattern =
        (std::filesystem::temp_directory_path(error) / "spool-ro-XXXXXX")
            .string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return Status::IOError("cannot make a temporary directory " + pattern +
                             " for the read-only open of " + path + ": " +
                             std::strerror(errno));
    }
    temp_secondary_path_ = pattern;
    options_.secondary_path = pattern;
  } else if (Status s = CreatePrivateDirectory(options_.secondary_path,
                                               "secondary directory");
             !s.ok()) {
    return s;
  }
  // Everything RocksDB would write for itself (its info log, also for the
  // read-only open that reads a foreign directory's schema version) goes to
  // the secondary directory, never into `path`.
  db_options->create_if_missing = false;
  db_options->create_missing_column_families = false;
  db_options->db_log_dir = options_.secondary_path;
  // A secondary keeps every table file open: the holder may delete one
  // while it is in use here.
  db_options->max_open_files = -1;
  return Status::OK();
}

Status TaskStore::CheckLayout(const std::string& path) {
  std::vector<std::string> existing;
  rocksdb::DBOptions db_options = QueueDbOptions(options_.env);
  if (options_.read_only) db_options.db_log_dir = options_.secondary_path;
  rocksdb::Options list_options(db_options, rocksdb::ColumnFamilyOptions());
  if (!rocksdb::DB::ListColumnFamilies(list_options, path, &existing).ok()) {
    if (options_.read_only) {
      return Status::InvalidArgument("storage directory " + options_.path +
                                     " is not a spool store (RocksDB cannot "
                                     "list its column families)");
    }
    return Status::OK();  // a new directory
  }
  has_app_family_ =
      std::find(existing.begin(), existing.end(),
                ColumnFamilyName(ColumnFamily::kApp)) != existing.end();
  if (options_.read_only) {
    for (const char* ours : kFamilyNames) {
      // A version 2 store has no `app` family; a reader reads it as empty.
      if (ours == kFamilyNames[static_cast<size_t>(ColumnFamily::kApp)]) {
        continue;
      }
      if (std::find(existing.begin(), existing.end(), ours) == existing.end()) {
        bool old = false;
        for (const std::string& name : existing) {
          for (const char* v1 : kVersion1Families) old |= name == v1;
        }
        if (old) break;  // refused below, with its version
        return Status::InvalidArgument(
            "storage directory " + options_.path +
            " is not a spool store (a RocksDB database without spool's '" +
            ours + "' column family)");
      }
    }
  }
  bool foreign = false;
  for (const std::string& name : existing) {
    bool known = name == rocksdb::kDefaultColumnFamilyName;
    for (const char* ours : kFamilyNames) known |= name == ours;
    foreign |= !known;
  }
  if (!foreign) return Status::OK();
  uint32_t version = RecordedVersion(db_options, path, existing);
  if (version == 0) {
    for (const std::string& name : existing) {
      for (const char* old : kVersion1Families) {
        if (name == old) version = 1;
      }
    }
  }
  return VersionRefused(options_.path, version);
}

Status TaskStore::OpenDb() {
  rocksdb::Env* env = options_.env;
  std::string path = options_.path;
  if (options_.durability == Durability::kMemory) {
    if (env == nullptr) {
      if (!owned_env_) {
        owned_env_.reset(rocksdb::NewMemEnv(rocksdb::Env::Default()));
      }
      env = owned_env_.get();
    }
    // The in-memory file system cannot resolve relative paths.
    if (path.front() != '/') path = "/" + path;
  }
  rocksdb::DBOptions db_options = QueueDbOptions(env);
  if (options_.read_only) {
    Status s = PrepareReadOnly(&db_options);
    if (!s.ok()) return s;
  } else if (options_.durability != Durability::kMemory) {
    Status s = CreatePrivateDirectory(path, "storage directory");
    if (!s.ok()) return s;
  }
  Status s = CheckLayout(path);
  if (!s.ok()) return s;

  // Four shards of 16 MiB, not RocksDB's default 64 of 1 MiB: an entry
  // larger than its shard is dropped as soon as it is released, and the
  // whole-file filter of a table of 850,000 keys is 1.07 MB, so with 1 MiB
  // shards every point lookup in a large store read and checksummed that
  // filter from the file again (found by spool-torture's checker: 3 TB
  // read after 150 kills).
  auto cache = rocksdb::NewLRUCache(64 << 20, /*num_shard_bits=*/2);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName,
                           rocksdb::ColumnFamilyOptions());
  // A reader of a narrower scope opens only the families it reads
  // (StoreOptions::read_scope); a secondary may open a subset of them.
  ReadOnlyScope scope =
      options_.read_only ? options_.read_scope : ReadOnlyScope::kAll;
  std::vector<ColumnFamily> opened;
  for (size_t i = 0; i < static_cast<size_t>(ColumnFamily::kCount); ++i) {
    auto family = static_cast<ColumnFamily>(i);
    if (scope == ReadOnlyScope::kCounts && family != ColumnFamily::kMeta) {
      continue;
    }
    if (scope == ReadOnlyScope::kTasks && family == ColumnFamily::kIndex) {
      continue;
    }
    if (options_.read_only && family == ColumnFamily::kApp &&
        !has_app_family_) {
      continue;
    }
    descriptors.emplace_back(
        kFamilyNames[i], FamilyOptions(family, cache, options_.memtable_bytes));
    opened.push_back(family);
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status rs =
      options_.read_only
          ? rocksdb::DB::OpenAsSecondary(db_options, path,
                                         options_.secondary_path, descriptors,
                                         &handles, &db)
          : rocksdb::DB::Open(db_options, path, descriptors, &handles, &db);
  if (!rs.ok()) {
    std::string text = rs.ToString();
    if (rs.IsIOError() && (text.find("lock") != std::string::npos ||
                           text.find("LOCK") != std::string::npos)) {
      return Status::Busy("storage directory " + options_.path +
                          " is in use by another spool runtime (" + text + ")");
    }
    return FromRocks(rs, "opening storage directory " + options_.path);
  }
  db_.reset(db);
  default_handle_ = handles[0];
  for (size_t i = 0; i < opened.size(); ++i) {
    handles_[static_cast<size_t>(opened[i])] = handles[i + 1];
  }
  return Status::OK();
}

Status TaskStore::CheckFamily(ColumnFamily family) const {
  if (HasFamily(family)) return Status::OK();
  return Status::FailedPrecondition(
      "storage " + options_.path + " is open read-only with read scope \"" +
      ReadOnlyScopeName(options_.read_scope) + "\", which does not open the " +
      ColumnFamilyName(family) +
      " family: reading it needs a read-only open of scope \"all\"");
}

// The writer's state and the counts by type, as stored: at open, and on a
// standby after each applied commit (task_store_replica.cc).
Status TaskStore::LoadWriterMeta() {
  auto get = [this](const std::string& key, std::string* value) {
    return db_->Get(rocksdb::ReadOptions(), Handle(ColumnFamily::kMeta), key,
                    value);
  };
  std::string value;
  WriterStateValue writer;
  rocksdb::Status rs = get(kMetaWriterState, &value);
  if (rs.ok() && !DecodeWriterState(value, &writer)) {
    return Status::Corruption("storage directory " + options_.path + ": meta " +
                              kMetaWriterState + " is malformed");
  }
  if (!rs.ok() && !rs.IsNotFound()) {
    return FromRocks(rs, std::string("reading meta ") + kMetaWriterState);
  }
  committed_batches_ = writer.committed_batches;
  next_sequence_ = writer.next_sequence;
  reserved_ids_ = writer.reserved_ids;
  counts_ = writer.counts;
  type_counts_.clear();
  return ScanLocked(
      ColumnFamily::kMeta, kTypeCountPrefix, "",
      [&](std::string_view key, std::string_view v) {
        std::string_view type;
        StatusCountArray counts;
        if (DecodeTypeCountKey(key, &type) && GetCounts(&v, &counts)) {
          type_counts_[std::string(type)] = counts;
        }
        return true;
      },
      nullptr);
}

Status TaskStore::LoadMeta() {
  auto get = [this](const std::string& key, std::string* value) {
    return db_->Get(rocksdb::ReadOptions(), Handle(ColumnFamily::kMeta), key,
                    value);
  };
  std::string value;
  rocksdb::Status rs = get(kMetaSchemaVersion, &value);
  if (rs.IsNotFound() && options_.read_only) {
    return Status::Corruption("storage directory " + options_.path +
                              " records no schema version");
  }
  if (rs.IsNotFound()) {
    // A new directory, or one that lost its meta: only the first is fine.
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), Handle(ColumnFamily::kTasks)));
    it->SeekToFirst();
    if (it->Valid()) {
      return Status::Corruption("storage directory " + options_.path +
                                " holds tasks but no schema version");
    }
    std::string version;
    PutBigEndian32(&version, kSchemaVersion);
    rocksdb::WriteOptions wo;
    wo.sync = options_.durability == Durability::kSync;
    Status s = FromRocks(
        db_->Put(wo, Handle(ColumnFamily::kMeta), kMetaSchemaVersion, version),
        "writing the schema version");
    return s.ok() ? LoadKeys() : s;
  }
  if (!rs.ok()) return FromRocks(rs, "reading the schema version");
  if (value.size() != 4) {
    return Status::Corruption("storage directory " + options_.path +
                              ": schema version entry is malformed");
  }
  uint32_t version = GetBigEndian32(value.data());
  if (version == kUpgradableSchemaVersion && !options_.read_only) {
    // The open created the `app` family, all version 3 adds.
    std::string upgraded;
    PutBigEndian32(&upgraded, kSchemaVersion);
    rocksdb::WriteOptions wo;
    wo.sync = options_.durability == Durability::kSync;
    Status s = FromRocks(
        db_->Put(wo, Handle(ColumnFamily::kMeta), kMetaSchemaVersion, upgraded),
        "recording schema version 3 over version 2");
    if (!s.ok()) return s;
  } else if (version != kSchemaVersion &&
             !(version == kUpgradableSchemaVersion && options_.read_only)) {
    return VersionRefused(options_.path, version);
  }

  Status s = LoadWriterMeta();
  if (s.ok()) s = LoadKeys();
  if (!s.ok()) return s;

  std::string dirty;
  if (!get(kMetaCountsDirty, &dirty).ok()) return Status::OK();
  // The holder repairs at its next open; a reader cannot.
  if (options_.read_only) return Status::OK();
  s = RepairIndexes();
  if (!s.ok()) return s;
  return RebuildCounts();
}

// ---- Checking and repairing the index ----

namespace {

// Every index entry the readable states imply.
using ExpectedIndex = std::map<std::string, std::string>;

Status ExpectedFromStates(
    const std::function<Status(const TaskVisitor&)>& scan_tasks,
    ExpectedIndex* expected) {
  return scan_tasks([&](TaskId id, TaskBytes& task, const Status& opened) {
    StateRecord state;
    if (opened.ok() && task.Verify(id).ok() &&
        DecodeState(id, task.state(), &state).ok()) {
      for (IndexEntry& e : IndexEntriesOf(state)) {
        (*expected)[std::move(e.key)] = std::move(e.value);
      }
    }
    return true;
  });
}

std::string Hex(std::string_view key) {
  static const char* kDigits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : key) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

}  // namespace

Status TaskStore::CheckIndexes(size_t* mismatches,
                               std::vector<std::string>* problems) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  return CheckIndexesLocked(mismatches, problems, nullptr);
}

Status TaskStore::ReadView::CheckIndexes(
    size_t* mismatches, std::vector<std::string>* problems) const {
  if (!open_) return StoreClosed(store_->options_.path);
  return store_->CheckIndexesLocked(mismatches, problems, snapshot_);
}

Status TaskStore::CheckIndexesLocked(size_t* mismatches,
                                     std::vector<std::string>* problems,
                                     const rocksdb::Snapshot* snapshot) const {
  ExpectedIndex want;
  Status s = ExpectedFromStates(
      [this, snapshot](const TaskVisitor& visit) {
        return ScanTasksLocked(ColumnFamily::kTasks, 0, visit, snapshot);
      },
      &want);
  if (!s.ok()) return s;
  // Indexed by IndexMismatch.
  static constexpr const char* kReported[] = {
      "entry without a task", "wrong value for", "missing entry"};
  *mismatches = 0;
  auto report = [&](IndexMismatch mismatch, std::string_view key,
                    std::string_view /*expected*/) {
    ++*mismatches;
    if (problems != nullptr && problems->size() < 20) {
      problems->push_back(
          "index: " + std::string(kReported[static_cast<int>(mismatch)]) + " " +
          Hex(key));
    }
  };
  return CompareIndexLocked(&want, report, snapshot);
}

Status TaskStore::CompareIndexLocked(ExpectedIndex* expected,
                                     const IndexMismatchVisitor& visit,
                                     const rocksdb::Snapshot* snapshot) const {
  Status s = ScanLocked(
      ColumnFamily::kIndex, "", "",
      [&](std::string_view key, std::string_view value) {
        auto it = expected->find(std::string(key));
        if (it == expected->end()) {
          visit(IndexMismatch::kWithoutTask, key, "");
        } else {
          if (it->second != value) {
            visit(IndexMismatch::kWrongValue, key, it->second);
          }
          expected->erase(it);
        }
        return true;
      },
      snapshot);
  if (!s.ok()) return s;
  for (const auto& [key, value] : *expected) {
    visit(IndexMismatch::kMissing, key, value);
  }
  return Status::OK();
}

Status TaskStore::RepairIndexes() {
  Status s = SetAsideUnreadable();
  if (!s.ok()) return s;
  rocksdb::WriteBatch batch;
  ExpectedIndex want;
  flatbuffers::FlatBufferBuilder builder(256);
  std::string sealed;
  Status inner;
  // States hold the group and dedup key in stored form; after encryption
  // was turned on for a plaintext store, those are still plaintext. They
  // are derived again from the specs, and the states rewritten.
  s = ScanTasksLocked(
      ColumnFamily::kTasks, 0,
      [&](TaskId id, TaskBytes& task, const Status& opened) {
        StateRecord state;
        if (!opened.ok() || !task.Verify(id).ok() ||
            !DecodeState(id, task.state(), &state).ok()) {
          return true;
        }
        const fb::TaskSpec& spec = *task.view().spec;
        auto plain = [](const flatbuffers::String* v) {
          return v == nullptr ? std::string_view() : v->string_view();
        };
        std::string group = StoredGroup(plain(spec.group()));
        std::string dedup_key = StoredDedupKey(plain(spec.dedup_key()));
        if (group != state.stored_group ||
            dedup_key != state.stored_dedup_key) {
          state.stored_group = std::move(group);
          state.stored_dedup_key = std::move(dedup_key);
          EncodeState(state, &builder);
          std::string key = StateKey(id);
          std::string_view value;
          inner = StoredValue(key, BuilderBytes(builder), &sealed, &value);
          if (!inner.ok()) return false;
          batch.Put(Handle(ColumnFamily::kTasks), key, AsSlice(value));
        }
        for (IndexEntry& e : IndexEntriesOf(state)) {
          want[std::move(e.key)] = std::move(e.value);
        }
        return true;
      },
      nullptr);
  if (!s.ok()) return s;
  if (!inner.ok()) return inner;
  rocksdb::ColumnFamilyHandle* index = Handle(ColumnFamily::kIndex);
  // A wrong value is removed before it is put again: SingleDelete allows
  // one put per key between deletes.
  auto repair = [&](IndexMismatch mismatch, std::string_view key,
                    std::string_view expected) {
    if (mismatch != IndexMismatch::kMissing) {
      batch.SingleDelete(index, AsSlice(key));
    }
    if (mismatch != IndexMismatch::kWithoutTask) {
      batch.Put(index, AsSlice(key), AsSlice(expected));
    }
  };
  s = CompareIndexLocked(&want, repair);
  if (!s.ok()) return s;
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  side_writes_.fetch_add(1);
  return FromRocks(db_->Write(wo, &batch), "repairing the index");
}

// A set-aside task's status and type were unknown, so the counts may be
// off: count again from the states.
Status TaskStore::RebuildCounts() {
  std::array<uint64_t, kTaskStatusCount> counts{};
  TypeCounts type_counts;
  Status s = ScanTasksLocked(
      ColumnFamily::kTasks, 0,
      [&](TaskId id, TaskBytes& task, const Status& opened) {
        if (opened.ok() && task.Verify(id).ok()) {
          auto status = static_cast<size_t>(task.view().state->status());
          counts[status]++;
          type_counts[std::string(TypeOf(task.view()))][status]++;
        }
        return true;
      },
      nullptr);
  if (!s.ok()) return s;
  rocksdb::WriteBatch batch;
  WriterStateValue writer{committed_batches_, next_sequence_, reserved_ids_,
                          counts};
  batch.Put(Handle(ColumnFamily::kMeta), kMetaWriterState,
            EncodeWriterState(writer));
  batch.DeleteRange(Handle(ColumnFamily::kMeta), kTypeCountPrefix,
                    PrefixSuccessor(kTypeCountPrefix));
  for (const auto& [type, by_status] : type_counts) {
    batch.Put(Handle(ColumnFamily::kMeta), TypeCountKey(type),
              EncodeCounts(by_status));
  }
  batch.Delete(Handle(ColumnFamily::kMeta), kMetaCountsDirty);
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  side_writes_.fetch_add(1);
  s = FromRocks(db_->Write(wo, &batch), "rewriting counts");
  if (!s.ok()) return s;
  counts_ = counts;
  type_counts_ = std::move(type_counts);
  return Status::OK();
}

// ---- Reads ----

Status TaskStore::GetTask(TaskId id, TaskBytes* task,
                          const rocksdb::Snapshot* snapshot) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  Status opened;
  Status s = GetTaskLocked(ColumnFamily::kTasks, id, task, snapshot, &opened);
  return s.ok() ? opened : s;
}

Status TaskStore::GetTaskLocked(ColumnFamily family, TaskId id, TaskBytes* task,
                                const rocksdb::Snapshot* snapshot,
                                Status* opened) const {
  task->Clear();
  *opened = Status::OK();
  if (Status s = CheckFamily(family); !s.ok()) return s;
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  // The spec and the state in one batched lookup; the failure history, when
  // the state says there is one, with a short scan after them.
  std::string keys[2] = {SpecKey(id), StateKey(id)};
  rocksdb::Slice slices[2] = {keys[0], keys[1]};
  rocksdb::PinnableSlice values[2];
  rocksdb::Status statuses[2];
  db_->MultiGet(ro, Handle(family), 2, slices, values, statuses);
  std::string* targets[2] = {task->mutable_spec(), task->mutable_state()};
  for (int i = 0; i < 2; ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) {
      return FromRocks(statuses[i], "reading " + TaskValueName(keys[i]));
    }
    targets[i]->assign(values[i].data(), values[i].size());
    if (i == 0) {
      task->set_has_spec();
    } else {
      task->set_has_state();
    }
    Status s = OpenValue(keys[i], targets[i]);
    if (!s.ok() && opened->ok()) *opened = s;
  }
  if (!task->has_spec() && !task->has_state()) return TaskMissing(id);
  const fb::TaskState* state = nullptr;
  if (!task->has_state() || !opened->ok() ||
      !VerifyState(id, task->state(), &state).ok() ||
      state->failures_total() == 0) {
    return Status::OK();
  }
  std::string prefix = TaskPrefix(id);
  prefix.push_back(static_cast<char>(TaskValueKind::kFailure));
  return ScanLocked(
      family, prefix, FailureKey(id, FirstKeptFailure(state->failures_total())),
      [&](std::string_view key, std::string_view value) {
        std::string* failure = task->AddFailure();
        failure->assign(value);
        Status s = OpenValue(key, failure);
        if (!s.ok() && opened->ok()) *opened = s;
        return true;
      },
      snapshot);
}

Status TaskStore::GetSpec(TaskId id, std::string* bytes,
                          const rocksdb::Snapshot* snapshot) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  return GetSpecLocked(id, bytes, snapshot);
}

Status TaskStore::GetSpecLocked(TaskId id, std::string* bytes,
                                const rocksdb::Snapshot* snapshot) const {
  std::string key = SpecKey(id);
  Status s = GetStoredLocked(ColumnFamily::kTasks, key, bytes, snapshot);
  if (s.IsNotFound()) return TaskMissing(id);
  if (!s.ok()) return s;
  return OpenValue(key, bytes);
}

Status TaskStore::HighestTaskId(TaskId* id) const {
  *id = 0;
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  for (ColumnFamily family : {ColumnFamily::kTasks, ColumnFamily::kCorrupt}) {
    if (!CheckFamily(family).ok()) continue;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), Handle(family)));
    it->SeekToLast();
    if (!it->status().ok()) {
      return FromRocks(it->status(), std::string("seeking the end of ") +
                                         ColumnFamilyName(family));
    }
    if (!it->Valid()) continue;
    TaskId last = 0;
    TaskValueKind kind;
    uint32_t number = 0;
    if (!DecodeTaskKey(AsView(it->key()), &last, &kind, &number)) {
      return Status::Corruption(std::string("a malformed key ends ") +
                                ColumnFamilyName(family));
    }
    *id = std::max(*id, last);
  }
  return Status::OK();
}

Status TaskStore::ReadState(TaskId id, StateRecord* state) const {
  std::string key = StateKey(id);
  std::string bytes;
  Status s;
  {
    std::shared_lock<std::shared_mutex> lock(db_mutex_);
    if (!db_) return StoreClosed(options_.path);
    s = GetStoredLocked(ColumnFamily::kTasks, key, &bytes, nullptr);
  }
  if (s.IsNotFound()) return TaskMissing(id);
  if (s.ok()) s = OpenValue(key, &bytes);
  if (s.ok()) s = DecodeState(id, bytes, state);
  return s;
}

Status TaskStore::GetEntry(ColumnFamily family, std::string_view key,
                           std::string* value,
                           const rocksdb::Snapshot* snapshot) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  return GetEntryLocked(family, key, value, snapshot);
}

Status TaskStore::GetEntryLocked(ColumnFamily family, std::string_view key,
                                 std::string* value,
                                 const rocksdb::Snapshot* snapshot) const {
  if (Status s = CheckFamily(family); !s.ok()) return s;
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::Status rs = db_->Get(ro, Handle(family), AsSlice(key), value);
  if (rs.IsNotFound()) return Status::NotFound(ColumnFamilyName(family));
  return FromRocks(rs, std::string("reading ") + ColumnFamilyName(family));
}

Status TaskStore::GetStoredLocked(ColumnFamily family, std::string_view key,
                                  std::string* bytes,
                                  const rocksdb::Snapshot* snapshot) const {
  if (Status s = CheckFamily(family); !s.ok()) return s;
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::Status rs = db_->Get(ro, Handle(family), AsSlice(key), bytes);
  if (rs.IsNotFound()) {
    return Status::NotFound(TaskValueName(key) + " is not in " +
                            ColumnFamilyName(family));
  }
  return FromRocks(rs, "reading " + TaskValueName(key));
}

Status TaskStore::Scan(ColumnFamily family, std::string_view prefix,
                       std::string_view start, const IndexVisitor& visit,
                       const rocksdb::Snapshot* snapshot) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  return ScanLocked(family, prefix, start, visit, snapshot);
}

Status TaskStore::ScanLocked(ColumnFamily family, std::string_view prefix,
                             std::string_view start, const IndexVisitor& visit,
                             const rocksdb::Snapshot* snapshot) const {
  if (Status s = CheckFamily(family); !s.ok()) return s;
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  // The upper bound stops the iterator at the prefix's end, even over
  // deletions past it.
  std::string upper = PrefixSuccessor(prefix);
  rocksdb::Slice upper_slice(upper);
  if (!upper.empty()) ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, Handle(family)));
  std::string_view from = start > prefix ? start : prefix;
  for (it->Seek(AsSlice(from)); it->Valid(); it->Next()) {
    std::string_view key = AsView(it->key());
    if (key.substr(0, prefix.size()) != prefix) break;
    if (!visit(key, AsView(it->value()))) break;
  }
  return FromRocks(it->status(),
                   std::string("scanning ") + ColumnFamilyName(family));
}

Status TaskStore::ScanReverseLocked(ColumnFamily family,
                                    std::string_view prefix,
                                    std::string_view before,
                                    const IndexVisitor& visit,
                                    const rocksdb::Snapshot* snapshot) const {
  if (Status s = CheckFamily(family); !s.ok()) return s;
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  // Bounds on both sides keep the iterator inside the prefix, even over
  // deletions next to it.
  std::string upper = PrefixSuccessor(prefix);
  rocksdb::Slice lower_slice(AsSlice(prefix));
  rocksdb::Slice upper_slice(upper);
  ro.iterate_lower_bound = &lower_slice;
  if (!upper.empty()) ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, Handle(family)));
  if (before.empty() || (!upper.empty() && before >= upper)) {
    it->SeekToLast();
  } else {
    // The last key <= before; `before` itself is excluded.
    it->SeekForPrev(AsSlice(before));
    if (it->Valid() && AsView(it->key()) == before) it->Prev();
  }
  for (; it->Valid(); it->Prev()) {
    std::string_view key = AsView(it->key());
    if (key.substr(0, prefix.size()) != prefix) break;
    if (!visit(key, AsView(it->value()))) break;
  }
  return FromRocks(it->status(), std::string("scanning ") +
                                     ColumnFamilyName(family) + " backwards");
}

Status TaskStore::ScanTasks(ColumnFamily family, TaskId from,
                            const TaskVisitor& visit,
                            const rocksdb::Snapshot* snapshot) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  return ScanTasksLocked(family, from, visit, snapshot);
}

Status TaskStore::ScanTasksLocked(ColumnFamily family, TaskId from,
                                  const TaskVisitor& visit,
                                  const rocksdb::Snapshot* snapshot) const {
  if (family != ColumnFamily::kTasks && family != ColumnFamily::kCorrupt) {
    return Status::InvalidArgument("only tasks and corrupt hold tasks");
  }
  TaskBytes task;
  TaskId current = 0;
  bool have = false;
  bool stopped = false;
  Status opened;
  auto emit = [&] {
    if (have && !visit(current, task, opened)) stopped = true;
    have = false;
    task.Clear();
    opened = Status::OK();
    return !stopped;
  };
  Status s = ScanLocked(
      family, "", TaskPrefix(from),
      [&](std::string_view key, std::string_view value) {
        TaskId id = 0;
        TaskValueKind kind;
        uint32_t number = 0;
        if (!DecodeTaskKey(key, &id, &kind, &number)) return true;
        if (have && id != current && !emit()) return false;
        current = id;
        have = true;
        std::string* target = nullptr;
        switch (kind) {
          case TaskValueKind::kSpec:
            target = task.mutable_spec();
            task.set_has_spec();
            break;
          case TaskValueKind::kState:
            target = task.mutable_state();
            task.set_has_state();
            break;
          case TaskValueKind::kFailure:
            target = task.AddFailure();
            break;
        }
        target->assign(value);
        Status o = OpenValue(key, target);
        if (!o.ok() && opened.ok()) opened = o;
        return true;
      },
      snapshot);
  if (!s.ok()) return s;
  if (!stopped) emit();
  return Status::OK();
}

TaskStore::ReadView::ReadView(const TaskStore* store,
                              std::shared_lock<std::shared_mutex> lock)
    : store_(store), lock_(std::move(lock)) {
  if (!store_->db_) return;
  open_ = true;
  if (store_->options_.read_only) {
    catch_up_lock_ =
        std::shared_lock<std::shared_mutex>(store_->catch_up_mutex_);
  } else {
    snapshot_ = store_->db_->GetSnapshot();
  }
}

TaskStore::ReadView::~ReadView() {
  if (snapshot_ != nullptr) store_->db_->ReleaseSnapshot(snapshot_);
}

Status TaskStore::ReadView::GetTask(TaskId id, TaskBytes* task) const {
  if (!open_) return StoreClosed(store_->options_.path);
  Status opened;
  Status s =
      store_->GetTaskLocked(ColumnFamily::kTasks, id, task, snapshot_, &opened);
  return s.ok() ? opened : s;
}

Status TaskStore::ReadView::GetEntry(ColumnFamily family, std::string_view key,
                                     std::string* value) const {
  if (!open_) return StoreClosed(store_->options_.path);
  return store_->GetEntryLocked(family, key, value, snapshot_);
}

Status TaskStore::ReadView::Scan(ColumnFamily family, std::string_view prefix,
                                 std::string_view start,
                                 const IndexVisitor& visit) const {
  if (!open_) return StoreClosed(store_->options_.path);
  return store_->ScanLocked(family, prefix, start, visit, snapshot_);
}

Status TaskStore::ReadView::ScanReverse(ColumnFamily family,
                                        std::string_view prefix,
                                        std::string_view before,
                                        const IndexVisitor& visit) const {
  if (!open_) return StoreClosed(store_->options_.path);
  return store_->ScanReverseLocked(family, prefix, before, visit, snapshot_);
}

Status TaskStore::ReadView::ScanTasks(ColumnFamily family, TaskId from,
                                      const TaskVisitor& visit) const {
  if (!open_) return StoreClosed(store_->options_.path);
  return store_->ScanTasksLocked(family, from, visit, snapshot_);
}

Status TaskStore::ReadView::CountByStatus(
    std::array<uint64_t, kTaskStatusCount>* counts) const {
  std::string value;
  Status s = GetEntry(ColumnFamily::kMeta, kMetaWriterState, &value);
  if (s.IsNotFound()) {
    counts->fill(0);
    return Status::OK();
  }
  if (!s.ok()) return s;
  WriterStateValue writer;
  if (!DecodeWriterState(value, &writer)) {
    return Status::Corruption(std::string("meta ") + kMetaWriterState +
                              " is malformed");
  }
  *counts = writer.counts;
  return Status::OK();
}

Status TaskStore::ReadView::CountByType(TypeCounts* counts) const {
  counts->clear();
  return Scan(
      ColumnFamily::kMeta, kTypeCountPrefix, "",
      [&](std::string_view key, std::string_view value) {
        std::string_view type;
        StatusCountArray by_status;
        if (DecodeTypeCountKey(key, &type) && GetCounts(&value, &by_status)) {
          (*counts)[std::string(type)] = by_status;
        }
        return true;
      });
}

std::unique_ptr<TaskStore::ReadView> TaskStore::NewReadView() const {
  return std::unique_ptr<ReadView>(
      new ReadView(this, std::shared_lock<std::shared_mutex>(db_mutex_)));
}

Status TaskStore::ForEachEntry(
    ColumnFamily family, std::string_view prefix,
    const std::function<Status(std::string_view, std::string_view)>& fn) const {
  Status inner;
  Status s =
      Scan(family, prefix, "", [&](std::string_view k, std::string_view v) {
        inner = fn(k, v);
        return inner.ok();
      });
  return inner.ok() ? s : inner;
}

// ---- Commit ----

namespace {

// One change to the index, gathered so that a batch's index writes go in
// key order (see WriteIndexOps).
struct IndexOp {
  std::string key;
  std::string value;
  bool remove = false;
};

// The index changes that turn `before`'s entries into `after`'s. Index
// entries are put once while absent and removed once while present: the
// contract of SingleDelete, whose tombstone vanishes when it meets its put,
// even in a flush, so a consumed queue leaves no tombstones behind.
void DiffIndex(const std::vector<IndexEntry>& before,
               const std::vector<IndexEntry>& after,
               std::vector<IndexOp>* ops) {
  for (const IndexEntry& old_entry : before) {
    auto same = std::find_if(after.begin(), after.end(), [&](const auto& e) {
      return e.key == old_entry.key;
    });
    if (same == after.end()) {
      ops->push_back({old_entry.key, "", true});
    } else if (same->value != old_entry.value) {
      // SingleDelete allows one put per key between deletes.
      ops->push_back({old_entry.key, "", true});
      ops->push_back({same->key, same->value, false});
    }
  }
  for (const IndexEntry& new_entry : after) {
    bool existed =
        std::any_of(before.begin(), before.end(),
                    [&](const auto& e) { return e.key == new_entry.key; });
    if (!existed) ops->push_back({new_entry.key, new_entry.value, false});
  }
}

// Index removals first, then puts: a key may change hands between two
// tasks of the batch (a dedup key, a waiting edge), and the new holder's
// put must come after the old holder's SingleDelete. A key is removed
// once, however many reasons the batch has; only a task set aside or taken
// back repeats a removal (`may_repeat`), so only then is the set kept.
// Within each pass the changes keep their order, task by task in id order,
// so that within each range (a status and type, a group) ids ascend, as the
// memtable insert hints want (IndexFrontTransform).
void WriteIndexOps(const std::vector<IndexOp>& ops, bool may_repeat,
                   rocksdb::ColumnFamilyHandle* index,
                   rocksdb::WriteBatch* batch) {
  std::unordered_set<std::string_view> removed;
  for (const IndexOp& op : ops) {
    if (op.remove && (!may_repeat || removed.insert(op.key).second)) {
      batch->SingleDelete(index, op.key);
    }
  }
  for (const IndexOp& op : ops) {
    if (!op.remove) batch->Put(index, op.key, op.value);
  }
}

// Changed per-type counts, as deltas by status: kept apart from the
// committed counts until the write succeeds.
using TypeDeltas = std::map<std::string, std::array<int64_t, kTaskStatusCount>>;

}  // namespace

const StateRecord* TaskStore::CachedState(TaskId id) const {
  return states_.Find(id);
}

// One Commit's write batch while it is staged, step by step, and the
// figures the store takes on once it is written. The steps write in the
// order Stage calls them, and the order matters where two of them touch
// the same key (see Stage).
class TaskStore::CommitBatch {
 public:
  CommitBatch(TaskStore* store, const WriteTxn& txn)
      : store_(*store),
        txn_(txn),
        tasks_(store->Handle(ColumnFamily::kTasks)),
        meta_(store->Handle(ColumnFamily::kMeta)),
        counts_(store->counts_) {}

  // Stages everything the transaction holds into the batch.
  Status Stage();
  rocksdb::WriteBatch* batch() { return &batch_; }
  // Once the batch is written: the store's figures and cached states
  // become the batch's.
  void Committed();

 private:
  Status StageResealed();
  Status StageReinstated();
  Status StageEntries();
  void StageIndexDiff(const WriteTxn::Entry& entry);
  Status EncodeValues(TaskId id, const WriteTxn::Entry& entry);
  void DeleteValues(TaskId id, const StateRecord& before);
  Status StageQuarantined();
  Status StageApp();
  void StageMeta();
  void StageTypeCounts();
  void Count(const StateRecord& state, int delta);
  Status PutValue(rocksdb::ColumnFamilyHandle* family, const std::string& key,
                  std::string_view plain);

  TaskStore& store_;
  const WriteTxn& txn_;
  rocksdb::ColumnFamilyHandle* const tasks_;
  rocksdb::ColumnFamilyHandle* const meta_;
  rocksdb::WriteBatch batch_;
  // Counts by status as of the batch, and per type the changes to them.
  StatusCountArray counts_;
  TypeDeltas type_deltas_;
  // The new counts of each type that changed, as the batch writes them.
  std::vector<std::pair<std::string, StatusCountArray>> type_updates_;
  uint64_t reserved_ids_ = 0;
  std::vector<IndexOp> index_ops_;
  // Scratch reused by every value of the batch: the sealed form, the
  // encoding.
  std::string sealed_;
  flatbuffers::FlatBufferBuilder builder_{512};
};

Status TaskStore::CommitBatch::Stage() {
  // Values sealed again under the current key, as committed: first, so
  // that whatever the batch stages for the same task (a transition, a
  // deletion, setting it aside or taking it back) comes after them and wins.
  Status s = StageResealed();
  if (!s.ok()) return s;
  // Before the entries: a task taken back gets its spec and failures back
  // here, and its entry then adds failures and trims the history, which
  // must come after.
  s = StageReinstated();
  if (!s.ok()) return s;
  s = StageEntries();
  if (!s.ok()) return s;
  s = StageQuarantined();
  if (!s.ok()) return s;
  WriteIndexOps(index_ops_,
                !txn_.quarantined_.empty() || !txn_.reinstated_.empty(),
                store_.Handle(ColumnFamily::kIndex), &batch_);
  s = StageApp();
  if (!s.ok()) return s;
  StageMeta();
  return Status::OK();
}

// The application's writes (spool/app_batch.h), in the same batch as the
// tasks they were committed with.
Status TaskStore::CommitBatch::StageApp() {
  rocksdb::ColumnFamilyHandle* app = store_.Handle(ColumnFamily::kApp);
  for (const auto& [key, value] : txn_.app_) {
    if (!value) {
      batch_.Delete(app, AsSlice(key));
      continue;
    }
    Status s = store_.StoredAppValue(key, *value, &sealed_);
    if (!s.ok()) return s;
    batch_.Put(app, AsSlice(key), AsSlice(sealed_));
  }
  return Status::OK();
}

// Stages `plain` under `key`, sealed in an encrypted store.
Status TaskStore::CommitBatch::PutValue(rocksdb::ColumnFamilyHandle* family,
                                        const std::string& key,
                                        std::string_view plain) {
  std::string_view value;
  Status s = store_.StoredValue(key, plain, &sealed_, &value);
  if (s.ok()) batch_.Put(family, key, AsSlice(value));
  return s;
}

// Re-encryption: each value of the task opened and sealed again, where it
// is (in `tasks`, or in `corrupt` for a task set aside).
Status TaskStore::CommitBatch::StageResealed() {
  for (const auto& [id, set_aside] : txn_.resealed_) {
    ColumnFamily family =
        set_aside ? ColumnFamily::kCorrupt : ColumnFamily::kTasks;
    Status inner;
    Status s = store_.ScanLocked(
        family, TaskPrefix(id), "",
        [&](std::string_view key, std::string_view value) {
          std::string plain(value);
          inner = store_.OpenValue(key, &plain);
          if (inner.ok()) {
            inner = PutValue(store_.Handle(family), std::string(key), plain);
          }
          return inner.ok();
        },
        nullptr);
    if (!s.ok()) return s;
    if (!inner.ok()) return inner;
  }
  return Status::OK();
}

// Tasks back from `corrupt`. The index entries they had when set aside may
// still be there (the next open drops them): they are removed, so that the
// entries the new state implies are the only ones. The spec and failures
// move back as stored; the state is staged with the entries.
Status TaskStore::CommitBatch::StageReinstated() {
  for (const StateRecord& stored : txn_.reinstated_) {
    for (const IndexEntry& e : IndexEntriesOf(stored)) {
      std::string value;
      Status s =
          store_.GetEntryLocked(ColumnFamily::kIndex, e.key, &value, nullptr);
      if (s.ok()) {
        index_ops_.push_back({e.key, "", true});
      } else if (!s.IsNotFound()) {
        return s;
      }
    }
    rocksdb::ColumnFamilyHandle* corrupt =
        store_.Handle(ColumnFamily::kCorrupt);
    Status s = store_.ScanLocked(
        ColumnFamily::kCorrupt, TaskPrefix(stored.id), "",
        [&](std::string_view key, std::string_view value) {
          batch_.Delete(corrupt, AsSlice(key));
          TaskId id;
          TaskValueKind kind;
          uint32_t number;
          if (DecodeTaskKey(key, &id, &kind, &number) &&
              kind != TaskValueKind::kState) {
            batch_.Put(tasks_, AsSlice(key), AsSlice(value));
          }
          return true;
        },
        nullptr);
    if (!s.ok()) return s;
    // It may still be counted from before it was set aside.
    batch_.Put(meta_, kMetaCountsDirty, "");
  }
  return Status::OK();
}

// The staged tasks: their index changes, their counts, their values.
Status TaskStore::CommitBatch::StageEntries() {
  // In id order, so that the memtable inserts of a batch go forward.
  std::vector<TaskId> ids = txn_.order_;
  std::sort(ids.begin(), ids.end());
  for (TaskId id : ids) {
    const WriteTxn::Entry& entry = txn_.entries_.at(id);
    StageIndexDiff(entry);
    if (entry.after) {
      Status s = EncodeValues(id, entry);
      if (!s.ok()) return s;
    } else if (entry.before) {
      DeleteValues(id, *entry.before);
    }
  }
  return Status::OK();
}

// Index entries follow from the state alone, so the change from the state
// before to the state after is all the index needs; the counts move with
// them.
void TaskStore::CommitBatch::StageIndexDiff(const WriteTxn::Entry& entry) {
  std::vector<IndexEntry> before;
  std::vector<IndexEntry> after;
  if (entry.before) {
    before = IndexEntriesOf(*entry.before);
    Count(*entry.before, -1);
  }
  if (entry.after) {
    after = IndexEntriesOf(*entry.after);
    Count(*entry.after, +1);
  }
  DiffIndex(before, after, &index_ops_);
}

// A staged task's new values: the spec once, at enqueue; the state; and the
// failures it recorded, numbered after those it had. The history keeps the
// last kMaxFailureHistory, so each failure past them drops the oldest.
Status TaskStore::CommitBatch::EncodeValues(TaskId id,
                                            const WriteTxn::Entry& entry) {
  Status s;
  if (entry.spec) {
    EncodeSpec(*entry.spec, &builder_);
    s = PutValue(tasks_, SpecKey(id), BuilderBytes(builder_));
  }
  if (s.ok()) {
    EncodeState(*entry.after, &builder_);
    s = PutValue(tasks_, StateKey(id), BuilderBytes(builder_));
  }
  uint32_t number = entry.failures_before;
  for (size_t i = 0; s.ok() && i < entry.failures.size(); ++i, ++number) {
    EncodeFailure(entry.failures[i], &builder_);
    s = PutValue(tasks_, FailureKey(id, number), BuilderBytes(builder_));
    if (number >= kMaxFailureHistory) {
      batch_.Delete(tasks_, FailureKey(id, number - kMaxFailureHistory));
    }
  }
  return s;
}

// A deleted task's values: only the failures its history still keeps
// exist, so only those are deleted.
void TaskStore::CommitBatch::DeleteValues(TaskId id,
                                          const StateRecord& before) {
  batch_.Delete(tasks_, SpecKey(id));
  batch_.Delete(tasks_, StateKey(id));
  uint32_t total = before.failures_total;
  for (uint32_t n = FirstKeptFailure(total); n < total; ++n) {
    batch_.Delete(tasks_, FailureKey(id, n));
  }
}

// Tasks whose state could not be read: set aside, with the index entries
// the writer knows of. The state cannot say which others it has, nor what
// it counted as, so the next open repairs both.
Status TaskStore::CommitBatch::StageQuarantined() {
  for (const auto& [id, known] : txn_.quarantined_) {
    Status s = store_.StageSetAside(id, &batch_);
    if (!s.ok()) return s;
    for (const std::string& key : known) index_ops_.push_back({key, "", true});
    batch_.Put(meta_, kMetaCountsDirty, "");
  }
  return Status::OK();
}

// Counts never wrap below zero: a drift is fixed by the next rebuild, and
// a wrapped count would be believed.
void TaskStore::CommitBatch::Count(const StateRecord& state, int delta) {
  auto status = static_cast<size_t>(state.status);
  uint64_t& c = counts_[status];
  if (delta > 0 || c > 0) c += delta;
  type_deltas_[state.type][status] += delta;
}

void TaskStore::CommitBatch::StageMeta() {
  for (const auto& [key, value] : txn_.meta_) {
    if (value.empty()) {
      batch_.Delete(meta_, key);
    } else {
      batch_.Put(meta_, key, value);
    }
  }
  // The runtime counts ids on from reserved_ids() after a restart, so the
  // stored reservation must stay ahead of every id handed out: at least
  // half a block of headroom, renewed a block at a time.
  reserved_ids_ = store_.reserved_ids_;
  if (txn_.max_id_ + kIdReservationBlock / 2 >= store_.reserved_ids_) {
    reserved_ids_ = txn_.max_id_ + kIdReservationBlock;
  }
  StageTypeCounts();
  // Numbered, so that after a failure the writer can tell from the stored
  // number whether this batch reached the disk anyway.
  WriterStateValue writer{store_.committed_batches_ + 1, txn_.next_sequence_,
                          reserved_ids_, counts_};
  batch_.Put(meta_, kMetaWriterState, EncodeWriterState(writer));
}

// New per-type counts, one value per type that changed; a type with no
// tasks left loses its entry, so that meta lists only the types in use.
void TaskStore::CommitBatch::StageTypeCounts() {
  for (const auto& [type, deltas] : type_deltas_) {
    auto committed = store_.type_counts_.find(type);
    auto current = committed != store_.type_counts_.end() ? committed->second
                                                          : StatusCountArray{};
    auto next = current;
    bool any = false;
    for (size_t i = 0; i < kTaskStatusCount; ++i) {
      int64_t value = static_cast<int64_t>(current[i]) + deltas[i];
      next[i] = value < 0 ? 0 : static_cast<uint64_t>(value);
      any |= next[i] != 0;
    }
    if (next == current) continue;
    if (any) {
      batch_.Put(meta_, TypeCountKey(type), EncodeCounts(next));
    } else {
      batch_.Delete(meta_, TypeCountKey(type));
    }
    type_updates_.emplace_back(type, next);
  }
}

void TaskStore::CommitBatch::Committed() {
  ++store_.committed_batches_;
  store_.counts_ = counts_;
  for (auto& [type, next] : type_updates_) {
    if (next == StatusCountArray{}) {
      store_.type_counts_.erase(type);
    } else {
      store_.type_counts_[type] = next;
    }
  }
  store_.next_sequence_ = txn_.next_sequence_;
  store_.reserved_ids_ = reserved_ids_;
  for (const auto& [id, entry] : txn_.entries_) {
    if (entry.after) {
      store_.states_.Committed(*entry.after);
    } else {
      store_.states_.Erase(id);
    }
  }
  for (const auto& [id, known] : txn_.quarantined_) store_.states_.Erase(id);
}

Status TaskStore::Commit(WriteTxn* txn, const BeforeWrite& before_write) {
  if (options_.read_only) return ReadOnlyStore(options_.path, "Commit");
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  CommitBatch commit(this, *txn);
  Status s = commit.Stage();
  if (!s.ok()) return s;
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  // The write-ahead log's time, from the perf context, only when asked for
  // (StoreOptions::time_wal): perf timing times far more than the log
  // inside a Write and costs the writer about 15 % CPU per drained task
  // (docs/experiments.md, entry 22). On for this one call, then back to
  // the thread's level (DisablePerfCountersOnThisThread).
  rocksdb::PerfLevel level = rocksdb::PerfLevel::kDisable;
  uint64_t wal_before = 0;
  if (options_.time_wal) {
    level = rocksdb::GetPerfLevel();
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableTimeExceptForMutex);
    wal_before = rocksdb::get_perf_context()->write_wal_time;
  }
  if (before_write) before_write(commit.batch()->Data());
  s = FromRocks(db_->Write(wo, commit.batch()), "committing a write batch");
  if (options_.time_wal) {
    last_commit_wal_nanos_ =
        rocksdb::get_perf_context()->write_wal_time - wal_before;
    rocksdb::SetPerfLevel(level);
  }
  if (!s.ok()) {
    // The batch may have landed (the sync failed after the write): what
    // was cached may be stale either way.
    states_.Clear();
    return s;
  }
  commit.Committed();
  return Status::OK();
}

Status TaskStore::Flush() {
  if (options_.read_only) return ReadOnlyStore(options_.path, "Flush");
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  rocksdb::FlushOptions fo;
  fo.wait = true;
  std::vector<rocksdb::ColumnFamilyHandle*> families(handles_.begin(),
                                                     handles_.end());
  return FromRocks(db_->Flush(fo, families), "flushing memtables");
}

Status TaskStore::PutRawForTesting(std::string_view key,
                                   std::string_view bytes) {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  states_.Clear();
  side_writes_.fetch_add(1);
  return FromRocks(
      db_->Put(wo, Handle(ColumnFamily::kTasks), AsSlice(key), AsSlice(bytes)),
      "writing a raw value");
}

// ---- WriteTxn ----

WriteTxn::WriteTxn(TaskStore* store)
    : store_(store), next_sequence_(store->next_sequence_) {}

Status WriteTxn::GetState(TaskId id, StateRecord* state) {
  if (auto it = entries_.find(id); it != entries_.end()) {
    if (!it->second.after) return TaskMissing(id);
    *state = *it->second.after;
    return Status::OK();
  }
  if (auto it = reads_.find(id); it != reads_.end()) {
    *state = it->second;
    return Status::OK();
  }
  if (const StateRecord* cached = store_->CachedState(id)) {
    *state = *cached;
    reads_.emplace(id, *state);
    return Status::OK();
  }
  Status s = store_->ReadState(id, state);
  if (!s.ok()) return s;
  reads_.emplace(id, *state);
  return Status::OK();
}

Status WriteTxn::Prefetch(const std::vector<TaskId>& ids) {
  std::vector<std::string> keys;
  std::vector<rocksdb::Slice> slices;
  keys.reserve(ids.size());
  for (TaskId id : ids) {
    if (entries_.count(id) != 0 || reads_.count(id) != 0) continue;
    keys.push_back(StateKey(id));
  }
  if (keys.empty()) return Status::OK();
  for (const std::string& key : keys) slices.emplace_back(key);
  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  {
    std::shared_lock<std::shared_mutex> lock(store_->db_mutex_);
    if (!store_->db_) return StoreClosed(store_->options_.path);
    store_->db_->MultiGet(rocksdb::ReadOptions(),
                          store_->Handle(ColumnFamily::kTasks), keys.size(),
                          slices.data(), values.data(), statuses.data());
  }
  std::string bytes;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) {
      return FromRocks(statuses[i], "reading " + TaskValueName(keys[i]));
    }
    TaskId id = 0;
    TaskValueKind kind;
    uint32_t number = 0;
    if (!DecodeTaskKey(keys[i], &id, &kind, &number)) continue;
    bytes.assign(values[i].data(), values[i].size());
    StateRecord state;
    if (store_->OpenValue(keys[i], &bytes).ok() &&
        DecodeState(id, bytes, &state).ok()) {
      reads_.emplace(id, std::move(state));
    }
  }
  return Status::OK();
}

void WriteTxn::RestageIndexes(const StateRecord* previous,
                              const StateRecord* next) {
  if (previous != nullptr &&
      (!previous->stored_group.empty() || !previous->stored_dedup_key.empty() ||
       previous->status == TaskStatus::kWaiting)) {
    for (IndexEntry& e : IndexEntriesOf(*previous)) {
      if (IsOverlaid(e.key)) index_overlay_[std::move(e.key)] = std::nullopt;
    }
  }
  if (next != nullptr &&
      (!next->stored_group.empty() || !next->stored_dedup_key.empty() ||
       next->status == TaskStatus::kWaiting)) {
    for (IndexEntry& e : IndexEntriesOf(*next)) {
      if (IsOverlaid(e.key)) {
        index_overlay_[std::move(e.key)] = std::move(e.value);
      }
    }
  }
}

WriteTxn::Entry& WriteTxn::Stage(TaskId id, std::optional<StateRecord> before) {
  order_.push_back(id);
  Entry& entry = entries_[id];
  entry.before = std::move(before);
  if (entry.before) {
    entry.failures_before = entry.before->failures_total;
    --staged_counts_[static_cast<size_t>(entry.before->status)];
  }
  return entry;
}

void WriteTxn::Insert(SpecRecord spec, StateRecord state) {
  TaskId id = state.id;
  NoteId(id);
  RestageIndexes(nullptr, &state);
  Entry& entry = Stage(id, std::nullopt);
  ++staged_counts_[static_cast<size_t>(state.status)];
  entry.spec = std::move(spec);
  entry.failures = std::move(state.new_failures);
  state.new_failures.clear();
  entry.after = std::move(state);
}

void WriteTxn::Update(StateRecord state) {
  TaskId id = state.id;
  Entry* entry = nullptr;
  if (auto it = entries_.find(id); it != entries_.end()) {
    entry = &it->second;
    RestageIndexes(entry->after ? &*entry->after : nullptr, &state);
    if (entry->after) {
      --staged_counts_[static_cast<size_t>(entry->after->status)];
    }
  } else {
    auto read = reads_.find(id);
    assert(read != reads_.end() && "Update requires a prior GetState");
    RestageIndexes(&read->second, &state);
    StateRecord before = std::move(read->second);
    reads_.erase(read);
    entry = &Stage(id, std::move(before));
  }
  ++staged_counts_[static_cast<size_t>(state.status)];
  for (FailureEntry& f : state.new_failures) {
    entry->failures.push_back(std::move(f));
  }
  state.new_failures.clear();
  entry->after = std::move(state);
}

Status WriteTxn::ReplacePayload(TaskId id, std::string payload,
                                uint32_t payload_version) {
  auto it = entries_.find(id);
  assert(it != entries_.end() && it->second.after &&
         "ReplacePayload requires a prior Update");
  Entry& entry = it->second;
  if (!entry.spec) {
    std::string bytes;
    Status s = store_->GetSpec(id, &bytes);
    if (s.ok()) s = DecodeSpec(id, bytes, &entry.spec.emplace());
    if (!s.ok()) {
      entry.spec.reset();
      return s;
    }
  }
  entry.spec->payload = std::move(payload);
  entry.spec->payload_version = payload_version;
  return Status::OK();
}

void WriteTxn::Delete(TaskId id) {
  if (auto it = entries_.find(id); it != entries_.end()) {
    Entry& entry = it->second;
    RestageIndexes(entry.after ? &*entry.after : nullptr, nullptr);
    if (entry.after) {
      --staged_counts_[static_cast<size_t>(entry.after->status)];
    }
    entry.after.reset();
    entry.spec.reset();
    entry.failures.clear();
    return;
  }
  auto read = reads_.find(id);
  assert(read != reads_.end() && "Delete requires a prior GetState");
  RestageIndexes(&read->second, nullptr);
  StateRecord before = std::move(read->second);
  reads_.erase(read);
  Stage(id, std::move(before));
}

void WriteTxn::Quarantine(TaskId id, std::vector<std::string> known) {
  // Gone for the rest of the transaction: a later GetState finds it
  // missing, and nothing staged for it is written.
  if (entries_.count(id) != 0 || reads_.count(id) != 0) {
    Delete(id);
  } else {
    Stage(id, std::nullopt);
  }
  quarantined_.emplace_back(id, std::move(known));
}

void WriteTxn::Reinstate(StateRecord state, StateRecord as_stored) {
  TaskId id = state.id;
  reinstated_.push_back(std::move(as_stored));
  RestageIndexes(nullptr, &state);
  Entry& entry = Stage(id, std::nullopt);
  ++staged_counts_[static_cast<size_t>(state.status)];
  // The failures it gained on the way back (an interrupted attempt) go
  // after those it had when set aside, which move back as stored.
  entry.failures_before = state.failures_total -
                          static_cast<uint32_t>(std::min<size_t>(
                              state.new_failures.size(), state.failures_total));
  entry.failures = std::move(state.new_failures);
  state.new_failures.clear();
  entry.after = std::move(state);
}

void WriteTxn::Reseal(TaskId id, bool set_aside) {
  resealed_.emplace_back(id, set_aside);
}

uint64_t WriteTxn::MayHave(TaskStatus status) const {
  int64_t n = static_cast<int64_t>(store_->CountOf(status)) +
              std::max<int64_t>(staged_counts_[static_cast<size_t>(status)], 0);
  return static_cast<uint64_t>(n);
}

Status WriteTxn::GetIndex(std::string_view key, std::string* value) {
  auto it = index_overlay_.find(std::string(key));
  if (it != index_overlay_.end()) {
    if (!it->second) return Status::NotFound("index");
    *value = *it->second;
    return Status::OK();
  }
  return store_->GetEntry(ColumnFamily::kIndex, key, value);
}

Status WriteTxn::ScanIndex(std::string_view prefix, std::string_view start,
                           const IndexVisitor& visit) {
  std::string_view from = start > prefix ? start : prefix;
  // The staged entries under the prefix, in key order.
  auto first = index_overlay_.lower_bound(std::string(from));
  auto staged_end = first;
  while (staged_end != index_overlay_.end() &&
         std::string_view(staged_end->first).substr(0, prefix.size()) ==
             prefix) {
    ++staged_end;
  }
  // Merge them with the stored entries: a staged entry replaces (or, when
  // empty, hides) the stored one with the same key.
  auto staged = first;
  bool stopped = false;
  Status s = store_->Scan(
      ColumnFamily::kIndex, prefix, from,
      [&](std::string_view key, std::string_view value) {
        while (staged != staged_end && staged->first < key) {
          if (staged->second && !visit(staged->first, *staged->second)) {
            stopped = true;
            return false;
          }
          ++staged;
        }
        if (staged != staged_end && staged->first == key) {
          bool keep_going =
              !staged->second || visit(staged->first, *staged->second);
          ++staged;
          if (!keep_going) stopped = true;
          return keep_going;
        }
        if (!visit(key, value)) {
          stopped = true;
          return false;
        }
        return true;
      });
  if (!s.ok() || stopped) return s;
  for (; staged != staged_end; ++staged) {
    if (staged->second && !visit(staged->first, *staged->second)) break;
  }
  return Status::OK();
}

Status WriteTxn::GetMeta(std::string_view key, std::string* value) {
  if (auto it = meta_.find(std::string(key)); it != meta_.end()) {
    if (it->second.empty()) return Status::NotFound("meta value deleted");
    *value = it->second;
    return Status::OK();
  }
  return store_->GetEntry(ColumnFamily::kMeta, key, value);
}

void WriteTxn::PutMeta(std::string key, std::string value) {
  meta_[std::move(key)] = std::move(value);
}

}  // namespace spool::storage
