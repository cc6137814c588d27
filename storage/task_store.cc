#include "storage/task_store.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include <flatbuffers/flatbuffers.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_batch.h>

#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

constexpr const char* kFamilyNames[] = {
    "tasks",    "ready", "scheduled",  "running", "by_status", "by_type",
    "by_group", "dedup", "waiting_on", "meta",    "corrupt"};
static_assert(sizeof(kFamilyNames) / sizeof(kFamilyNames[0]) ==
              static_cast<size_t>(ColumnFamily::kCount));

constexpr const char* kMetaSchemaVersion = "schema_version";
constexpr const char* kMetaReservedIds = "reserved_ids";
constexpr const char* kMetaNextSequence = "next_sequence";
constexpr const char* kMetaCountsDirty = "counts_dirty";
constexpr const char* kMetaCommittedBatches = "committed_batches";

Status StoreClosed(const std::string& path) {
  return Status::IOError("storage " + path +
                         " is closed after a failure and could not be "
                         "reopened");
}

std::string CountKey(size_t status) {
  return "count/" +
         std::string(TaskStatusName(static_cast<TaskStatus>(status)));
}

std::string BigEndian64(uint64_t value) {
  std::string out;
  PutBigEndian64(&out, value);
  return out;
}

Status FromRocks(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return Status::OK();
  std::string msg = std::string(context) + ": " + s.ToString();
  if (s.IsNotFound()) return Status::NotFound(msg);
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsInvalidArgument()) return Status::InvalidArgument(msg);
  if (s.IsNotSupported()) return Status::NotSupported(msg);
  if (s.IsBusy() || s.IsTryAgain()) return Status::Busy(msg);
  return Status::IOError(msg);
}

// Index families are written only through IndexEntriesOf diffs: a key is put
// once while absent and deleted once while present. That is the contract of
// SingleDelete, whose tombstone vanishes when it meets its put, even in a
// flush, so a consumed queue leaves no tombstones for scans to skip.
bool IsIndexFamily(ColumnFamily family) {
  return family != ColumnFamily::kTasks && family != ColumnFamily::kMeta &&
         family != ColumnFamily::kCorrupt;
}

bool IsActive(TaskStatus status) { return !IsTerminal(status); }

rocksdb::ColumnFamilyOptions FamilyOptions(
    ColumnFamily family, const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions cf;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  // Records are fetched by id: a bloom filter saves a disk read on misses.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10, false));
  table.cache_index_and_filter_blocks = true;
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // Tasks are written and consumed quickly; small memtables keep the log to
  // replay after a crash short, and most index entries die in memory.
  cf.write_buffer_size = 16 << 20;
  if (IsIndexFamily(family)) {
    cf.compression = rocksdb::kNoCompression;
    // Compact files that are mostly deletions, so scans at open stay cheap.
    cf.table_properties_collector_factories.emplace_back(
        rocksdb::NewCompactOnDeletionCollectorFactory(128, 64, 0.5));
  } else if (family == ColumnFamily::kTasks) {
    cf.compression = rocksdb::kLZ4Compression;
  }
  return cf;
}

}  // namespace

const char* ColumnFamilyName(ColumnFamily family) {
  auto index = static_cast<size_t>(family);
  return index < static_cast<size_t>(ColumnFamily::kCount) ? kFamilyNames[index]
                                                           : "invalid";
}

std::vector<IndexEntry> IndexEntriesOf(const TaskRecord& record,
                                       const LookupTagger* tags) {
  auto stored = [tags](char domain, const std::string& value) {
    return tags == nullptr || value.empty() ? value : tags->Tag(domain, value);
  };
  std::string group = stored(kGroupTagDomain, record.group);
  std::vector<IndexEntry> entries;
  entries.reserve(4 + record.depends_on.size());
  switch (record.status) {
    case TaskStatus::kPending:
    case TaskStatus::kRetryScheduled: {
      std::string value =
          EncodeQueueValue({record.id, record.priority, record.type, group});
      if (record.next_attempt_us == 0) {
        entries.push_back({ColumnFamily::kReady,
                           EncodeReadyKey({record.priority, record.sequence}),
                           std::move(value)});
      } else {
        entries.push_back(
            {ColumnFamily::kScheduled,
             EncodeScheduledKey({record.next_attempt_us, record.sequence}),
             std::move(value)});
      }
      break;
    }
    case TaskStatus::kRunning:
      entries.push_back({ColumnFamily::kRunning, TaskKey(record.id), ""});
      break;
    case TaskStatus::kWaiting:
      for (TaskId dependency : record.depends_on) {
        entries.push_back({ColumnFamily::kWaitingOn,
                           WaitingIndexKey(dependency, record.id), ""});
      }
      break;
    default:
      break;
  }
  entries.push_back(
      {ColumnFamily::kByStatus, StatusIndexKey(record.status, record.id), ""});
  entries.push_back({ColumnFamily::kByType,
                     TypeIndexKey(record.type, record.status, record.id), ""});
  if (!group.empty()) {
    entries.push_back({ColumnFamily::kByGroup, GroupIndexKey(group, record.id),
                       std::string(1, static_cast<char>(record.status))});
  }
  if (!record.dedup_key.empty() && IsActive(record.status)) {
    entries.push_back({ColumnFamily::kDedup,
                       DedupIndexKey(stored(kDedupTagDomain, record.dedup_key)),
                       TaskKey(record.id)});
  }
  return entries;
}

TaskStore::TaskStore(const StoreOptions& options) : options_(options) {}

TaskStore::~TaskStore() { CloseDb(); }

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
}

Status TaskStore::Reopen() {
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
  std::unique_ptr<TaskStore> result(new TaskStore(options));
  Status s = result->OpenDb();
  if (!s.ok()) return s;
  s = result->LoadMeta();
  if (!s.ok()) return s;
  *store = std::move(result);
  return Status::OK();
}

Status TaskStore::OpenDb() {
  rocksdb::Env* env = options_.env;
  std::string path = options_.path;
  if (options_.durability == Durability::kMemory) {
    if (env == nullptr) {
      owned_env_.reset(rocksdb::NewMemEnv(rocksdb::Env::Default()));
      env = owned_env_.get();
    }
    // The in-memory file system cannot resolve relative paths.
    if (path.front() != '/') path = "/" + path;
  }
  rocksdb::DBOptions db_options;
  if (env != nullptr) db_options.env = env;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  // One writer thread: pipelining the WAL and memtable writes of concurrent
  // writers buys nothing and costs latency.
  db_options.enable_pipelined_write = false;
  // With several column families a rarely written one (meta, corrupt) pins
  // old logs; cap the total so they get flushed.
  db_options.max_total_wal_size = 64 << 20;
  // Reuse log files: an fdatasync of an overwritten file skips the metadata
  // write that an appended file needs (docs/experiments.md).
  db_options.recycle_log_file_num = 4;
  db_options.keep_log_file_num = 4;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.avoid_unnecessary_blocking_io = true;

  auto cache = rocksdb::NewLRUCache(64 << 20);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName,
                           rocksdb::ColumnFamilyOptions());
  for (size_t i = 0; i < static_cast<size_t>(ColumnFamily::kCount); ++i) {
    descriptors.emplace_back(
        kFamilyNames[i], FamilyOptions(static_cast<ColumnFamily>(i), cache));
  }

  // A directory written by a newer spool may hold families this one does not
  // know; say so instead of RocksDB's generic complaint.
  std::vector<std::string> existing;
  rocksdb::Options list_options(db_options, rocksdb::ColumnFamilyOptions());
  if (rocksdb::DB::ListColumnFamilies(list_options, path, &existing).ok()) {
    for (const std::string& name : existing) {
      bool known = name == rocksdb::kDefaultColumnFamilyName;
      for (const char* ours : kFamilyNames) known |= name == ours;
      if (!known) {
        return Status::NotSupported("storage directory " + options_.path +
                                    " has column family '" + name +
                                    "', unknown to this spool; it was written "
                                    "by a newer version");
      }
    }
  }

  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status rs =
      rocksdb::DB::Open(db_options, path, descriptors, &handles, &db);
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
  for (size_t i = 0; i < handles_.size(); ++i) handles_[i] = handles[i + 1];
  return Status::OK();
}

Status TaskStore::LoadMeta() {
  auto get = [this](const std::string& key, std::string* value) {
    return db_->Get(rocksdb::ReadOptions(), Handle(ColumnFamily::kMeta), key,
                    value);
  };
  std::string value;
  rocksdb::Status rs = get(kMetaSchemaVersion, &value);
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
  if (version > kSchemaVersion) {
    return Status::NotSupported(
        "storage directory " + options_.path +
        " was written by schema version " + std::to_string(version) +
        "; this spool reads up to version " + std::to_string(kSchemaVersion));
  }

  auto load_u64 = [&](const std::string& key, uint64_t* out) -> Status {
    std::string v;
    rocksdb::Status r = get(key, &v);
    if (r.IsNotFound()) return Status::OK();
    if (!r.ok()) return FromRocks(r, "reading meta " + key);
    if (v.size() != 8) {
      return Status::Corruption("meta " + key + " is malformed");
    }
    *out = GetBigEndian64(v.data());
    return Status::OK();
  };
  Status s = load_u64(kMetaReservedIds, &reserved_ids_);
  if (s.ok()) s = load_u64(kMetaNextSequence, &next_sequence_);
  if (s.ok()) s = load_u64(kMetaCommittedBatches, &committed_batches_);
  for (size_t i = 0; s.ok() && i < kTaskStatusCount; ++i) {
    s = load_u64(CountKey(i), &counts_[i]);
  }
  if (s.ok()) {
    type_counts_.clear();
    s = ScanLocked(
        ColumnFamily::kMeta, kTypeCountPrefix, "",
        [&](std::string_view key, std::string_view v) {
          std::string_view type;
          TaskStatus status;
          if (DecodeTypeCountKey(key, &type, &status) && v.size() == 8) {
            type_counts_[std::string(type)][static_cast<size_t>(status)] =
                GetBigEndian64(v.data());
          }
          return true;
        },
        nullptr);
  }
  if (s.ok()) s = LoadKeys();
  if (!s.ok()) return s;

  std::string dirty;
  if (!get(kMetaCountsDirty, &dirty).ok()) return Status::OK();
  s = RepairIndexes();
  if (!s.ok()) return s;
  return RebuildCounts();
}

namespace {

// Every index entry the verified records imply, by family.
using ExpectedIndexes = std::array<std::map<std::string, std::string>,
                                   static_cast<size_t>(ColumnFamily::kCount)>;

Status ExpectedFromRecords(
    const std::function<Status(
        const std::function<Status(TaskId, std::string_view)>&)>& for_each,
    const LookupTagger* tags, ExpectedIndexes* expected) {
  return for_each([&](TaskId id, std::string_view bytes) {
    TaskRecord record;
    if (DecodeRecord(id, bytes, &record).ok()) {
      for (IndexEntry& e : IndexEntriesOf(record, tags)) {
        (*expected)[static_cast<size_t>(e.family)][std::move(e.key)] =
            std::move(e.value);
      }
    }
    return Status::OK();
  });
}

}  // namespace

Status TaskStore::CheckIndexes(size_t* mismatches,
                               std::vector<std::string>* problems) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  return CheckIndexesLocked(mismatches, problems);
}

Status TaskStore::CheckIndexesLocked(size_t* mismatches,
                                     std::vector<std::string>* problems) const {
  ExpectedIndexes expected;
  Status s = ExpectedFromRecords(
      [this](const auto& fn) { return ForEachRecordLocked(fn); }, tagger(),
      &expected);
  if (!s.ok()) return s;
  *mismatches = 0;
  auto report = [&](ColumnFamily family, std::string_view what,
                    std::string_view key) {
    ++*mismatches;
    if (problems != nullptr && problems->size() < 20) {
      std::string hex;
      for (unsigned char c : key) {
        static const char* kDigits = "0123456789abcdef";
        hex.push_back(kDigits[c >> 4]);
        hex.push_back(kDigits[c & 15]);
      }
      problems->push_back(std::string(ColumnFamilyName(family)) + ": " +
                          std::string(what) + " " + hex);
    }
  };
  for (size_t f = 0; f < expected.size(); ++f) {
    auto family = static_cast<ColumnFamily>(f);
    if (!IsIndexFamily(family)) continue;
    auto& want = expected[f];
    s = ScanLocked(
        family, "", "",
        [&](std::string_view key, std::string_view value) {
          auto it = want.find(std::string(key));
          if (it == want.end()) {
            report(family, "entry without a record", key);
          } else {
            if (it->second != value) report(family, "wrong value for", key);
            want.erase(it);
          }
          return true;
        },
        nullptr);
    if (!s.ok()) return s;
    for (const auto& [key, value] : want) {
      report(family, "missing entry", key);
    }
  }
  return Status::OK();
}

Status TaskStore::RepairIndexes() {
  Status s = SetAsideUnreadable();
  if (!s.ok()) return s;
  ExpectedIndexes expected;
  s = ExpectedFromRecords(
      [this](const auto& fn) { return ForEachRecordLocked(fn); }, tagger(),
      &expected);
  if (!s.ok()) return s;
  rocksdb::WriteBatch batch;
  for (size_t f = 0; f < expected.size(); ++f) {
    auto family = static_cast<ColumnFamily>(f);
    if (!IsIndexFamily(family)) continue;
    auto& want = expected[f];
    s = ScanLocked(
        family, "", "",
        [&](std::string_view key, std::string_view value) {
          auto it = want.find(std::string(key));
          rocksdb::Slice k(key.data(), key.size());
          if (it == want.end()) {
            batch.SingleDelete(Handle(family), k);
          } else {
            if (it->second != value) {
              batch.SingleDelete(Handle(family), k);
              batch.Put(Handle(family), k, it->second);
            }
            want.erase(it);
          }
          return true;
        },
        nullptr);
    if (!s.ok()) return s;
    for (const auto& [key, value] : want) batch.Put(Handle(family), key, value);
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  return FromRocks(db_->Write(wo, &batch), "repairing indexes");
}

// A quarantined record's status and type were unknown, so the counts may be
// off: count again from the records.
Status TaskStore::RebuildCounts() {
  std::array<uint64_t, kTaskStatusCount> counts{};
  TypeCounts type_counts;
  std::string scratch;
  Status s = ForEachRecordLocked([&](TaskId id, std::string_view bytes) {
    const fb::TaskRecord* table = nullptr;
    bytes = AlignedRecordBytes(bytes, &scratch);
    if (VerifyRecord(id, bytes, &table).ok()) {
      auto status = static_cast<size_t>(table->status());
      counts[status]++;
      type_counts[table->type()->str()][status]++;
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  rocksdb::WriteBatch batch;
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    batch.Put(Handle(ColumnFamily::kMeta), CountKey(i), BigEndian64(counts[i]));
  }
  batch.DeleteRange(Handle(ColumnFamily::kMeta), kTypeCountPrefix,
                    PrefixSuccessor(kTypeCountPrefix));
  for (const auto& [type, by_status] : type_counts) {
    for (size_t i = 0; i < kTaskStatusCount; ++i) {
      if (by_status[i] == 0) continue;
      batch.Put(Handle(ColumnFamily::kMeta),
                TypeCountKey(type, static_cast<TaskStatus>(i)),
                BigEndian64(by_status[i]));
    }
  }
  batch.Delete(Handle(ColumnFamily::kMeta), kMetaCountsDirty);
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  s = FromRocks(db_->Write(wo, &batch), "rewriting counts");
  if (!s.ok()) return s;
  counts_ = counts;
  type_counts_ = std::move(type_counts);
  return Status::OK();
}

Status TaskStore::GetRaw(TaskId id, std::string* bytes,
                         const rocksdb::Snapshot* snapshot) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  return GetRawLocked(id, bytes, snapshot);
}

Status TaskStore::GetRawLocked(TaskId id, std::string* bytes,
                               const rocksdb::Snapshot* snapshot) const {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::Status rs =
      db_->Get(ro, Handle(ColumnFamily::kTasks), TaskKey(id), bytes);
  if (rs.IsNotFound()) {
    return Status::NotFound("task " + std::to_string(id) + " does not exist");
  }
  if (rs.ok() && encrypted()) return OpenRecord(id, bytes);
  return FromRocks(rs, "reading task " + std::to_string(id));
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
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::Status rs = db_->Get(ro, Handle(family),
                                rocksdb::Slice(key.data(), key.size()), value);
  if (rs.IsNotFound()) return Status::NotFound(ColumnFamilyName(family));
  return FromRocks(rs, std::string("reading ") + ColumnFamilyName(family));
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
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  // The upper bound stops the iterator at the prefix's end, even over
  // deletions past it.
  std::string upper = PrefixSuccessor(prefix);
  rocksdb::Slice upper_slice(upper);
  if (!upper.empty()) ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, Handle(family)));
  std::string_view from = start > prefix ? start : prefix;
  // Records are opened for the visitor; one that cannot be is skipped, as
  // lists skip it (GetRaw names it).
  bool open_records = family == ColumnFamily::kTasks && encrypted();
  std::string opened;
  for (it->Seek(rocksdb::Slice(from.data(), from.size())); it->Valid();
       it->Next()) {
    std::string_view key(it->key().data(), it->key().size());
    if (key.substr(0, prefix.size()) != prefix) break;
    std::string_view value(it->value().data(), it->value().size());
    TaskId id = 0;
    if (open_records) {
      opened.assign(value);
      if (!DecodeTaskKey(key, &id) || !OpenRecord(id, &opened).ok()) continue;
      value = opened;
    }
    if (!visit(key, value)) break;
  }
  return FromRocks(it->status(),
                   std::string("scanning ") + ColumnFamilyName(family));
}

TaskStore::ReadView::ReadView(const TaskStore* store,
                              std::shared_lock<std::shared_mutex> lock)
    : store_(store), lock_(std::move(lock)) {
  if (store_->db_) snapshot_ = store_->db_->GetSnapshot();
}

TaskStore::ReadView::~ReadView() {
  if (snapshot_ != nullptr) store_->db_->ReleaseSnapshot(snapshot_);
}

Status TaskStore::ReadView::GetRaw(TaskId id, std::string* bytes) const {
  if (snapshot_ == nullptr) return StoreClosed(store_->options_.path);
  return store_->GetRawLocked(id, bytes, snapshot_);
}

Status TaskStore::ReadView::GetEntry(ColumnFamily family, std::string_view key,
                                     std::string* value) const {
  if (snapshot_ == nullptr) return StoreClosed(store_->options_.path);
  return store_->GetEntryLocked(family, key, value, snapshot_);
}

Status TaskStore::ReadView::Scan(ColumnFamily family, std::string_view prefix,
                                 std::string_view start,
                                 const IndexVisitor& visit) const {
  if (snapshot_ == nullptr) return StoreClosed(store_->options_.path);
  return store_->ScanLocked(family, prefix, start, visit, snapshot_);
}

Status TaskStore::ReadView::CountByStatus(
    std::array<uint64_t, kTaskStatusCount>* counts) const {
  if (snapshot_ == nullptr) return StoreClosed(store_->options_.path);
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot_;
  std::vector<rocksdb::ColumnFamilyHandle*> families(
      kTaskStatusCount, store_->Handle(ColumnFamily::kMeta));
  std::vector<std::string> key_storage;
  std::vector<rocksdb::Slice> keys;
  key_storage.reserve(kTaskStatusCount);
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    key_storage.push_back(CountKey(i));
  }
  for (const auto& k : key_storage) keys.emplace_back(k);
  std::vector<std::string> values;
  std::vector<rocksdb::Status> statuses =
      store_->db_->MultiGet(ro, families, keys, &values);
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    if (statuses[i].IsNotFound()) {
      (*counts)[i] = 0;
    } else if (!statuses[i].ok()) {
      return FromRocks(statuses[i], "reading counts");
    } else if (values[i].size() != 8) {
      return Status::Corruption("meta " + key_storage[i] + " is malformed");
    } else {
      (*counts)[i] = GetBigEndian64(values[i].data());
    }
  }
  return Status::OK();
}

Status TaskStore::ReadView::CountByType(TypeCounts* counts) const {
  counts->clear();
  return Scan(
      ColumnFamily::kMeta, kTypeCountPrefix, "",
      [&](std::string_view key, std::string_view value) {
        std::string_view type;
        TaskStatus status;
        if (DecodeTypeCountKey(key, &type, &status) && value.size() == 8) {
          uint64_t n = GetBigEndian64(value.data());
          if (n != 0) {
            (*counts)[std::string(type)][static_cast<size_t>(status)] = n;
          }
        }
        return true;
      });
}

std::unique_ptr<TaskStore::ReadView> TaskStore::NewReadView() const {
  return std::unique_ptr<ReadView>(
      new ReadView(this, std::shared_lock<std::shared_mutex>(db_mutex_)));
}

Status TaskStore::ForEachIndexEntry(
    ColumnFamily family,
    const std::function<Status(std::string_view, std::string_view)>& fn) const {
  Status inner;
  Status s = Scan(family, "", "", [&](std::string_view k, std::string_view v) {
    inner = fn(k, v);
    return inner.ok();
  });
  return inner.ok() ? s : inner;
}

Status TaskStore::ForEachRecord(
    const std::function<Status(TaskId, std::string_view)>& fn) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  return ForEachRecordLocked(fn);
}

Status TaskStore::ForEachRecordLocked(
    const std::function<Status(TaskId, std::string_view)>& fn) const {
  Status inner;
  Status s = ScanLocked(
      ColumnFamily::kTasks, "", "",
      [&](std::string_view key, std::string_view value) {
        TaskId id = 0;
        if (!DecodeTaskKey(key, &id)) {
          inner = Status::Corruption("tasks family holds a malformed key");
        } else {
          inner = fn(id, value);
        }
        return inner.ok();
      },
      nullptr);
  return inner.ok() ? s : inner;
}

namespace {

bool SameSlot(const IndexEntry& a, const IndexEntry& b) {
  return a.family == b.family && a.key == b.key;
}

}  // namespace

Status TaskStore::Commit(WriteTxn* txn) {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  rocksdb::WriteBatch batch;
  auto counts = counts_;
  // Changed per-type counts, as deltas, applied only if the write succeeds.
  std::map<std::string, std::array<int64_t, kTaskStatusCount>> type_deltas;
  auto count = [&](const TaskRecord& record, int delta) {
    auto status = static_cast<size_t>(record.status);
    uint64_t& c = counts[status];
    if (delta > 0 || c > 0) c += delta;  // never wrap; a rebuild fixes drift
    type_deltas[record.type][status] += delta;
  };
  auto put_index = [&](const IndexEntry& e) {
    batch.Put(Handle(e.family), e.key, e.value);
  };
  auto delete_index = [&](const IndexEntry& e) {
    batch.SingleDelete(Handle(e.family), e.key);
  };

  // Records back from `corrupt`. The index entries they had when set aside
  // may still be there (the next open drops them): they go first, so that
  // the entries put below are the only ones.
  for (const TaskRecord& stored : txn->reinstated_) {
    for (const IndexEntry& e : IndexEntriesOf(stored, tagger())) {
      std::string value;
      Status s = GetEntryLocked(e.family, e.key, &value, nullptr);
      if (s.ok()) {
        delete_index(e);
      } else if (!s.IsNotFound()) {
        return s;
      }
    }
    batch.Delete(Handle(ColumnFamily::kCorrupt), TaskKey(stored.id));
    // It may still be counted from before it was set aside.
    batch.Put(Handle(ColumnFamily::kMeta), kMetaCountsDirty, "");
  }

  flatbuffers::FlatBufferBuilder builder(1024);
  std::string sealed;
  for (const auto& [id, entry] : txn->entries_) {
    std::vector<IndexEntry> before;
    std::vector<IndexEntry> after;
    if (entry.before) {
      before = IndexEntriesOf(*entry.before, tagger());
      count(*entry.before, -1);
    }
    if (entry.after) {
      after = IndexEntriesOf(*entry.after, tagger());
      count(*entry.after, +1);
    }
    for (const IndexEntry& old_entry : before) {
      auto same = std::find_if(after.begin(), after.end(), [&](const auto& e) {
        return SameSlot(e, old_entry);
      });
      if (same == after.end()) {
        delete_index(old_entry);
      } else if (same->value != old_entry.value) {
        // SingleDelete allows one put per key between deletes.
        delete_index(old_entry);
        put_index(*same);
      }
    }
    for (const IndexEntry& new_entry : after) {
      bool existed =
          std::any_of(before.begin(), before.end(),
                      [&](const auto& e) { return SameSlot(e, new_entry); });
      if (!existed) put_index(new_entry);
    }
    if (entry.after) {
      EncodeRecord(*entry.after, &builder);
      std::string_view value;
      Status s = StoredValue(id,
                             std::string_view(reinterpret_cast<const char*>(
                                                  builder.GetBufferPointer()),
                                              builder.GetSize()),
                             &sealed, &value);
      if (!s.ok()) return s;
      batch.Put(Handle(ColumnFamily::kTasks), TaskKey(id),
                rocksdb::Slice(value.data(), value.size()));
    } else if (entry.before) {
      batch.Delete(Handle(ColumnFamily::kTasks), TaskKey(id));
    }
  }

  for (auto& [id, known] : txn->quarantined_) {
    // As stored: a sealed record stays sealed. Plaintext bytes (accepted
    // from before encryption) are sealed on the way, so that the copy does
    // not outlive the original in plaintext.
    std::string bytes;
    Status s = GetStoredLocked(ColumnFamily::kTasks, id, &bytes, nullptr);
    if (s.ok() && encrypted() && !IsSealed(bytes)) {
      std::string_view value;
      s = StoredValue(id, std::string(bytes), &bytes, &value);
    }
    if (s.ok()) {
      batch.Put(Handle(ColumnFamily::kCorrupt), TaskKey(id), bytes);
      batch.Delete(Handle(ColumnFamily::kTasks), TaskKey(id));
    } else if (!s.IsNotFound()) {
      return s;
    }
    for (const IndexEntry& e : known) delete_index(e);
    batch.Put(Handle(ColumnFamily::kMeta), kMetaCountsDirty, "");
  }

  for (const auto& [id, bytes] : txn->resealed_) {
    std::string_view value;
    Status s = StoredValue(id, bytes, &sealed, &value);
    if (!s.ok()) return s;
    batch.Put(Handle(ColumnFamily::kCorrupt), TaskKey(id),
              rocksdb::Slice(value.data(), value.size()));
  }

  for (const auto& [key, value] : txn->meta_) {
    batch.Put(Handle(ColumnFamily::kMeta), key, value);
  }
  uint64_t reserved = reserved_ids_;
  if (txn->max_id_ + kIdReservationBlock / 2 >= reserved_ids_) {
    reserved = txn->max_id_ + kIdReservationBlock;
    batch.Put(Handle(ColumnFamily::kMeta), kMetaReservedIds,
              BigEndian64(reserved));
  }
  if (txn->next_sequence_ != next_sequence_) {
    batch.Put(Handle(ColumnFamily::kMeta), kMetaNextSequence,
              BigEndian64(txn->next_sequence_));
  }
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    if (counts[i] != counts_[i]) {
      batch.Put(Handle(ColumnFamily::kMeta), CountKey(i),
                BigEndian64(counts[i]));
    }
  }
  // New per-type counts; written only where they changed.
  std::vector<std::pair<std::string, std::array<uint64_t, kTaskStatusCount>>>
      type_updates;
  for (const auto& [type, deltas] : type_deltas) {
    auto current = type_counts_.count(type) != 0
                       ? type_counts_.at(type)
                       : std::array<uint64_t, kTaskStatusCount>{};
    auto next = current;
    for (size_t i = 0; i < kTaskStatusCount; ++i) {
      if (deltas[i] == 0) continue;
      int64_t value = static_cast<int64_t>(current[i]) + deltas[i];
      next[i] = value < 0 ? 0 : static_cast<uint64_t>(value);
      std::string key = TypeCountKey(type, static_cast<TaskStatus>(i));
      if (next[i] == 0) {
        batch.Delete(Handle(ColumnFamily::kMeta), key);
      } else {
        batch.Put(Handle(ColumnFamily::kMeta), key, BigEndian64(next[i]));
      }
    }
    type_updates.emplace_back(type, next);
  }

  // Numbered, so that after a failure the writer can tell from the stored
  // number whether this batch reached the disk anyway.
  batch.Put(Handle(ColumnFamily::kMeta), kMetaCommittedBatches,
            BigEndian64(committed_batches_ + 1));

  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  Status s = FromRocks(db_->Write(wo, &batch), "committing a write batch");
  if (!s.ok()) return s;
  ++committed_batches_;
  counts_ = counts;
  for (auto& [type, next] : type_updates) type_counts_[type] = next;
  next_sequence_ = txn->next_sequence_;
  reserved_ids_ = reserved;
  return Status::OK();
}

Status TaskStore::Flush() {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  rocksdb::FlushOptions fo;
  fo.wait = true;
  std::vector<rocksdb::ColumnFamilyHandle*> families(handles_.begin(),
                                                     handles_.end());
  return FromRocks(db_->Flush(fo, families), "flushing memtables");
}

Status TaskStore::PutRawForTesting(TaskId id, std::string_view bytes) {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return StoreClosed(options_.path);
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  return FromRocks(db_->Put(wo, Handle(ColumnFamily::kTasks), TaskKey(id),
                            rocksdb::Slice(bytes.data(), bytes.size())),
                   "writing a raw record");
}

WriteTxn::WriteTxn(TaskStore* store)
    : store_(store), next_sequence_(store->next_sequence_) {}

Status WriteTxn::Get(TaskId id, TaskRecord* record) {
  if (auto it = entries_.find(id); it != entries_.end()) {
    if (!it->second.after) {
      return Status::NotFound("task " + std::to_string(id) + " does not exist");
    }
    *record = *it->second.after;
    return Status::OK();
  }
  if (auto it = reads_.find(id); it != reads_.end()) {
    *record = it->second;
    return Status::OK();
  }
  std::string bytes;
  Status s = store_->GetRaw(id, &bytes);
  if (!s.ok()) return s;
  s = DecodeRecord(id, bytes, record);
  if (!s.ok()) return s;
  reads_.emplace(id, *record);
  return Status::OK();
}

void WriteTxn::RestageIndexes(const TaskRecord* previous,
                              const TaskRecord* next) {
  if (previous != nullptr) {
    for (IndexEntry& e : IndexEntriesOf(*previous, store_->tagger())) {
      index_overlay_[{e.family, std::move(e.key)}] = std::nullopt;
    }
  }
  if (next != nullptr) {
    for (IndexEntry& e : IndexEntriesOf(*next, store_->tagger())) {
      index_overlay_[{e.family, std::move(e.key)}] = std::move(e.value);
    }
  }
}

void WriteTxn::Insert(TaskRecord record) {
  TaskId id = record.id;
  NoteId(id);
  RestageIndexes(nullptr, &record);
  order_.push_back(id);
  entries_[id] = Entry{std::nullopt, std::move(record)};
}

void WriteTxn::Update(TaskRecord record) {
  TaskId id = record.id;
  if (auto it = entries_.find(id); it != entries_.end()) {
    RestageIndexes(it->second.after ? &*it->second.after : nullptr, &record);
    it->second.after = std::move(record);
    return;
  }
  auto read = reads_.find(id);
  assert(read != reads_.end() && "Update requires a prior Get");
  RestageIndexes(&read->second, &record);
  Entry entry{std::move(read->second), std::move(record)};
  reads_.erase(read);
  order_.push_back(id);
  entries_.emplace(id, std::move(entry));
}

void WriteTxn::Delete(TaskId id) {
  if (auto it = entries_.find(id); it != entries_.end()) {
    RestageIndexes(it->second.after ? &*it->second.after : nullptr, nullptr);
    it->second.after.reset();
    return;
  }
  auto read = reads_.find(id);
  assert(read != reads_.end() && "Delete requires a prior Get");
  RestageIndexes(&read->second, nullptr);
  Entry entry{std::move(read->second), std::nullopt};
  reads_.erase(read);
  order_.push_back(id);
  entries_.emplace(id, std::move(entry));
}

void WriteTxn::Quarantine(TaskId id, std::vector<IndexEntry> known) {
  quarantined_.emplace_back(id, std::move(known));
}

void WriteTxn::Reinstate(TaskRecord record, TaskRecord as_stored) {
  reinstated_.push_back(std::move(as_stored));
  Insert(std::move(record));
}

void WriteTxn::ResealSetAside(TaskId id, std::string bytes) {
  resealed_.emplace_back(id, std::move(bytes));
}

Status WriteTxn::GetIndex(ColumnFamily family, std::string_view key,
                          std::string* value) {
  auto it = index_overlay_.find({family, std::string(key)});
  if (it != index_overlay_.end()) {
    if (!it->second) return Status::NotFound(ColumnFamilyName(family));
    *value = *it->second;
    return Status::OK();
  }
  return store_->GetEntry(family, key, value);
}

Status WriteTxn::ScanIndex(ColumnFamily family, std::string_view prefix,
                           std::string_view start, const IndexVisitor& visit) {
  std::string_view from = start > prefix ? start : prefix;
  // The staged entries under the prefix, in key order.
  auto first = index_overlay_.lower_bound({family, std::string(from)});
  auto staged_end = first;
  while (staged_end != index_overlay_.end() &&
         staged_end->first.first == family &&
         std::string_view(staged_end->first.second).substr(0, prefix.size()) ==
             prefix) {
    ++staged_end;
  }
  // Merge them with the stored entries: a staged entry replaces (or, when
  // empty, hides) the stored one with the same key.
  auto staged = first;
  bool stopped = false;
  Status s = store_->Scan(
      family, prefix, from, [&](std::string_view key, std::string_view value) {
        while (staged != staged_end && staged->first.second < key) {
          if (staged->second && !visit(staged->first.second, *staged->second)) {
            stopped = true;
            return false;
          }
          ++staged;
        }
        if (staged != staged_end && staged->first.second == key) {
          bool keep_going =
              !staged->second || visit(staged->first.second, *staged->second);
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
    if (staged->second && !visit(staged->first.second, *staged->second)) break;
  }
  return Status::OK();
}

Status WriteTxn::GetMeta(std::string_view key, std::string* value) {
  if (auto it = meta_.find(std::string(key)); it != meta_.end()) {
    *value = it->second;
    return Status::OK();
  }
  return store_->GetEntry(ColumnFamily::kMeta, key, value);
}

void WriteTxn::PutMeta(std::string key, std::string value) {
  meta_[std::move(key)] = std::move(value);
}

}  // namespace spool::storage
