// A task's stored values: their in-memory forms, and their FlatBuffers
// encodings (storage/task_record.fbs).
//
// A task is stored as a spec (what it is, written once), a state (where it
// is, rewritten by every transition) and a bounded history of failures. The
// writer decodes and re-encodes states only; it never touches a spec after
// the enqueue. Readers never decode: they verify the bytes and read them in
// place through a TaskView.

#ifndef SPOOL_STORAGE_RECORD_H_
#define SPOOL_STORAGE_RECORD_H_

#include <cstdint>
#include <optional>
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
struct TaskSpec;
struct TaskState;
struct Failure;
}  // namespace fb

// What a task is. Written once, at enqueue. Times are microseconds since
// the Unix epoch.
struct SpecRecord {
  TaskId id = 0;
  std::string type;
  std::string payload;
  int64_t created_us = 0;
  std::string group;
  std::string dedup_key;
  std::string idempotency_key;
  uint32_t payload_version = 0;
  std::string periodic_name;
  int64_t periodic_slot_us = 0;
};

// One failed attempt, as the failure history keeps it.
struct FailureEntry {
  uint32_t attempt = 0;
  int64_t at_us = 0;
  std::string error;
};

// Where a task is. Every transition rewrites it, and only it.
struct StateRecord {
  TaskId id = 0;
  TaskStatus status = TaskStatus::kPending;
  uint32_t attempts = 0;
  uint32_t max_attempts = 1;
  int64_t updated_us = 0;
  // 0 when the task may start at once.
  int64_t next_attempt_us = 0;
  std::string last_error;
  bool cancel_requested = false;
  std::string handoff_reference;
  // The remote worker leasing the running attempt, and the lease's first
  // deadline (task_record.fbs); empty and 0 otherwise.
  std::string lease_node;
  int64_t lease_deadline_us = 0;
  // Failures recorded so far, ever (see FailureKey).
  uint32_t failures_total = 0;
  // The policy's max_attempts mirrors the field above.
  RetryPolicy retry;
  // Copies of the spec, so that a transition needs nothing else.
  std::string type;
  int32_t priority = 0;
  uint64_t sequence = 0;
  // In stored form (TaskStore::StoredGroup, StoredDedupKey).
  std::string stored_group;
  std::string stored_dedup_key;
  std::vector<TaskId> depends_on;
  DependencyFailure on_dependency_failure = DependencyFailure::kCancel;
  // Per attempt; 0 for none.
  int64_t timeout_us = 0;
  // Snoozes so far; a manual retry resets them.
  uint32_t snoozes = 0;
  // Set on success when the handler set a result.
  std::optional<std::string> result;
  // How long after the task finishes (updated_us) its dedup key stays
  // reserved for it (EnqueueOptions::unique_for); 0 for not at all.
  int64_t unique_for_us = 0;
  // Attempts interrupted by a crash since the enqueue or the last manual
  // retry (each also counted in `attempts`).
  uint32_t interrupted_attempts = 0;
  // Not stored in the state: the failed attempts this change recorded
  // (RecordFailure), which WriteTxn::Update writes into the task's failure
  // history. Empty in a state read from storage.
  std::vector<FailureEntry> new_failures;
};

// Whether a finished task's dedup key is still reserved for it at `now_us`
// (EnqueueOptions::unique_for). False for an active task: it holds its key
// by being active.
bool HoldsReservation(const StateRecord& state, int64_t now_us);

// Records a failed attempt: sets last_error (cut to kMaxErrorBytes) and
// adds the attempt to the failures the next Update writes.
void RecordFailure(StateRecord* state, uint32_t attempt, int64_t at_us,
                   std::string_view error);

// How many failed attempts a task's history keeps.
inline constexpr uint32_t kMaxFailureHistory = 16;
// The longest error text a record keeps; longer ones are cut.
inline constexpr size_t kMaxErrorBytes = 4096;

// ---- Encoding ----
//
// Each encoder clears `builder` first; the encoded bytes are
// builder->GetBufferPointer() .. + GetSize(), valid until its next use.
void EncodeSpec(const SpecRecord& spec,
                flatbuffers::FlatBufferBuilder* builder);
void EncodeState(const StateRecord& state,
                 flatbuffers::FlatBufferBuilder* builder);
void EncodeFailure(const FailureEntry& failure,
                   flatbuffers::FlatBufferBuilder* builder);
// The same, into new strings.
std::string EncodeSpec(const SpecRecord& spec);
std::string EncodeState(const StateRecord& state);
std::string EncodeFailure(const FailureEntry& failure);

// ---- Verification ----
//
// Each verifies `bytes` as a value of task `id`: the FlatBuffers structure,
// the identifier of its kind, enum ranges and, for a spec or state, that the
// stored id is `id`. On success sets *table to the value read in place
// (valid while `bytes` is). Returns Corruption naming the task and what is
// wrong.
// REQUIRES: bytes.data() is 8-byte aligned, as a std::string's data is.
// FlatBuffers reads scalars in place; a RocksDB Slice (an iterator's value)
// may start anywhere, so pass it through AlignedRecordBytes first.
Status VerifySpec(TaskId id, std::string_view bytes,
                  const fb::TaskSpec** table);
Status VerifyState(TaskId id, std::string_view bytes,
                   const fb::TaskState** table);
Status VerifyFailure(TaskId id, std::string_view bytes,
                     const fb::Failure** table);

// The payload of a verified spec, read in place (valid while its bytes
// are); empty when it has none.
std::string_view SpecPayload(const fb::TaskSpec& spec);

// `bytes` itself when it starts 8-byte aligned, else a copy in *scratch:
// what the verifiers may read in place. The result lives as long as `bytes`
// or *scratch, whichever it views.
std::string_view AlignedRecordBytes(std::string_view bytes,
                                    std::string* scratch);

// ---- Decoding (the writer) ----
//
// Verify, then copy every field out; any alignment will do.
Status DecodeSpec(TaskId id, std::string_view bytes, SpecRecord* spec);
Status DecodeState(TaskId id, std::string_view bytes, StateRecord* state);
Status DecodeFailure(TaskId id, std::string_view bytes, FailureEntry* failure);

// Cuts an error text to kMaxErrorBytes, marking the cut with "...", never
// inside a UTF-8 sequence.
std::string CutError(std::string_view error);

// ---- Reading in place (readers) ----

// One task's stored values, verified: read in place, never copied out.
struct TaskView {
  const fb::TaskSpec* spec = nullptr;
  const fb::TaskState* state = nullptr;
  // The failure history, oldest first.
  const std::vector<const fb::Failure*>* failures = nullptr;
};

// One task's stored values as read from storage (opened, in an encrypted
// store), and their verified view. Reusable: Clear keeps the buffers, so
// that a listing reads task after task without allocating.
class TaskBytes {
 public:
  TaskBytes() = default;
  TaskBytes(const TaskBytes&) = delete;
  TaskBytes& operator=(const TaskBytes&) = delete;
  // Moves the values; the view is not carried over (Verify again).
  TaskBytes(TaskBytes&& other) noexcept;
  TaskBytes& operator=(TaskBytes&& other) noexcept;

  void Clear();
  // Copies `other`'s values; Verify again before view().
  void CopyFrom(const TaskBytes& other);
  // The buffers the reads fill. Failures are appended oldest first.
  std::string* mutable_spec() { return &spec_; }
  std::string* mutable_state() { return &state_; }
  std::string* AddFailure();
  bool has_spec() const { return has_spec_; }
  bool has_state() const { return has_state_; }
  void set_has_spec() { has_spec_ = true; }
  void set_has_state() { has_state_ = true; }

  // Verifies every value as task `id`'s. Corruption naming the task and
  // the value at fault; NotFound-free: a missing spec or state is
  // Corruption too (the caller checks for a task that does not exist).
  Status Verify(TaskId id);
  // REQUIRES: Verify returned OK, and nothing changed since.
  const TaskView& view() const { return view_; }
  // The task's id; REQUIRES as for view().
  TaskId id() const;

  const std::string& spec() const { return spec_; }
  const std::string& state() const { return state_; }
  size_t failure_count() const { return failure_count_; }
  const std::string& failure(size_t i) const { return failures_[i]; }

 private:
  std::string spec_;
  std::string state_;
  // failures_[0, failure_count_) hold values; the rest are spare buffers.
  std::vector<std::string> failures_;
  size_t failure_count_ = 0;
  bool has_spec_ = false;
  bool has_state_ = false;
  std::vector<const fb::Failure*> failure_tables_;
  TaskView view_;
};

// Fills a public TaskInfo from a verified view; with `with_payload` false,
// TaskInfo::payload is left empty and TaskInfo::result unset (a listing's
// projection).
void FillTaskInfo(const TaskView& task, TaskInfo* info,
                  bool with_payload = true);
// Appends the view's failure history, oldest first, to `failures`.
void AppendFailures(const TaskView& task,
                    std::vector<TaskInfo::Failure>* failures);

// The state's status; REQUIRES: a verified state.
TaskStatus StatusOf(const fb::TaskState& state);
// The task's type, from its state.
std::string_view TypeOf(const TaskView& task);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_RECORD_H_
