// Key encodings of the column families.
//
// All integers are big-endian so that RocksDB's bytewise order is the queue's
// order. Signed values are biased (sign bit flipped) so that negative numbers
// sort before positive ones; priorities are also inverted so that higher
// priorities sort first.

#ifndef SPOOL_STORAGE_KEYS_H_
#define SPOOL_STORAGE_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

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

// `tasks` and `running`: the task id, 8 bytes.
std::string TaskKey(TaskId id);
bool DecodeTaskKey(std::string_view key, TaskId* id);

// Strings inside keys are length-prefixed (2 bytes), so that any bytes are
// allowed and a prefix scan for one string never matches a longer one.
inline constexpr size_t kMaxKeyString = 0xFFFF;
void PutKeyString(std::string* dst, std::string_view value);
// Reads a length-prefixed string at *input and advances it.
bool GetKeyString(std::string_view* input, std::string_view* value);

// `ready`: priority (descending), then enqueue sequence; 12 bytes. The value
// is a QueueValue.
struct ReadyKey {
  int32_t priority = 0;
  uint64_t sequence = 0;
};
std::string EncodeReadyKey(const ReadyKey& key);
bool DecodeReadyKey(std::string_view key, ReadyKey* out);

// `scheduled`: the time the task becomes due, then its sequence; 16 bytes.
// The value is a QueueValue.
struct ScheduledKey {
  int64_t due_us = 0;
  uint64_t sequence = 0;
};
std::string EncodeScheduledKey(const ScheduledKey& key);
bool DecodeScheduledKey(std::string_view key, ScheduledKey* out);

// What the scheduler needs of a queued task besides its key: its id,
// priority, type and group (for limits and fair rotation).
struct QueueValue {
  TaskId id = 0;
  int32_t priority = 0;
  std::string_view type;
  std::string_view group;
};
std::string EncodeQueueValue(const QueueValue& value);
// The views in *out point into `value`.
bool DecodeQueueValue(std::string_view value, QueueValue* out);

// `by_status`: status (1 byte), then id. Every task has one.
std::string StatusIndexKey(TaskStatus status, TaskId id);
std::string StatusIndexPrefix(TaskStatus status);
bool DecodeStatusIndexKey(std::string_view key, TaskStatus* status, TaskId* id);

// `by_type`: type, status, id. Every task has one.
std::string TypeIndexKey(std::string_view type, TaskStatus status, TaskId id);
std::string TypeIndexPrefix(std::string_view type);
std::string TypeIndexPrefix(std::string_view type, TaskStatus status);
// The id at the end of a by_type key.
bool DecodeTrailingId(std::string_view key, TaskId* id);

// `by_group`: group, id; the value is the status (1 byte). Only tasks with a
// group have one.
std::string GroupIndexKey(std::string_view group, TaskId id);
std::string GroupIndexPrefix(std::string_view group);

// `dedup`: the key itself; the value is the id (8 bytes). Only active tasks
// with a dedup key have one.
std::string DedupIndexKey(std::string_view dedup_key);

// `waiting_on`: the dependency's id, then the waiting task's id. Only
// waiting tasks have them, one per dependency.
std::string WaitingIndexKey(TaskId dependency, TaskId waiter);
std::string WaitingIndexPrefix(TaskId dependency);

// Meta keys of the counts by type: "tcount/" + type + status.
std::string TypeCountKey(std::string_view type, TaskStatus status);
inline constexpr std::string_view kTypeCountPrefix = "tcount/";
bool DecodeTypeCountKey(std::string_view key, std::string_view* type,
                        TaskStatus* status);

// The smallest string greater than every string with `prefix`; empty when
// there is none (the prefix is all 0xff).
std::string PrefixSuccessor(std::string_view prefix);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_KEYS_H_
