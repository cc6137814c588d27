// TaskStore: encryption at rest. The sealed lookup key that checks the keys
// at open, the stored form of groups and dedup keys, opening records, and
// the storage side of re-encryption. See storage/crypto.h for the formats.

#include <memory>

#include <openssl/crypto.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "storage/rocks_status.h"
#include "storage/task_store.h"
#include "storage/task_store_internal.h"

namespace spool::storage {
namespace {

// The store's lookup key, sealed under the current key. Its presence marks
// an encrypted store; opening it checks the configured keys.
constexpr const char* kMetaLookupKey = "crypto/lookup_key";
// The context the lookup key is sealed in.
constexpr std::string_view kLookupKeyContext = "meta/lookup_key";

// Whether a stored value is sealed and long enough to name the key that
// sealed it.
bool NamesKeyId(std::string_view stored) {
  return IsSealed(stored) && stored.size() >= kSealHeaderBytes;
}

// The id of the key that sealed a stored value, for messages; "unknown"
// when the value names none.
std::string KeyIdText(std::string_view stored) {
  return NamesKeyId(stored) ? KeyIdHex(SealedKeyId(stored))
                            : std::string("unknown");
}

std::string TaskName(TaskId id) { return "task " + std::to_string(id); }

}  // namespace

Status TaskStore::LoadKeys() {
  std::string sealed_key;
  rocksdb::Status rs =
      db_->Get(rocksdb::ReadOptions(), Handle(ColumnFamily::kMeta),
               kMetaLookupKey, &sealed_key);
  if (!rs.ok() && !rs.IsNotFound()) {
    return FromRocks(rs, "reading the sealed lookup key");
  }
  bool encrypted_store = rs.ok();
  if (!encrypted()) {
    if (!encrypted_store) return Status::OK();
    return Status::InvalidArgument(
        "storage directory " + options_.path + " is encrypted (key id " +
        KeyIdText(sealed_key) +
        ") and no encryption key is configured: set Options::encryption_key "
        "or storage.encryption_key_file");
  }
  // A counts-only reader of a store with no lookup key yet needs none: it
  // reads no group or dedup key (and cannot look for plaintext tasks).
  if (!encrypted_store && !HasFamily(ColumnFamily::kTasks)) {
    return Status::OK();
  }
  std::string lookup_key;
  Status s = encrypted_store ? OpenLookupKey(sealed_key, &lookup_key)
                             : CreateLookupKey(&lookup_key);
  if (!s.ok()) return s;
  // Reopen after a failure loads the same key; the tagger others may be
  // using is kept.
  if (!tagger_) tagger_ = std::make_unique<LookupTagger>(lookup_key);
  OPENSSL_cleanse(lookup_key.data(), lookup_key.size());
  return Status::OK();
}

// Opening the sealed lookup key is what checks the configured keys against
// the store. A key id the ring does not hold is a configuration mistake
// (InvalidArgument, naming the ids); a lookup key that a held key does not
// open is a wrong key under a known id, or altered meta (Corruption).
Status TaskStore::OpenLookupKey(const std::string& sealed_key,
                                std::string* lookup_key) {
  const KeyRing& keys = *options_.keys;
  std::string where = "storage directory " + options_.path;
  uint32_t sealed_with = 0;
  Status s = keys.Open(kLookupKeyContext, sealed_key, lookup_key, &sealed_with);
  if (!s.ok() && NamesKeyId(sealed_key) && !keys.Has(SealedKeyId(sealed_key))) {
    return Status::InvalidArgument(
        "wrong encryption key for " + where + ": it is encrypted with key " +
        "id " + KeyIdHex(SealedKeyId(sealed_key)) +
        ", and the configured keys are " + keys.Describe() +
        ". Configure its key, as the current key or as a previous one");
  }
  if (!s.ok() || lookup_key->size() != kKeyBytes) {
    return Status::Corruption(where + ": the sealed lookup key in meta " +
                              (s.ok() ? "has the wrong size" : s.message()) +
                              "; the key is wrong or meta was altered");
  }
  if (sealed_with == keys.current_id()) return Status::OK();
  // A reader leaves that to the holder.
  if (options_.read_only) return Status::OK();
  // A rotation: seal it under the current key, so that the store stops
  // needing the earlier key for it.
  std::string resealed;
  s = keys.Seal(kLookupKeyContext, *lookup_key, &resealed);
  if (!s.ok()) return s;
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  return FromRocks(
      db_->Put(wo, Handle(ColumnFamily::kMeta), kMetaLookupKey, resealed),
      "re-sealing the lookup key");
}

// A store with no lookup key is new, or was written before encryption was
// turned on. Its plaintext tasks can be read only with accept_plaintext
// (OpenValue), so without it the store is refused, rather than opened with
// every task in it unreadable.
Status TaskStore::CreateLookupKey(std::string* lookup_key) {
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), Handle(ColumnFamily::kTasks)));
  it->SeekToFirst();
  Status s = FromRocks(it->status(), "looking for tasks");
  if (!s.ok()) return s;
  bool has_tasks = it->Valid();
  it.reset();
  if (has_tasks && !options_.accept_plaintext) {
    return Status::FailedPrecondition(
        "storage directory " + options_.path +
        " holds tasks stored without encryption. To encrypt it in place, "
        "open it with plaintext records accepted (Options::plaintext_records "
        "= kAccept, storage.plaintext_records = \"accept\") and run "
        "Runtime::ReencryptAll");
  }
  *lookup_key = options_.keys->DeriveLookupKey();
  // A reader of a store with no task yet: the key the holder will store
  // once encryption is on there; until then no group is tagged anyway.
  if (options_.read_only) return Status::OK();
  std::string sealed;
  s = options_.keys->Seal(kLookupKeyContext, *lookup_key, &sealed);
  if (!s.ok()) return s;
  rocksdb::WriteBatch batch;
  batch.Put(Handle(ColumnFamily::kMeta), kMetaLookupKey, sealed);
  // The index entries of the tasks there hold plaintext groups and dedup
  // keys; LoadMeta goes on to rebuild every index from the records, with
  // tags. One batch with the lookup key, so that a crash cannot leave an
  // encrypted store with plaintext index entries behind.
  if (has_tasks) batch.Put(Handle(ColumnFamily::kMeta), kMetaCountsDirty, "");
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  side_writes_.fetch_add(1);
  return FromRocks(db_->Write(wo, &batch), "writing the sealed lookup key");
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
    return Status::Corruption(TaskValueName(key) + " is encrypted (key id " +
                              KeyIdText(*bytes) + ") and no key is configured");
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
    s = StageSetAside(id, &batch);
    if (!s.ok()) return s;
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kSync;
  side_writes_.fetch_add(1);
  return FromRocks(db_->Write(wo, &batch), "setting unreadable tasks aside");
}

// As stored: a sealed value stays sealed. Plaintext bytes (accepted from
// before encryption) are sealed on the way, so that the copy does not
// outlive the original in plaintext.
Status TaskStore::StageSetAside(TaskId id, rocksdb::WriteBatch* batch) const {
  Status inner;
  Status s = ScanLocked(
      ColumnFamily::kTasks, TaskPrefix(id), "",
      [&](std::string_view key, std::string_view stored) {
        std::string aside(stored);
        if (encrypted() && !IsSealed(aside)) {
          std::string_view value;
          inner = StoredValue(key, std::string(stored), &aside, &value);
          if (!inner.ok()) return false;
        }
        rocksdb::Slice k(key.data(), key.size());
        batch->Put(Handle(ColumnFamily::kCorrupt), k, aside);
        batch->Delete(Handle(ColumnFamily::kTasks), k);
        return true;
      },
      nullptr);
  if (!s.ok()) return s;
  return inner;
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
  if (!db_) return StoreClosed(options_.path);
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
  if (!db_) return StoreClosed(options_.path);
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
  if (options_.read_only) return ReadOnlyStore(options_.path, "CompactAll");
  if (held.store_ != this || !held.open_) {
    return StoreClosed(options_.path);
  }
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction =
      rocksdb::BottommostLevelCompaction::kForce;
  options.exclusive_manual_compaction = false;
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    Status s = FromRocks(db_->CompactRange(options, handle, nullptr, nullptr),
                         "compacting " + handle->GetName());
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status TaskStore::ReadView::ExplainMissing(TaskId id,
                                           const Status& not_found) const {
  if (!not_found.IsNotFound() || !open_) return not_found;
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
