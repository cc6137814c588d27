// TaskStore: spool's tasks on RocksDB.
//
// Column families (schema version 3):
//   tasks    (id, kind) -> a task's values: its spec (written once, at
//            enqueue), its state (rewritten by every transition) and its
//            failure history (storage/record.h, storage/keys.h)
//   index    every index entry, the first key byte naming the index:
//            status, type, group, dedup, waiting and due (keys.h, IndexKind)
//   meta     schema version, id reservation, sequence, counts by status and
//            by type, periodic slots, rate-limit state
//   corrupt  the values of a task that failed verification or could not be
//            decrypted, as stored, under the same keys as in `tasks` (set
//            aside)
//   app      the application's own key space (spool/app_batch.h): its keys
//            as given, its values (sealed in an encrypted store); written
//            only with WriteTxn::PutApp and DeleteApp (schema version 3)
//
// A transition rewrites the task's state (tens of bytes) and moves its
// status and type entries; the spec and its payload are never read or
// written again by the writer. Index entries are derived from the state
// alone (IndexEntriesOf), never written by hand, so they cannot disagree
// with it.
//
// Encryption at rest (StoreOptions::keys, storage/crypto.h): values of
// `tasks` and `corrupt` are sealed with AES-256-GCM, bound to their key, and
// opened here, so every reader still sees plain FlatBuffers. Groups and
// dedup keys appear in the index as HMAC-SHA256 tags (StoredGroup,
// StoredDedupKey); states hold them in that form. Task types, ids,
// statuses, priorities, times, dependencies and counts stay in plaintext in
// the index and meta.
//
// Every change goes through a WriteTxn and is committed as one WriteBatch, so
// a task's values and its index entries change together or not at all.
//
// Thread safety: the read methods and ReadView may be used from any thread.
// Commit, and WriteTxn, belong to one thread at a time: spool's writer.

#ifndef SPOOL_STORAGE_TASK_STORE_H_
#define SPOOL_STORAGE_TASK_STORE_H_

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <spool/app_batch.h>
#include <spool/backup.h>
#include <spool/options.h>
#include <spool/replication.h>
#include <spool/status.h>

#include "storage/crypto.h"
#include "storage/keys.h"
#include "storage/record.h"
#include "storage/state_cache.h"

namespace rocksdb {
class BackupEngine;
class ColumnFamilyHandle;
struct DBOptions;
class DB;
class Env;
class Snapshot;
class WriteBatch;
}  // namespace rocksdb

namespace spool::storage {

// Written by this code. A directory of any other version is refused: a
// newer one because this code cannot know it, an older one because its
// layout is gone (spool 0.x; see docs/architecture.md). Except version 2,
// which differs only by lacking the `app` family: a writable open adds the
// family and records version 3; a read-only open reads it as it is (its
// application key space is empty).
inline constexpr uint32_t kSchemaVersion = 3;
inline constexpr uint32_t kUpgradableSchemaVersion = 2;

// Ids are reserved on disk in blocks, so that an id handed to a caller is
// never handed out again after a crash (see TaskStore::reserved_ids).
inline constexpr uint64_t kIdReservationBlock = uint64_t{1} << 20;

enum class ColumnFamily : uint8_t {
  kTasks = 0,
  kIndex,
  kMeta,
  kCorrupt,
  kApp,
  kCount,  // not a family: the number of them
};

// The family's name in RocksDB, e.g. "index".
const char* ColumnFamilyName(ColumnFamily family);

// One index entry a state implies (in the `index` family).
struct IndexEntry {
  std::string key;
  std::string value;
};

// The index entries that `state` must have.
std::vector<IndexEntry> IndexEntriesOf(const StateRecord& state);

// Visits entries of a family in key order; return false to stop early.
using IndexVisitor =
    std::function<bool(std::string_view key, std::string_view value)>;

// Visits tasks in id order: each task's values, gathered, opened (not
// verified), and what opening them said (OK, or Corruption naming the
// value no configured key opens). Return false to stop early.
using TaskVisitor =
    std::function<bool(TaskId id, TaskBytes& task, const Status& opened)>;

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
  // Encryption at rest: the keys that seal and open values. Null: values
  // are stored in plaintext, and a store sealed before is refused.
  std::shared_ptr<const KeyRing> keys;
  // With keys: read values stored in plaintext (a store written before
  // encryption was turned on) instead of refusing them. They are sealed
  // when next written, or by a re-encryption pass.
  bool accept_plaintext = false;
  // The most queued tasks whose states the writer keeps in memory
  // (storage/state_cache.h). 0: none (running ones are kept regardless).
  size_t state_cache_entries = 65536;
  // The size of each column family's memtable, in bytes.
  size_t memtable_bytes = size_t{64} << 20;
  // Whether Commit times the write-ahead log (last_commit_wal_nanos).
  bool time_wal = false;
  // Opens the directory for reads only, as RocksDB's secondary instance: it
  // takes no lock (another process may hold the directory), writes nothing
  // into it, and sees the holder's writes up to the last CatchUp. The
  // directory must exist and hold a spool store. Commit, Flush, Reopen and
  // CompactAll are refused.
  bool read_only = false;
  // With read_only: where the secondary instance keeps its own files (its
  // info log). Empty: a new temporary directory, removed with the store.
  std::string secondary_path;
  // With read_only: kCounts opens the `meta` family alone (the schema
  // version, the writer state with the counts by status, the counts by
  // type, the sealed lookup key), so that opening and catching up replay
  // only the holder's writes there: RocksDB skips the log's records for
  // families a secondary did not open (it still reads and decodes them).
  // Every read of `tasks`, `index` or `corrupt` then fails with
  // FailedPrecondition. kTasks opens every family but `index`, whose reads
  // fail so. Anything but kAll without read_only is refused.
  ReadOnlyScope read_scope = ReadOnlyScope::kAll;
};

class WriteTxn;

class TaskStore {
 public:
  // Opens or creates the store. Returns Busy when another process (or another
  // runtime in this process) holds the directory, NotSupported when another
  // schema version wrote it (naming both versions), Corruption or IOError
  // when RocksDB cannot open it. With keys: InvalidArgument when none of
  // them is the store's key (or the store is encrypted and no key is
  // given), FailedPrecondition when the store holds plaintext tasks and
  // accept_plaintext is off.
  static Status Open(const StoreOptions& options,
                     std::unique_ptr<TaskStore>* store);

  TaskStore(const TaskStore&) = delete;
  TaskStore& operator=(const TaskStore&) = delete;
  // Closes RocksDB. Pending writes are already durable or already failed.
  ~TaskStore();

  const StoreOptions& options() const { return options_; }

  bool read_only() const { return options_.read_only; }

  // Whether `family` is open: every family, except in a read-only store of
  // scope kCounts (`meta` alone) or kTasks (all but `index`); see
  // StoreOptions::read_scope.
  bool HasFamily(ColumnFamily family) const {
    return Handle(family) != nullptr;
  }

  // Read-only stores: replays what the directory's holder wrote since the
  // last catch-up (RocksDB's TryCatchUpWithPrimary), so that views made
  // after it see those writes. Waits for the views that exist (their reads
  // stay on one state), and views made meanwhile wait for it. OK and
  // nothing done for a store opened for writing.
  Status CatchUp() const;

  // ---- Reads (any thread) ----

  // Task `id`'s values at `snapshot` (null: latest), opened, not verified.
  // NotFound when the task has neither spec nor state.
  Status GetTask(TaskId id, TaskBytes* task,
                 const rocksdb::Snapshot* snapshot = nullptr) const;

  // Task `id`'s spec alone, opened, not verified: what a worker reads to
  // run the task. NotFound when there is none.
  Status GetSpec(TaskId id, std::string* bytes,
                 const rocksdb::Snapshot* snapshot = nullptr) const;

  // Task `id`'s state, opened, verified and decoded: for tools and tests
  // (the writer reads states through its WriteTxn). NotFound when there is
  // none, Corruption when it cannot be read.
  Status ReadState(TaskId id, StateRecord* state) const;

  // A value in the index or meta family; NotFound when absent.
  Status GetEntry(ColumnFamily family, std::string_view key, std::string* value,
                  const rocksdb::Snapshot* snapshot = nullptr) const;

  // Visits the entries of `family` whose keys start with `prefix`, from
  // `start` (inclusive; empty: the prefix itself) in key order, until
  // `visit` returns false. Never walks past the prefix. Values of `tasks`
  // and `corrupt` are passed as stored (sealed in an encrypted store).
  Status Scan(ColumnFamily family, std::string_view prefix,
              std::string_view start, const IndexVisitor& visit,
              const rocksdb::Snapshot* snapshot = nullptr) const;

  // Visits the tasks of `family` (kTasks, or kCorrupt for those set aside)
  // with ids from `from` on, in id order.
  Status ScanTasks(ColumnFamily family, TaskId from, const TaskVisitor& visit,
                   const rocksdb::Snapshot* snapshot = nullptr) const;

  // A consistent view of the store at one point in time.
  class ReadView {
   public:
    ~ReadView();
    ReadView(const ReadView&) = delete;
    ReadView& operator=(const ReadView&) = delete;

    // As TaskStore's, on this view's snapshot.
    Status GetTask(TaskId id, TaskBytes* task) const;
    Status GetEntry(ColumnFamily family, std::string_view key,
                    std::string* value) const;
    Status Scan(ColumnFamily family, std::string_view prefix,
                std::string_view start, const IndexVisitor& visit) const;
    Status ScanTasks(ColumnFamily family, TaskId from,
                     const TaskVisitor& visit) const;
    // Scan's mirror: the entries with `prefix` whose keys are below `before`
    // (empty: every entry of the prefix), in descending key order.
    Status ScanReverse(ColumnFamily family, std::string_view prefix,
                       std::string_view before,
                       const IndexVisitor& visit) const;
    // The application key space (spool/app_batch.h), values opened: the
    // value of `key` (NotFound when absent), and the entries of a scan in
    // key order, at most scan.limit of them, *more telling whether another
    // matches after them. An absent `app` family (a read-only open of a
    // version 2 store) reads as empty. Corruption naming the key for a
    // value no configured key opens.
    Status GetAppValue(std::string_view key, std::string* value) const;
    Status ScanAppValues(const AppScan& scan, std::vector<AppEntry>* entries,
                         bool* more) const;
    // Counts by status, as of this view.
    Status CountByStatus(std::array<uint64_t, kTaskStatusCount>* counts) const;
    // Counts by type and status, as of this view.
    Status CountByType(TypeCounts* counts) const;
    // TaskStore::CheckIndexes, on this view's snapshot.
    Status CheckIndexes(size_t* mismatches,
                        std::vector<std::string>* problems) const;
    // TaskStore::StoredGroup, for queries by group over this view.
    std::string StoredGroup(std::string_view group) const {
      return store_->StoredGroup(group);
    }
    // What to say about task `id` when GetTask found nothing: `not_found`
    // itself, or, for a task set aside in `corrupt`, Corruption naming it
    // and why it cannot be read.
    Status ExplainMissing(TaskId id, const Status& not_found) const;

   private:
    friend class TaskStore;
    ReadView(const TaskStore* store, std::shared_lock<std::shared_mutex> lock);
    const TaskStore* store_;
    // Keeps the store from being reopened under the view.
    std::shared_lock<std::shared_mutex> lock_;
    // False when the store is closed after a failure.
    bool open_ = false;
    // Null when the store is closed, and in a read-only store, where RocksDB
    // has no snapshots: there the view reads the latest state, which does
    // not change while it lives, since it holds off CatchUp.
    const rocksdb::Snapshot* snapshot_ = nullptr;
    std::shared_lock<std::shared_mutex> catch_up_lock_;
  };
  std::unique_ptr<ReadView> NewReadView() const;

  // Visits every entry of `family` with `prefix` in key order. Stops at the
  // first error of `fn` or of the iterator, and returns it.
  Status ForEachEntry(
      ColumnFamily family, std::string_view prefix,
      const std::function<Status(std::string_view key, std::string_view value)>&
          fn) const;

  // Compares the index with the entries the states imply. Sets
  // *mismatches to their number and appends a description of the first few
  // to *problems (if not null). Reads the whole store: for tests, tools and
  // repair, not for the hot path.
  Status CheckIndexes(size_t* mismatches,
                      std::vector<std::string>* problems = nullptr) const;

  // ---- Writer state (the writer's thread) ----

  // The first id not yet reserved on disk. Ids below it may have been handed
  // out before a crash; the runtime starts allocating here.
  uint64_t reserved_ids() const { return reserved_ids_; }

  // The highest id of any task stored, set aside ones included, in *id (0
  // when there is none): one seek to the end of `tasks` and of `corrupt`.
  // What a custom id source (Options::id_source) must stay above.
  Status HighestTaskId(TaskId* id) const;

  // Tasks with `status` as of the last commit.
  uint64_t CountOf(TaskStatus status) const {
    return counts_[static_cast<size_t>(status)];
  }

  // Tasks by type and status as of the last commit.
  const TypeCounts& type_counts() const { return type_counts_; }

  // Nanoseconds the last successful Commit spent writing and syncing the
  // write-ahead log, as RocksDB's perf context measures it (write_wal_time).
  uint64_t last_commit_wal_nanos() const { return last_commit_wal_nanos_; }
  // Whether Commit measures last_commit_wal_nanos (StoreOptions::time_wal).
  bool times_wal() const { return options_.time_wal; }

  // Called by Commit with the write batch's bytes once it is staged, just
  // before it is written: a replication primary hands them to its standbys
  // there, so that their syncs run beside its own.
  using BeforeWrite = std::function<void(std::string_view batch_data)>;

  // Commits everything `txn` staged as one WriteBatch: values, their index
  // entries, counts and the meta high-water marks. Syncs the write-ahead log
  // first in kSync mode. On failure nothing is applied and `txn` may be
  // discarded; `before_write`, when set and called, saw a batch that may or
  // may not be in the log (an IOError can come after the write).
  Status Commit(WriteTxn* txn, const BeforeWrite& before_write = nullptr);

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
  // disk despite the error (written, then the sync failed). Any thread
  // may read it (replication status from HTTP threads); the writer alone
  // changes it.
  uint64_t committed_batches() const {
    return committed_batches_.load(std::memory_order_acquire);
  }

  // ---- Encryption at rest (storage/task_store_crypto.cc) ----

  bool encrypted() const { return options_.keys != nullptr; }

  // The stored form of a group, or of a dedup key: what index keys, queue
  // values and states hold. Its lookup tag in an encrypted store, else the
  // value itself; empty stays empty. Every lookup by group or dedup key
  // goes through these.
  std::string StoredGroup(std::string_view group) const;
  std::string StoredDedupKey(std::string_view dedup_key) const;

  // Turns the stored value under `key` (of `tasks` or `corrupt`) into the
  // plain FlatBuffers bytes, in place: opens a sealed value, passes
  // plaintext when the store is not encrypted or accepts it. Corruption
  // naming the task, the value and the reason otherwise. The result is not
  // verified.
  Status OpenValue(std::string_view key, std::string* bytes) const;

  // For re-encryption: examines up to `limit` tasks of `family` (kTasks or
  // kCorrupt) with ids above `after`, in id order, and appends to *stale
  // those with a value not sealed with the current key. Sets *last to the
  // last id examined (`after` if none) and *more to whether tasks remain.
  Status FindStale(ColumnFamily family, TaskId after, size_t limit,
                   std::vector<TaskId>* stale, TaskId* last, bool* more) const;

  // Compacts every family to the bottom level, so that values replaced
  // since (sealed with an earlier key, or stored in plaintext, and index
  // entries holding plaintext groups) are dropped from the table files.
  // Values still in a live write-ahead log file are not affected. `held`
  // keeps the store open meanwhile (a reader runs this).
  Status CompactAll(const ReadView& held);

  // Makes a new backup of the store in `backup_dir` (created, mode 0700,
  // when missing) with RocksDB's BackupEngine, then deletes the oldest
  // backups beyond `keep` (0: none). The memtables are flushed first; the
  // writer goes on committing meanwhile, and the backup holds every commit
  // made before the call. `held` keeps the store open meanwhile (a reader
  // runs this). Busy when another backup of this store is running;
  // IOError or NotSupported from RocksDB, naming the directory.
  // Thread safety: any thread (task_store_backup.cc).
  Status CreateBackup(const ReadView& held, const std::string& backup_dir,
                      uint32_t keep, BackupInfo* info);

  // Makes a running CreateBackup stop, and every later one fail at once,
  // with Aborted: for a close that must not wait for a long copy.
  void StopBackup();

  // ---- Replication (task_store_replica.cc) ----

  // A replication primary: records, synced, that commits may now reach
  // standbys before this disk (kReplicationShippingKey)...
  Status BeginShipping();
  // ...and, at a clean close, that every commit handed out is on it.
  Status EndShipping();
  // Whether the last primary on this store did not close cleanly.
  Status WasShipping(bool* shipping) const;

  // How many writes went around Commit (index repairs, count rebuilds,
  // encryption bookkeeping, raw test writes) since the store was opened. A
  // replication log holds commits only, so when this changes its standbys
  // must copy a new base.
  uint64_t side_writes() const { return side_writes_.load(); }

  // Standbys: applies a primary's commits in order, then records that the
  // store follows `log_id` and syncs once; every write is in the log
  // before the call returns, and a crash keeps a prefix of the commits
  // (each whole). The first commit's position must be committed_batches()
  // + 1 and each next one more (InvalidArgument otherwise, nothing
  // applied); after each, the stored position must equal its own
  // (Corruption otherwise: the batch is not the primary's commit of that
  // position). Reloads the counts afterwards. Writer's thread only.
  Status ApplyReplicated(const std::vector<ReplicatedCommit>& commits,
                         uint64_t log_id);

  // The log id the store follows, as ApplyReplicated or MarkFollowing
  // stored it; 0 when none.
  Status FollowedLog(uint64_t* log_id) const;

  // Stores `log_id` as the one followed, synced: after a base copy.
  Status MarkFollowing(uint64_t log_id);

  // The epochs the store's commits came from (kClusterEpochsKey), oldest
  // first; empty when it never had a leader. Corruption when malformed.
  Status ReadEpochs(std::vector<EpochStart>* epochs) const;

  // Replaces the store's files with those of `restored_dir` (a store
  // restored from a base backup, on the same file system), and opens them:
  // closes RocksDB (waiting for reads in progress), renames the old
  // directory aside, renames `restored_dir` into its place, opens it and
  // deletes the old files. On failure before the swap the old store is
  // opened again. Writer's thread only.
  Status ReplaceWith(const std::string& restored_dir);

  // ---- For tests and tools ----

  // Overwrites a value of `tasks` under `key` (e.g. StateKey(id)) with raw
  // bytes, bypassing verification, indexes and encryption.
  Status PutRawForTesting(std::string_view key, std::string_view bytes);

  // The value stored under `key` in `family`, as on disk: sealed in an
  // encrypted store.
  Status GetStoredForTesting(ColumnFamily family, std::string_view key,
                             std::string* bytes) const;

 private:
  friend class WriteTxn;
  explicit TaskStore(const StoreOptions& options);
  Status OpenDb();
  // Read-only opens: checks that options_.path holds a RocksDB database,
  // makes the temporary secondary directory if none is given, and sets the
  // options of a secondary instance.
  Status PrepareReadOnly(rocksdb::DBOptions* db_options);
  // Refuses a directory of another schema version before RocksDB is asked
  // to open families this code does not know.
  Status CheckLayout(const std::string& path);
  void CloseDb();
  Status LoadMeta();
  Status LoadWriterMeta();
  // Checks the keys against the store's sealed lookup key (creating it in a
  // new store), and sets up the lookup tagger. REQUIRES: db_ is open.
  Status LoadKeys();
  // The steps of LoadKeys (storage/task_store_crypto.cc): the lookup key of
  // an encrypted store, opened with the configured keys, or a new one for a
  // store that has none yet.
  Status OpenLookupKey(const std::string& sealed_key, std::string* lookup_key);
  Status CreateLookupKey(std::string* lookup_key);
  // The stored value, not opened.
  Status GetStoredLocked(ColumnFamily family, std::string_view key,
                         std::string* bytes,
                         const rocksdb::Snapshot* snapshot) const;
  // The application value to store under `key` (sealed in an encrypted
  // store), and the opening of a stored one (storage/app_store.cc).
  Status StoredAppValue(std::string_view key, std::string_view plain,
                        std::string* stored) const;
  Status OpenAppValue(std::string_view key, std::string* bytes) const;
  // The value to store under `key` for the plain bytes: sealed into
  // *scratch in an encrypted store, else `plain` itself.
  Status StoredValue(std::string_view key, std::string_view plain,
                     std::string* scratch, std::string_view* value) const;
  // The bodies of the public reads, for callers that hold db_mutex_.
  Status GetTaskLocked(ColumnFamily family, TaskId id, TaskBytes* task,
                       const rocksdb::Snapshot* snapshot, Status* opened) const;
  Status GetSpecLocked(TaskId id, std::string* bytes,
                       const rocksdb::Snapshot* snapshot) const;
  Status GetEntryLocked(ColumnFamily family, std::string_view key,
                        std::string* value,
                        const rocksdb::Snapshot* snapshot) const;
  Status ScanLocked(ColumnFamily family, std::string_view prefix,
                    std::string_view start, const IndexVisitor& visit,
                    const rocksdb::Snapshot* snapshot) const;
  Status ScanReverseLocked(ColumnFamily family, std::string_view prefix,
                           std::string_view before, const IndexVisitor& visit,
                           const rocksdb::Snapshot* snapshot) const;
  Status ScanTasksLocked(ColumnFamily family, TaskId from,
                         const TaskVisitor& visit,
                         const rocksdb::Snapshot* snapshot) const;
  Status CheckIndexesLocked(size_t* mismatches,
                            std::vector<std::string>* problems,
                            const rocksdb::Snapshot* snapshot) const;
  // How a key of the stored index differs from the entries the states
  // imply: stored for no task, stored with another value, or not stored.
  enum class IndexMismatch : uint8_t {
    kWithoutTask = 0,
    kWrongValue = 1,
    kMissing = 2,
  };
  using IndexMismatchVisitor =
      std::function<void(IndexMismatch mismatch, std::string_view key,
                         std::string_view expected_value)>;
  // Compares the stored index with `expected` (every entry the states
  // imply; used up on the way), calling `visit` for each key where they
  // differ. The one comparison behind CheckIndexes and RepairIndexes, so
  // that a repair fixes exactly what a check reports.
  Status CompareIndexLocked(std::map<std::string, std::string>* expected,
                            const IndexMismatchVisitor& visit,
                            const rocksdb::Snapshot* snapshot = nullptr) const;
  Status RebuildCounts();
  // Makes the index match the states (after a task was set aside, its
  // index entries are not all known).
  Status RepairIndexes();
  // Moves every task of `tasks` that cannot be read (opened and verified)
  // to `corrupt`, as stored. RepairIndexes runs it first, so that a task
  // the rebuild cannot index is set aside (listed, and releasable once
  // readable) instead of left in `tasks` with no index entry.
  Status SetAsideUnreadable();
  // Stages in *batch the move of task `id`'s values from `tasks` to
  // `corrupt`: for SetAsideUnreadable and for Commit (a task the writer
  // could not read), so that both set a task aside the same way.
  Status StageSetAside(TaskId id, rocksdb::WriteBatch* batch) const;
  // OK when `family` is open (HasFamily); else FailedPrecondition naming it
  // and the read scope that left it closed. Every read checks it
  // before RocksDB is given the family's handle.
  Status CheckFamily(ColumnFamily family) const;
  rocksdb::ColumnFamilyHandle* Handle(ColumnFamily family) const {
    return handles_[static_cast<size_t>(family)];
  }
  // The state of task `id` the writer committed last, if it keeps it.
  const StateRecord* CachedState(TaskId id) const;
  // One Commit's write batch as it is staged (task_store.cc).
  class CommitBatch;

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
  // Atomic for committed_batches()'s readers on other threads.
  std::atomic<uint64_t> committed_batches_{0};
  std::array<uint64_t, kTaskStatusCount> counts_{};
  TypeCounts type_counts_;
  uint64_t last_commit_wal_nanos_ = 0;
  std::atomic<uint64_t> side_writes_{0};
  // A meta value of replication's (the log id, the epochs), or nothing
  // when absent.
  Status ReadReplicationMeta(std::string_view key,
                             std::optional<std::string>* value) const;
  Status MalformedMeta(std::string_view key) const;
  // The committed states of tasks the writer is likely to change next.
  // Emptied after any failure.
  StateCache states_;
  // Set by the first LoadKeys in an encrypted store, never changed after.
  std::unique_ptr<LookupTagger> tagger_;
  // Read-only stores: shared by every ReadView, exclusive for CatchUp, so
  // that what a view reads does not change under it; and the temporary
  // secondary directory this store made (removed after RocksDB is closed),
  // if any.
  mutable std::shared_mutex catch_up_mutex_;
  std::string temp_secondary_path_;
  // The engine of the backup being made, for StopBackup; one at a time.
  std::mutex backup_mutex_;
  rocksdb::BackupEngine* running_backup_ =
      nullptr;                    // GUARDED_BY(backup_mutex_)
  bool backups_stopped_ = false;  // GUARDED_BY(backup_mutex_)
  std::atomic<bool> backup_running_{false};
  // Whether the directory has the `app` family (a version 2 store opened
  // read-only does not); set by CheckLayout, true for a new directory.
  bool has_app_family_ = true;
};

// The changes of one group commit, staged as states. Reads see earlier
// changes of the same transaction: states always; index entries in the
// dedup, waiting and group indexes, the ones commands read while they
// stage (status and type entries staged here are not visible to
// GetIndex and ScanIndex). Owned by the writer's thread.
class WriteTxn {
 public:
  explicit WriteTxn(TaskStore* store);

  // The task's state as this transaction sees it. NotFound when there is
  // none (or it was deleted here); Corruption when it fails verification
  // or cannot be opened.
  Status GetState(TaskId id, StateRecord* state);

  // Reads the states of `ids` in one batched lookup, so that GetState
  // finds them without a read each (recovery reads every interrupted task
  // this way). States that cannot be read are left for GetState to report.
  Status Prefetch(const std::vector<TaskId>& ids);

  // Stages a new task. REQUIRES: no task with this id exists.
  void Insert(SpecRecord spec, StateRecord state);

  // Stages a new state for a task read with GetState, and writes the
  // failures it recorded (state.new_failures) into its history.
  void Update(StateRecord state);

  // Rewrites the spec of a task whose new state this transaction staged
  // (Update) with another payload and payload version; everything else in
  // it stays. The error of reading the stored spec, if any.
  Status ReplacePayload(TaskId id, std::string payload,
                        uint32_t payload_version);

  // Stages the removal of a task read with GetState: its spec, state,
  // failure history and index entries.
  void Delete(TaskId id);

  // Moves the values of `id`, whose state cannot be read, to `corrupt` as
  // stored, and removes the index entries under `known_index_keys` (the
  // state itself cannot say which it has).
  void Quarantine(TaskId id, std::vector<std::string> known_index_keys);

  // Returns a task set aside in `corrupt` to `tasks`, with `state` (its
  // stored state, perhaps changed) and the index entries it implies.
  // `as_stored` is the state as it was set aside: index entries it left
  // behind are replaced. The spec and failures go back as they are.
  // REQUIRES: no task with this id exists in `tasks`.
  void Reinstate(StateRecord state, StateRecord as_stored);

  // Seals every value of task `id` again with the current key, in place
  // (re-encryption): in `tasks`, or, with `set_aside`, in `corrupt`.
  void Reseal(TaskId id, bool set_aside);

  // An index entry as this transaction sees it; NotFound when absent.
  Status GetIndex(std::string_view key, std::string* value);

  // Visits index entries with `prefix`, from `start` (inclusive; empty: the
  // prefix), as this transaction sees them, in key order, until `visit`
  // returns false. `visit` must not change the transaction.
  Status ScanIndex(std::string_view prefix, std::string_view start,
                   const IndexVisitor& visit);

  // Stages a put, or with no value a delete, of the application key space
  // (spool/app_batch.h). Later writes of a key win.
  void PutApp(std::string key, std::optional<std::string> value) {
    app_[std::move(key)] = std::move(value);
  }

  // A meta value as this transaction sees it; NotFound when absent.
  Status GetMeta(std::string_view key, std::string* value);
  // Stages a meta value; an empty one deletes the key (no meta value is
  // empty).
  void PutMeta(std::string key, std::string value);

  // The next enqueue sequence number.
  uint64_t NextSequence() { return next_sequence_++; }

  // Notes that `id` was handed out, so the reservation covers it.
  void NoteId(TaskId id) {
    if (id > max_id_) max_id_ = id;
  }

  // Tasks with `status` as this transaction sees them would be, counting
  // only what it staged on top of the last commit. An upper bound, never
  // below the truth: SettleWaiters skips its scan when no task waits.
  uint64_t MayHave(TaskStatus status) const;

  // One staged task, with the state it had before this transaction. `after`
  // is empty for a deleted task; `spec` is set for a new one.
  struct Entry {
    std::optional<StateRecord> before;
    std::optional<StateRecord> after;
    std::optional<SpecRecord> spec;
    std::vector<FailureEntry> failures;
    // Failures recorded before the first failure staged here.
    uint32_t failures_before = 0;
  };
  const std::unordered_map<TaskId, Entry>& entries() const { return entries_; }
  // The ids of entries(), in the order they were first staged.
  const std::vector<TaskId>& order() const { return order_; }
  bool empty() const {
    return entries_.empty() && quarantined_.empty() && meta_.empty() &&
           resealed_.empty() && app_.empty();
  }

 private:
  friend class TaskStore;
  // Replaces the overlaid index entries of `previous` with those of `next`.
  void RestageIndexes(const StateRecord* previous, const StateRecord* next);
  Entry& Stage(TaskId id, std::optional<StateRecord> before);

  TaskStore* store_;
  // States read from the store and not yet changed: the `before` of a later
  // Update, so that no state is read twice.
  std::unordered_map<TaskId, StateRecord> reads_;
  std::unordered_map<TaskId, Entry> entries_;
  std::vector<TaskId> order_;
  std::vector<std::pair<TaskId, std::vector<std::string>>> quarantined_;
  // Taken back from `corrupt` (their states are in entries_): the state as
  // it was set aside.
  std::vector<StateRecord> reinstated_;
  // Tasks to seal again, and whether they are set aside.
  std::vector<std::pair<TaskId, bool>> resealed_;
  // Index entries as staged, for the indexes reads see: a value, or nullopt
  // for a removed entry. Ordered, so that scans see staged entries in order.
  std::map<std::string, std::optional<std::string>> index_overlay_;
  std::map<std::string, std::string> meta_;
  // Application writes: a value, or nullopt for a delete.
  std::map<std::string, std::optional<std::string>> app_;
  uint64_t next_sequence_;
  uint64_t max_id_ = 0;
  // Staged states by status, after minus before (see MayHave).
  std::array<int64_t, kTaskStatusCount> staged_counts_{};
};

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_TASK_STORE_H_
