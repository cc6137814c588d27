// TaskStore: encryption at rest. The sealed lookup key that checks the keys
// at open, the stored form of groups and dedup keys, opening records, and
// the storage side of re-encryption. See storage/crypto.h for the formats.

#include <memory>

#include <openssl/crypto.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "storage/task_store.h"

namespace spool::storage {
namespace {

// The store's lookup key, sealed under the current key. Its presence marks
// an encrypted store; opening it checks the configured keys.
constexpr const char* kMetaLookupKey = "crypto/lookup_key";
// The context the lookup key is sealed in.
constexpr std::string_view kLookupKeyContext = "meta/lookup_key";
// task_store.cc's marker: when set, the next open rebuilds every index and
// the counts from the records.
constexpr const char* kMetaCountsDirty = "counts_dirty";

Status RocksError(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return Status::OK();
  std::string msg = std::string(context) + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(msg);
  return Status::IOError(msg);
}

Status Closed(const std::string& path) {
  return Status::IOError("storage " + path +
                         " is closed after a failure and could not be "
                         "reopened");
}

std::string TaskName(TaskId id) { return "task " + std::to_string(id); }

}  // namespace

Status TaskStore::LoadKeys() {
  std::string sealed_key;
  rocksdb::Status rs =
      db_->Get(rocksdb::ReadOptions(), Handle(ColumnFamily::kMeta),
               kMetaLookupKey, &sealed_key);
  if (!rs.ok() && !rs.IsNotFound()) {
    return RocksError(rs, "reading the sealed lookup key");
  }
  bool encrypted_store = rs.ok();
  std::string where = "storage directory " + options_.path;
  const KeyRing* keys = options_.keys.get();
  if (keys == nullptr) {
    if (!encrypted_store) return Status::OK();
    std::string id = IsSealed(sealed_key) && sealed_key.size() >= 8
                         ? KeyIdHex(SealedKeyId(sealed_key))
                         : "unknown";
    return Status::InvalidArgument(
        where + " is encrypted (key id " + id +
        ") and no encryption key is configured: set Options::encryption_key "
        "or storage.encryption_key_file");
  }

  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  std::string lookup_key;
  if (encrypted_store) {
    uint32_t sealed_with = 0;
    Status s =
        keys->Open(kLookupKeyContext, sealed_key, &lookup_key, &sealed_with);
    if (!s.ok() && IsSealed(sealed_key) && sealed_key.size() >= 8 &&
        !keys->Has(SealedKeyId(sealed_key))) {
      return Status::InvalidArgument(
          "wrong encryption key for " + where + ": it is encrypted with key " +
          "id " + KeyIdHex(SealedKeyId(sealed_key)) +
          ", and the configured keys are " + keys->Describe() +
          ". Configure its key, as the current key or as a previous one");
    }
    if (!s.ok() || lookup_key.size() != kKeyBytes) {
      return Status::Corruption(where + ": the sealed lookup key in meta " +
                                (s.ok() ? "has the wrong size" : s.message()) +
                                "; the key is wrong or meta was altered");
    }
    if (sealed_with != keys->current_id()) {
      // A rotation: seal it under the current key, so that the store stops
      // needing the earlier key for it.
      std::string resealed;
      s = keys->Seal(kLookupKeyContext, lookup_key, &resealed);
      if (s.ok()) {
        s = RocksError(
            db_->Put(wo, Handle(ColumnFamily::kMeta), kMetaLookupKey, resealed),
            "re-sealing the lookup key");
      }
      if (!s.ok()) return s;
    }
  } else {
    // A new store, or one written before encryption was turned on.
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), Handle(ColumnFamily::kTasks)));
    it->SeekToFirst();
    Status s = RocksError(it->status(), "looking for tasks");
    if (!s.ok()) return s;
    bool has_tasks = it->Valid();
    it.reset();
    if (has_tasks && !options_.accept_plaintext) {
      return Status::FailedPrecondition(
          where +
          " holds tasks stored without encryption. To encrypt it in place, "
          "open it with plaintext records accepted (Options::plaintext_records "
          "= kAccept, storage.plaintext_records = \"accept\") and run "
          "Runtime::ReencryptAll");
    }
    lookup_key = keys->DeriveLookupKey();
    std::string sealed;
    s = keys->Seal(kLookupKeyContext, lookup_key, &sealed);
    if (!s.ok()) return s;
    rocksdb::WriteBatch batch;
    batch.Put(Handle(ColumnFamily::kMeta), kMetaLookupKey, sealed);
    // The index entries of the tasks there hold plaintext groups and dedup
    // keys; LoadMeta goes on to rebuild every index from the records, with
    // tags. One batch with the lookup key, so that a crash cannot leave an
    // encrypted store with plaintext index entries behind.
    if (has_tasks) batch.Put(Handle(ColumnFamily::kMeta), kMetaCountsDirty, "");
    s = RocksError(db_->Write(wo, &batch), "writing the sealed lookup key");
    if (!s.ok()) return s;
  }
  // Reopen after a failure loads the same key; the tagger others may be
  // using is kept.
  if (!tagger_) tagger_ = std::make_unique<LookupTagger>(lookup_key);
  OPENSSL_cleanse(lookup_key.data(), lookup_key.size());
  return Status::OK();
}

std::string TaskStore::StoredGroup(std::string_view group) const {
  if (!tagger_ || group.empty()) return std::string(group);
  return tagger_->Tag(kGroupTagDomain, group);
}

std::string TaskStore::StoredDedupKey(std::string_view dedup_key) const {
  if (!tagger_ || dedup_key.empty()) return std::string(dedup_key);
  return tagger_->Tag(kDedupTagDomain, dedup_key);
}

Status TaskStore::OpenValue(std::string_view key, std::string* bytes) const {
  if (!IsSealed(*bytes)) {
    if (!encrypted() || options_.accept_plaintext) return Status::OK();
    return Status::Corruption(
        TaskValueName(key) +
        " is stored in plaintext in an encrypted store, and plaintext "
        "values are not accepted (Options::plaintext_records)");
  }
  if (!encrypted()) {
    std::string id_text = bytes->size() >= 8 ? KeyIdHex(SealedKeyId(*bytes))
                                             : std::string("unknown");
    return Status::Corruption(TaskValueName(key) + " is encrypted (key id " +
                              id_text + ") and no key is configured");
  }
  Status s = options_.keys->Open(ValueContext(key), *bytes, bytes);
  if (!s.ok()) {
    return Status::Corruption(TaskValueName(key) +
                              " cannot be decrypted: " + s.message());
  }
  return Status::OK();
}

Status TaskStore::SetAsideUnreadable() {
  std::vector<TaskId> unreadable;
  Status s = ScanTasksLocked(
      ColumnFamily::kTasks, 0,
      [&](TaskId id, TaskBytes& task, const Status& opened) {
        if (!opened.ok() || !task.Verify(id).ok()) unreadable.push_back(id);
        return true;
      },
      nullptr);
  if (!s.ok() || unreadable.empty()) return s;
  rocksdb::WriteBatch batch;
  for (TaskId id : unreadable) {
    Status inner;
    s = ScanLocked(
        ColumnFamily::kTasks, TaskPrefix(id), "",
        [&](std::string_view key, std::string_view stored) {
          std::string aside(stored);
          if (encrypted() && !IsSealed(aside)) {
            std::string_view value;
            inner = StoredValue(key, std::string(stored), &aside, &value);
            if (!inner.ok()) return false;
          }
          rocksdb::Slice k(key.data(), key.size());
          batch.Put(Handle(ColumnFamily::kCorrupt), k, aside);
          batch.Delete(Handle(ColumnFamily::kTasks), k);
          return true;
        },
        nullptr);
    if (!s.ok()) return s;
    if (!inner.ok()) return inner;
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  return RocksError(db_->Write(wo, &batch), "setting unreadable tasks aside");
}

Status TaskStore::StoredValue(std::string_view key, std::string_view plain,
                              std::string* scratch,
                              std::string_view* value) const {
  if (!encrypted()) {
    *value = plain;
    return Status::OK();
  }
  Status s = options_.keys->Seal(ValueContext(key), plain, scratch);
  if (!s.ok()) return s.WithContext("sealing " + TaskValueName(key));
  *value = *scratch;
  return Status::OK();
}

Status TaskStore::GetStoredForTesting(ColumnFamily family, std::string_view key,
                                      std::string* bytes) const {
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return Closed(options_.path);
  return GetStoredLocked(family, key, bytes, nullptr);
}

Status TaskStore::FindStale(ColumnFamily family, TaskId after, size_t limit,
                            std::vector<TaskId>* stale, TaskId* last,
                            bool* more) const {
  *last = after;
  *more = false;
  if (!encrypted()) {
    return Status::FailedPrecondition("the store is not encrypted");
  }
  if (family != ColumnFamily::kTasks && family != ColumnFamily::kCorrupt) {
    return Status::InvalidArgument("only tasks and corrupt hold tasks");
  }
  if (after == UINT64_MAX) return Status::OK();
  std::shared_lock<std::shared_mutex> lock(db_mutex_);
  if (!db_) return Closed(options_.path);
  uint32_t current = options_.keys->current_id();
  size_t examined = 0;
  TaskId task = 0;
  bool task_stale = false;
  Status s = ScanLocked(
      family, "", TaskPrefix(after + 1),
      [&](std::string_view key, std::string_view value) {
        TaskId id = 0;
        TaskValueKind kind;
        uint32_t number = 0;
        if (!DecodeTaskKey(key, &id, &kind, &number)) return true;
        if (examined == 0 || id != task) {
          if (examined > 0 && task_stale) stale->push_back(task);
          if (examined == limit) {
            *more = true;
            task_stale = false;
            return false;
          }
          ++examined;
          task = id;
          task_stale = false;
          *last = id;
        }
        task_stale |= !IsSealed(value) || value.size() < kSealHeaderBytes ||
                      SealedKeyId(value) != current;
        return true;
      },
      nullptr);
  if (examined > 0 && task_stale) stale->push_back(task);
  if (!s.ok()) {
    return s.WithContext(std::string("scanning ") + ColumnFamilyName(family) +
                         " for re-encryption");
  }
  return Status::OK();
}

Status TaskStore::CompactAll(const ReadView& held) {
  if (held.store_ != this || held.snapshot_ == nullptr) {
    return Closed(options_.path);
  }
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction =
      rocksdb::BottommostLevelCompaction::kForce;
  options.exclusive_manual_compaction = false;
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    Status s = RocksError(db_->CompactRange(options, handle, nullptr, nullptr),
                          "compacting " + handle->GetName());
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status TaskStore::ReadView::ExplainMissing(TaskId id,
                                           const Status& not_found) const {
  if (!not_found.IsNotFound() || snapshot_ == nullptr) return not_found;
  TaskBytes task;
  Status why;
  Status s =
      store_->GetTaskLocked(ColumnFamily::kCorrupt, id, &task, snapshot_, &why);
  if (s.IsNotFound()) return not_found;
  if (!s.ok()) return s;
  if (why.ok()) why = task.Verify(id);
  std::string release = "Release(" + std::to_string(id) + ")";
  if (why.ok()) {
    return Status::Corruption(
        TaskName(id) +
        " is set aside: its values could not be read when it was used, and "
        "can be now; " +
        release + " returns it to the queue");
  }
  return Status::Corruption(
      TaskName(id) + " is set aside, unreadable (" + why.message() +
      "); it is kept: once it can be read (e.g. its key is configured "
      "again), " +
      release + " returns it to the queue");
}

}  // namespace spool::storage
