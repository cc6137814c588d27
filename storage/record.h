// The task record: its in-memory form, and its FlatBuffers encoding.
//
// The writer decodes a record into a TaskRecord, changes it and encodes it
// again. Readers never decode: they verify the bytes and read them in place
// through VerifyRecord.

#ifndef SPOOL_STORAGE_RECORD_H_
#define SPOOL_STORAGE_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>
#include <spool/task.h>

namespace flatbuffers {
class FlatBufferBuilder;
}

namespace spool::storage {

namespace fb {
struct TaskRecord;
}

// One failed attempt, as the failure history keeps it.
struct FailureEntry {
  uint32_t attempt = 0;
  int64_t at_us = 0;
  std::string error;
};

// A task record, decoded. Times are microseconds since the Unix epoch.
struct TaskRecord {
  TaskId id = 0;
  std::string type;
  std::string payload;
  TaskStatus status = TaskStatus::kPending;
  int32_t priority = 0;
  uint32_t attempts = 0;
  uint32_t max_attempts = 1;
  int64_t created_us = 0;
  int64_t updated_us = 0;
  // 0 when the task may start at once.
  int64_t next_attempt_us = 0;
  uint64_t sequence = 0;
  std::string last_error;
  RetryPolicy retry;
  // Oldest first; bounded by kMaxFailureHistory.
  std::vector<FailureEntry> failures;
  std::string group;
  std::string dedup_key;
  std::string idempotency_key;
  std::vector<TaskId> depends_on;
  DependencyFailure on_dependency_failure = DependencyFailure::kCancel;
  // Per attempt; 0 for none.
  int64_t timeout_us = 0;
  bool cancel_requested = false;
  std::string handoff_reference;
  uint32_t payload_version = 0;
  std::string periodic_name;
  int64_t periodic_slot_us = 0;
};

// How many failed attempts a record remembers.
inline constexpr size_t kMaxFailureHistory = 16;
// The longest error text a record keeps; longer ones are cut.
inline constexpr size_t kMaxErrorBytes = 4096;

// Encodes `record` into `builder` (cleared first). The encoded bytes are
// builder->GetBufferPointer() .. + GetSize(), valid until the next use.
void EncodeRecord(const TaskRecord& record,
                  flatbuffers::FlatBufferBuilder* builder);

// Encodes `record` into a new string.
std::string EncodeRecord(const TaskRecord& record);

// Verifies `bytes` as the record of task `id`: the FlatBuffers structure, the
// file identifier, enum ranges, and that the stored id is `id`. On success
// sets *table to the record read in place (valid while `bytes` is). Returns
// Corruption naming the task id and what is wrong.
// REQUIRES: bytes.data() is 8-byte aligned, as a std::string's data is.
// FlatBuffers reads scalars in place; a RocksDB Slice (an iterator's value)
// may start anywhere, so pass it through AlignedRecordBytes first.
Status VerifyRecord(TaskId id, std::string_view bytes,
                    const fb::TaskRecord** table);

// `bytes` itself when it starts 8-byte aligned, else a copy in *scratch:
// what VerifyRecord may read in place. The result lives as long as `bytes`
// or *scratch, whichever it views.
std::string_view AlignedRecordBytes(std::string_view bytes,
                                    std::string* scratch);

// Verifies and decodes.
Status DecodeRecord(TaskId id, std::string_view bytes, TaskRecord* record);

// Fills a public TaskInfo from a verified record, read in place.
void FillTaskInfo(const fb::TaskRecord& table, TaskInfo* info);

// Appends a failed attempt to the record's history, keeping it bounded, and
// sets last_error.
void RecordFailure(TaskRecord* record, uint32_t attempt, int64_t at_us,
                   std::string_view error);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_RECORD_H_
