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

// `ready`: priority (descending), then enqueue sequence; 12 bytes. The value
// is the task id (8 bytes).
struct ReadyKey {
  int32_t priority = 0;
  uint64_t sequence = 0;
};
std::string EncodeReadyKey(const ReadyKey& key);
bool DecodeReadyKey(std::string_view key, ReadyKey* out);

// `scheduled`: the time the task becomes due, then its sequence; 16 bytes.
// The value is the task id (8 bytes) and its priority (4 bytes, encoded).
struct ScheduledKey {
  int64_t due_us = 0;
  uint64_t sequence = 0;
};
std::string EncodeScheduledKey(const ScheduledKey& key);
bool DecodeScheduledKey(std::string_view key, ScheduledKey* out);

std::string EncodeScheduledValue(TaskId id, int32_t priority);
bool DecodeScheduledValue(std::string_view value, TaskId* id,
                          int32_t* priority);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_KEYS_H_
