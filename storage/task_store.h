// TaskStore: spool's tasks on RocksDB.
//
// Column families:
//   tasks       task id -> TaskRecord (FlatBuffers)
//   ready       (priority desc, sequence) -> QueueValue, for tasks that may
//               start now
//   scheduled   (due time, sequence) -> QueueValue, for tasks that wait for a
//               time (a delay or a retry)
//   running     task id -> "", for tasks a handler runs
//   by_status   (status, id) -> "", every task
//   by_type     (type, status, id) -> "", every task
//   by_group    (group, id) -> status, tasks with a group
//   dedup       dedup key -> id, active tasks with a dedup key
//   waiting_on  (dependency id, waiting id) -> "", waiting tasks
//   meta        schema version, id reservation, sequence, counts by status
//               and by type, periodic slots, rate-limit state
//   corrupt     task id -> the raw bytes of a record that failed
//               verification or could not be decrypted (set aside)
//
// Encryption at rest (StoreOptions::keys, storage/crypto.h): values of
// `tasks` and `corrupt` are sealed with AES-256-GCM, bound to the task id,
// and opened here, so every reader (GetRaw, ReadView, Scan of `tasks`,
// WriteTxn::Get) still sees plain FlatBuffers. Groups and dedup keys appear
// in `by_group`, `dedup`, `ready` and `scheduled` as HMAC-SHA256 tags
// (StoredGroup, StoredDedupKey). Task types, ids, statuses, priorities,
// times, dependencies and counts stay in plaintext in the indexes and meta.
//
// Every change goes through a WriteTxn and is committed as one WriteBatch, so
// a record and its index entries change together or not at all. Index
// entries are derived from the record (IndexEntriesOf), never written by
// hand, so they cannot disagree with it.
//
// Thread safety: the read methods and ReadView may be used from any thread.
// Commit, and WriteTxn, belong to one thread at a time: spool's writer.

#ifndef SPOOL_STORAGE_TASK_STORE_H_
#define SPOOL_STORAGE_TASK_STORE_H_

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <spool/options.h>
#include <spool/status.h>

#include "storage/crypto.h"
#include "storage/keys.h"
#include "storage/record.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
class Snapshot;
}  // namespace rocksdb

namespace spool::storage {

// Written by this code. A directory with a higher version is refused.
inline constexpr uint32_t kSchemaVersion = 1;

// Ids are reserved on disk in blocks, so that an id handed to a caller is
// never handed out again after a crash (see TaskStore::reserved_ids).
inline constexpr uint64_t kIdReservationBlock = uint64_t{1} << 20;

enum class ColumnFamily : uint8_t {
  kTasks = 0,
  kReady,
  kScheduled,
  kRunning,
  kByStatus,
  kByType,
  kByGroup,
  kDedup,
  kWaitingOn,
  kMeta,
  kCorrupt,
  kCount,  // not a family: the number of them
};

// The family's name in RocksDB, e.g. "by_status".
const char* ColumnFamilyName(ColumnFamily family);

// One index entry a record implies.
struct IndexEntry {
  ColumnFamily family;
  std::string key;
  std::string value;
};

// The index entries that `record` must have. With `tags`, its group and
// dedup key appear as their lookup tags (an encrypted store).
std::vector<IndexEntry> IndexEntriesOf(const TaskRecord& record,
                                       const LookupTagger* tags = nullptr);

// Visits entries of a family in key order; return false to stop early.
using IndexVisitor =
    std::function<bool(std::string_view key, std::string_view value)>;

// Per-type counts: type -> counts by status.
using TypeCounts =
    std::unordered_map<std::string, std::array<uint64_t, kTaskStatusCount>>;

struct StoreOptions {
  std::string path;
  Durability durability = Durability::kSync;
  // Replaces the RocksDB environment, e.g. with a fault-injecting one. The
  // store does not own it; it must outlive the store. Null: the default
  // environment (or an in-memory one for kMemory).
  rocksdb::Env* env = nullptr;
  // Encryption at rest: the keys that seal and open records. Null: records
  // are stored in plaintext, and a store sealed before is refused.
  std::shared_ptr<const KeyRing> keys;
  // With keys: read records stored in plaintext (a store written before
  // encryption was turned on) instead of refusing them. They are sealed
  // when next written, or by a re-encryption pass.
  bool accept_plaintext = false;
};

class WriteTxn;

class TaskStore {
 public:
  // Opens or creates the store. Returns Busy when another process (or another
  // runtime in this process) holds the directory, NotSupported when a newer
  // spool wrote it, Corruption or IOError when RocksDB cannot open it.
  // With keys: InvalidArgument when none of them is the store's key (or the
  // store is encrypted and no key is given), FailedPrecondition when the
  // store holds plaintext tasks and accept_plaintext is off.
  static Status Open(const StoreOptions& options,
                     std::unique_ptr<TaskStore>* store);

  TaskStore(const TaskStore&) = delete;
  TaskStore& operator=(const TaskStore&) = delete;
  // Closes RocksDB. Pending writes are already durable or already failed.
  ~TaskStore();

  const StoreOptions& options() const { return options_; }

  // ---- Reads (any thread) ----

  // The raw record of task `id` at `snapshot` (null: latest). NotFound when
  // there is none. The bytes are not verified here.
  Status GetRaw(TaskId id, std::string* bytes,
                const rocksdb::Snapshot* snapshot = nullptr) const;

  // A value in an index or meta family; NotFound when absent.
  Status GetEntry(ColumnFamily family, std::string_view key, std::string* value,
                  const rocksdb::Snapshot* snapshot = nullptr) const;

  // Visits the entries of `family` whose keys start with `prefix`, from
  // `start` (inclusive; empty: the prefix itself) in key order, until
  // `visit` returns false. Never walks past the prefix.
  Status Scan(ColumnFamily family, std::string_view prefix,
              std::string_view start, const IndexVisitor& visit,
              const rocksdb::Snapshot* snapshot = nullptr) const;

  // A consistent view of the store at one point in time.
  class ReadView {
   public:
    ~ReadView();
    ReadView(const ReadView&) = delete;
    ReadView& operator=(const ReadView&) = delete;

    // Raw record bytes; NotFound when there is none.
    Status GetRaw(TaskId id, std::string* bytes) const;
    Status GetEntry(ColumnFamily family, std::string_view key,
                    std::string* value) const;
    Status Scan(ColumnFamily family, std::string_view prefix,
                std::string_view start, const IndexVisitor& visit) const;
    // Counts by status, as of this view.
    Status CountByStatus(std::array<uint64_t, kTaskStatusCount>* counts) const;
    // Counts by type and status, as of this view.
    Status CountByType(TypeCounts* counts) const;
    // TaskStore::StoredGroup, for queries by group over this view.
    std::string StoredGroup(std::string_view group) const {
      return store_->StoredGroup(group);
    }
    // What to say about task `id` when GetRaw found no record: `not_found`
    // itself, or, for a task set aside in `corrupt`, Corruption naming it
    // and why it cannot be read.
    Status ExplainMissing(TaskId id, const Status& not_found) const;

   private:
    friend class TaskStore;
    ReadView(const TaskStore* store, std::shared_lock<std::shared_mutex> lock);
    const TaskStore* store_;
    // Keeps the store from being reopened under the view.
    std::shared_lock<std::shared_mutex> lock_;
    // Null when the store is closed after a failure.
    const rocksdb::Snapshot* snapshot_ = nullptr;
  };
  std::unique_ptr<ReadView> NewReadView() const;

  // Visits every index entry of one family in key order. Stops at the first
  // error of `fn` or of the iterator, and returns it.
  Status ForEachIndexEntry(
      ColumnFamily family,
      const std::function<Status(std::string_view key, std::string_view value)>&
          fn) const;

  // Visits every record (raw bytes) in id order.
  Status ForEachRecord(
      const std::function<Status(TaskId id, std::string_view bytes)>& fn) const;

  // Compares every index family with the entries the records imply.
  // Sets *mismatches to their number and appends a description of the first
  // few to *problems (if not null). Reads the whole store: for tests, tools
  // and repair, not for the hot path.
  Status CheckIndexes(size_t* mismatches,
                      std::vector<std::string>* problems = nullptr) const;

  // ---- Writer state (the writer's thread) ----

  // The first id not yet reserved on disk. Ids below it may have been handed
  // out before a crash; the runtime starts allocating here.
  uint64_t reserved_ids() const { return reserved_ids_; }

  // Commits everything `txn` staged as one WriteBatch: records, their index
  // entries, counts and the meta high-water marks. Syncs the write-ahead log
  // first in kSync mode. On failure nothing is applied and `txn` may be
  // discarded.
  Status Commit(WriteTxn* txn);

  // Flushes the memtables to disk so that the next open replays little log.
  Status Flush();

  // Closes RocksDB and opens it again, reloading the meta state. After a
  // write or sync failure RocksDB refuses every later write until then (see
  // storage/fault_env_test.cc). Waits for reads in progress; reads that
  // start meanwhile wait for it. On failure the store stays closed: every
  // call returns IOError until a Reopen succeeds.
  Status Reopen();

  // Batches committed so far, as stored. After a failed Commit and a
  // successful Reopen, one more than before means the batch reached the
  // disk despite the error (written, then the sync failed).
  uint64_t committed_batches() const { return committed_batches_; }

  // ---- Encryption at rest (storage/task_store_crypto.cc) ----

  bool encrypted() const { return options_.keys != nullptr; }

  // The stored form of a group, or of a dedup key: what index keys and
  // queue values hold. Its lookup tag in an encrypted store, else the value
  // itself; empty stays empty. Every lookup by group or dedup key goes
  // through these.
  std::string StoredGroup(std::string_view group) const;
  std::string StoredDedupKey(std::string_view dedup_key) const;

  // Turns the stored value of task `id`'s record (from `tasks` or
  // `corrupt`) into the record's FlatBuffers bytes, in place: opens a
  // sealed value, passes plaintext when the store is not encrypted or
  // accepts it. Corruption naming the task and the reason otherwise. The
  // result is not verified.
  Status OpenRecord(TaskId id, std::string* bytes) const;

  // For re-encryption: examines up to `limit` entries of `family` (kTasks
  // or kCorrupt) with ids above `after`, in id order, and appends to *stale
  // those not sealed with the current key. Sets *last to the last id
  // examined (`after` if none) and *more to whether entries remain.
  Status FindStale(ColumnFamily family, TaskId after, size_t limit,
                   std::vector<TaskId>* stale, TaskId* last, bool* more) const;

  // Compacts every family to the bottom level, so that values replaced
  // since (records sealed with an earlier key, or stored in plaintext, and
  // index entries holding plaintext groups) are dropped from the table
  // files. Values still in a live write-ahead log file are not affected.
  // `held` keeps the store open meanwhile (a reader runs this).
  Status CompactAll(const ReadView& held);

  // ---- For tests and tools ----

  // Overwrites a record's raw bytes, bypassing verification and indexes
  // (and encryption: the bytes are stored as given).
  Status PutRawForTesting(TaskId id, std::string_view bytes);

  // The value stored for task `id` in `family`, as on disk: sealed in an
  // encrypted store.
  Status GetStoredForTesting(ColumnFamily family, TaskId id,
                             std::string* bytes) const;

 private:
  friend class WriteTxn;
  explicit TaskStore(const StoreOptions& options);
  Status OpenDb();
  void CloseDb();
  Status LoadMeta();
  // Checks the keys against the store's sealed lookup key (creating it in a
  // new store), and sets up the lookup tagger. REQUIRES: db_ is open.
  Status LoadKeys();
  // The stored value, not opened.
  Status GetStoredLocked(ColumnFamily family, TaskId id, std::string* bytes,
                         const rocksdb::Snapshot* snapshot) const;
  // The value to store for task `id`'s record bytes: sealed into *scratch
  // in an encrypted store, else `plain` itself.
  Status StoredValue(TaskId id, std::string_view plain, std::string* scratch,
                     std::string_view* value) const;
  const LookupTagger* tagger() const { return tagger_.get(); }
  // The bodies of the public reads, for callers that hold db_mutex_.
  Status GetRawLocked(TaskId id, std::string* bytes,
                      const rocksdb::Snapshot* snapshot) const;
  Status GetEntryLocked(ColumnFamily family, std::string_view key,
                        std::string* value,
                        const rocksdb::Snapshot* snapshot) const;
  Status ScanLocked(ColumnFamily family, std::string_view prefix,
                    std::string_view start, const IndexVisitor& visit,
                    const rocksdb::Snapshot* snapshot) const;
  Status ForEachRecordLocked(
      const std::function<Status(TaskId id, std::string_view bytes)>& fn) const;
  Status CheckIndexesLocked(size_t* mismatches,
                            std::vector<std::string>* problems) const;
  Status RebuildCounts();
  // Makes every index family match the records (after a record was set
  // aside, its index entries are not all known).
  Status RepairIndexes();
  // Moves every record of `tasks` that cannot be read (opened and
  // verified) to `corrupt`, as stored. RepairIndexes runs it first, so that
  // a record the rebuild cannot index is set aside (listed, and releasable
  // once readable) instead of left in `tasks` with no index entry.
  Status SetAsideUnreadable();
  rocksdb::ColumnFamilyHandle* Handle(ColumnFamily family) const {
    return handles_[static_cast<size_t>(family)];
  }

  StoreOptions options_;
  std::unique_ptr<rocksdb::Env> owned_env_;
  // Shared by every call that uses db_, exclusive for Reopen.
  mutable std::shared_mutex db_mutex_;
  std::unique_ptr<rocksdb::DB> db_;
  std::array<rocksdb::ColumnFamilyHandle*,
             static_cast<size_t>(ColumnFamily::kCount)>
      handles_{};
  rocksdb::ColumnFamilyHandle* default_handle_ = nullptr;

  // Writer-owned state, mirrored in `meta`.
  uint64_t reserved_ids_ = 1;
  uint64_t next_sequence_ = 1;
  uint64_t committed_batches_ = 0;
  std::array<uint64_t, kTaskStatusCount> counts_{};
  TypeCounts type_counts_;
  // Set by the first LoadKeys in an encrypted store, never changed after.
  std::unique_ptr<LookupTagger> tagger_;
};

// The changes of one group commit. Reads see earlier changes of the same
// transaction, in records and in indexes. Owned by the writer's thread.
class WriteTxn {
 public:
  explicit WriteTxn(TaskStore* store);

  // The record as this transaction sees it. NotFound when there is none (or
  // it was deleted here); Corruption when it fails verification.
  Status Get(TaskId id, TaskRecord* record);

  // Stages a new task. REQUIRES: no task with this id exists.
  void Insert(TaskRecord record);

  // Stages a new state for a task read with Get.
  void Update(TaskRecord record);

  // Stages the removal of a task read with Get, with its index entries.
  void Delete(TaskId id);

  // Moves the unreadable record of `id` to the corrupt family and removes the
  // index entries the caller knows of (the record itself cannot say).
  void Quarantine(TaskId id, std::vector<IndexEntry> known_index_entries);

  // Returns a record set aside in `corrupt` to `tasks`, as `record`, with
  // the index entries it implies. `as_stored` is the record as it was set
  // aside: index entries it left behind are replaced. REQUIRES: no task
  // with this id exists.
  void Reinstate(TaskRecord record, TaskRecord as_stored);

  // Seals a set-aside record's bytes again, with the current key, in place
  // in `corrupt` (re-encryption).
  void ResealSetAside(TaskId id, std::string bytes);

  // An index entry as this transaction sees it; NotFound when absent.
  Status GetIndex(ColumnFamily family, std::string_view key,
                  std::string* value);

  // Visits index entries with `prefix`, from `start` (inclusive; empty: the
  // prefix), as this transaction sees them, in key order, until `visit`
  // returns false. `visit` must not change the transaction.
  Status ScanIndex(ColumnFamily family, std::string_view prefix,
                   std::string_view start, const IndexVisitor& visit);

  // A meta value as this transaction sees it; NotFound when absent.
  Status GetMeta(std::string_view key, std::string* value);
  // Stages a meta value.
  void PutMeta(std::string key, std::string value);

  // The next enqueue sequence number.
  uint64_t NextSequence() { return next_sequence_++; }

  // Notes that `id` was handed out, so the reservation covers it.
  void NoteId(TaskId id) {
    if (id > max_id_) max_id_ = id;
  }

  // One staged task, with the state it had before this transaction. `after`
  // is empty for a deleted task.
  struct Entry {
    std::optional<TaskRecord> before;
    std::optional<TaskRecord> after;
  };
  const std::unordered_map<TaskId, Entry>& entries() const { return entries_; }
  // The ids of entries(), in the order they were first staged.
  const std::vector<TaskId>& order() const { return order_; }
  bool empty() const {
    return entries_.empty() && quarantined_.empty() && meta_.empty() &&
           resealed_.empty();
  }

 private:
  friend class TaskStore;
  // Replaces the staged index entries of `previous` with those of `next`.
  void RestageIndexes(const TaskRecord* previous, const TaskRecord* next);

  TaskStore* store_;
  // Records read from the store and not yet changed: the `before` of a later
  // Update, so that no record is read twice.
  std::unordered_map<TaskId, TaskRecord> reads_;
  std::unordered_map<TaskId, Entry> entries_;
  std::vector<TaskId> order_;
  std::vector<std::pair<TaskId, std::vector<IndexEntry>>> quarantined_;
  // Taken back from `corrupt` (their records are in entries_), and set-aside
  // bytes to seal again.
  std::vector<TaskRecord> reinstated_;
  std::vector<std::pair<TaskId, std::string>> resealed_;
  // Index entries as staged: a value, or nullopt for a removed entry. Keyed
  // by family and key, so that scans see staged entries in order.
  std::map<std::pair<ColumnFamily, std::string>, std::optional<std::string>>
      index_overlay_;
  std::map<std::string, std::string> meta_;
  uint64_t next_sequence_;
  uint64_t max_id_ = 0;
};

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_TASK_STORE_H_
