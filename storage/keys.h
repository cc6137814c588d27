// Key encodings of the column families (see storage/task_store.h).
//
// All integers are big-endian so that RocksDB's bytewise order is the queue's
// order. Signed values are biased (sign bit flipped) so that negative numbers
// sort before positive ones; priorities are also inverted so that higher
// priorities sort first.

#ifndef SPOOL_STORAGE_KEYS_H_
#define SPOOL_STORAGE_KEYS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <spool/task.h>

namespace spool::storage {

void PutBigEndian64(std::string* dst, uint64_t value);
void PutBigEndian32(std::string* dst, uint32_t value);
// REQUIRES: at least 8 (resp. 4) readable bytes at `p`.
uint64_t GetBigEndian64(const char* p);
uint32_t GetBigEndian32(const char* p);

// Maps a priority so that unsigned ascending order is priority descending.
uint32_t EncodePriority(int32_t priority);
int32_t DecodePriority(uint32_t encoded);

// Maps a signed time so that unsigned ascending order is time ascending.
uint64_t EncodeTime(int64_t micros);
int64_t DecodeTime(uint64_t encoded);

// ---- `tasks`: a task's values, under its id ----
//
// The id (8 bytes) and a kind byte, so that a task's values sit together, in
// id order: its spec, its state, then its failure history (each failure
// numbered, 4 more bytes). `corrupt` uses the same keys for the values it
// holds.
enum class TaskValueKind : uint8_t {
  kSpec = 0,
  kState = 1,
  kFailure = 2,
};
std::string SpecKey(TaskId id);
std::string StateKey(TaskId id);
std::string FailureKey(TaskId id, uint32_t number);
// The prefix every value of task `id` starts with: the id alone.
std::string TaskPrefix(TaskId id);
// Splits a `tasks` key; false when it is malformed. *number is the
// failure's number (0 for the other kinds).
bool DecodeTaskKey(std::string_view key, TaskId* id, TaskValueKind* kind,
                   uint32_t* number);

// What the value under a `tasks` key is, for messages: "task 7's state".
std::string TaskValueName(std::string_view key);

// Strings inside keys are length-prefixed (2 bytes), so that any bytes are
// allowed and a prefix scan for one string never matches a longer one.
// Longer strings are cut: callers keep types, groups and keys far below
// the limit (Options::max_type_bytes, the runtime's key limits, queries).
// Within one prefix, strings therefore sort by length first.
inline constexpr size_t kMaxKeyString = 0xFFFF;
void PutKeyString(std::string* dst, std::string_view value);
// Reads a length-prefixed string at *input and advances it.
bool GetKeyString(std::string_view* input, std::string_view* value);

// ---- `index`: every index entry, in one family ----
//
// The first byte of a key says which index it belongs to.
enum class IndexKind : char {
  // (status, type, id) -> QueueValue for a queued task (pending or
  // retry-scheduled), "" for the others. Every task has one, and only one
  // entry moves when its status changes. It serves listings by status and
  // type (a prefix) and by status (the types merged by id).
  kStatus = 's',
  // (type, id) -> "". Every task, from enqueue to purge: it never moves,
  // so a listing by type scans live entries only, where the status ranges
  // of a busy type are full of the deletions its claims leave behind.
  kType = 't',
  // (group, id) -> status (1 byte). Only tasks with a group.
  kGroup = 'g',
  // dedup key -> id (8 bytes). Active tasks with a dedup key, and finished
  // ones that reserved theirs (unique_for) until the writer releases it.
  kDedup = 'd',
  // (dependency id, waiting id) -> "". Waiting tasks, one per dependency.
  kWaiting = 'w',
  // (due time, sequence) -> id (8 bytes). Queued tasks that wait for a time
  // (a delay or a retry backoff).
  kDue = 'u',
};

// What the scheduler needs of a queued task besides its id and type (in the
// key): its place in the ready order, its due time, and its group (for
// limits and fair rotation). The value of its status entry.
struct QueueValue {
  int32_t priority = 0;
  uint64_t sequence = 0;
  // 0: may start at once.
  int64_t due_us = 0;
  std::string_view group;
};
std::string EncodeQueueValue(const QueueValue& value);
// The views in *out point into `value`.
bool DecodeQueueValue(std::string_view value, QueueValue* out);

std::string StatusIndexKey(TaskStatus status, std::string_view type, TaskId id);
// Every status entry of `status`, and those of `status` and `type`.
std::string StatusIndexPrefix(TaskStatus status);
std::string StatusIndexPrefix(TaskStatus status, std::string_view type);
// *type views into `key`.
bool DecodeStatusIndexKey(std::string_view key, TaskStatus* status,
                          std::string_view* type, TaskId* id);

std::string TypeIndexKey(std::string_view type, TaskId id);
std::string TypeIndexPrefix(std::string_view type);

// The id at the end of a status, type, group or waiting key.
bool DecodeTrailingId(std::string_view key, TaskId* id);

std::string GroupIndexKey(std::string_view group, TaskId id);
std::string GroupIndexPrefix(std::string_view group);

std::string DedupIndexKey(std::string_view dedup_key);

std::string WaitingIndexKey(TaskId dependency, TaskId waiter);
std::string WaitingIndexPrefix(TaskId dependency);

std::string DueIndexKey(int64_t due_us, uint64_t sequence);
// The prefix of every due entry, earliest first.
std::string DueIndexPrefix();

// The 8-byte big-endian id that dedup and due entries hold.
std::string IdValue(TaskId id);
bool DecodeIdValue(std::string_view value, TaskId* id);

// Meta keys of the counts by type: "tcount/" and the type, length-prefixed
// (PutKeyString). The value holds the type's count of tasks in each status
// (PutCounts).
std::string TypeCountKey(std::string_view type);
inline constexpr std::string_view kTypeCountPrefix = "tcount/";
bool DecodeTypeCountKey(std::string_view key, std::string_view* type);

// The meta key of a replicated store's log id (8 bytes, big-endian): the
// primary's replication log this store's commits follow (a primary's own,
// or the one a standby follows). Absent in a store that never replicated.
// Written around Commit, not in it, on purpose: it is each node's own and
// is not replicated.
inline constexpr std::string_view kReplicationLogIdKey = "replication/log_id";

// The meta key a replication primary writes (synced) before it hands its
// first commit to its standbys, and deletes when it closes cleanly (an
// empty value). A primary hands each commit to its standbys before its own
// sync, so a store that still holds this key may lack commits that its
// standbys hold: its next primary draws a new log id, and every standby
// copies a new base (docs/replication.md, "Shipping before the sync").
// Deleted too when the store starts following a primary. Not replicated.
inline constexpr std::string_view kReplicationShippingKey =
    "replication/shipping";

// The meta key of a clustered store's epochs (docs/replication.md,
// "Failover"): each leader's epoch and the position of its first commit,
// oldest first, at most kMaxEpochsKept of them. Written by a commit, so it
// is replicated: a standby's last entry is the epoch of its last applied
// commit. Absent in a store that never had a leader.
inline constexpr std::string_view kClusterEpochsKey = "cluster/epochs";
inline constexpr size_t kMaxEpochsKept = 64;

struct EpochStart {
  uint64_t epoch = 0;
  // The position of the epoch's first commit (the one that wrote it).
  uint64_t first_position = 0;
};
// 16 bytes per entry: epoch and first position, big-endian.
std::string EncodeEpochs(const std::vector<EpochStart>& epochs);
// False when the value is not a whole number of entries, or the epochs or
// positions do not grow.
bool DecodeEpochs(std::string_view value, std::vector<EpochStart>* epochs);

// A count per status, as meta values hold them: kTaskStatusCount
// big-endian 64-bit numbers, in status order.
using StatusCountArray = std::array<uint64_t, kTaskStatusCount>;
void PutCounts(std::string* dst, const StatusCountArray& counts);
// Reads counts at *input and advances it; false when too short.
bool GetCounts(std::string_view* input, StatusCountArray* counts);

// The smallest string greater than every string with `prefix`; empty when
// there is none (the prefix is all 0xff).
std::string PrefixSuccessor(std::string_view prefix);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_KEYS_H_
