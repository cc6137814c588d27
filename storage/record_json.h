// A stored task as JSON, read in place from its verified FlatBuffers
// values (storage/record.h, TaskView): no TaskInfo or other intermediate
// object is built per task, so a reader can list thousands of tasks into one
// reused buffer.
//
// The JSON object has these members, in this order:
//
//   "id"               number
//   "type"             string
//   "status"           string, TaskStatusName(): "pending", "running", ...
//   "priority"         number
//   "group"            string, or null when the task has none
//   "dedup_key"        string, or null likewise
//   "idempotency_key"  string, or null likewise
//   "attempts"         number
//   "max_attempts"     number
//   "snoozes"          number (TaskContext::Snooze)
//   "interrupted_attempts"  number: of "attempts", those a crash interrupted
//                      (TaskInfo::interrupted_attempts)
//   "created_at"       string, RFC 3339 UTC with microseconds
//   "updated_at"       string, likewise
//   "next_attempt_at"  string, likewise, or null when the task may start now
//   "sequence"         number
//   "last_error"       string, or null when there is none
//   "failures"         array of {"attempt": number, "at": time, "error":
//                      string}, oldest first; [] when there are none
//   "result"           null when the task has no result (TaskContext::
//                      SetResult); else shown as the payload is, as
//                      "result" or "result_base64" below
//   and then exactly one of
//   "payload"          the payload itself, when it is declared JSON and is
//                      valid JSON (see IsValidJson), surrounding whitespace
//                      removed
//   "payload_base64"   the payload bytes in base64 (RFC 4648), otherwise
//
// Ids and sequences are 64-bit; JavaScript reads integers above 2^53
// inexactly, which spool's counters do not reach in practice.

#ifndef SPOOL_STORAGE_RECORD_JSON_H_
#define SPOOL_STORAGE_RECORD_JSON_H_

#include <cstdint>
#include <string>

namespace spool::storage {

struct TaskView;
class JsonWriter;

// What a task type's payload bytes hold, as far as JSON output cares.
enum class PayloadFormat : uint8_t {
  // Opaque bytes: always written as "payload_base64".
  kBinary = 0,
  // The application says the payload is JSON: written as "payload" when it
  // is valid JSON, and as "payload_base64" otherwise, so a mistaken
  // declaration never makes the output invalid or a query fail.
  kJson = 1,
  // Left out, as a listing asked (TaskQuery::include_payload): neither
  // the payload nor the result ("result", "result_base64") is written.
  kOmitted = 2,
};

// Appends `task` as one JSON object (see the file comment) to *out.
// REQUIRES: `task` is a verified view (TaskBytes::Verify).
void AppendTaskJson(const TaskView& task, PayloadFormat format,
                    std::string* out);

// Writes `task` as one JSON value through `writer`, which inserts the
// separating comma, e.g. when listing tasks into a JSON array.
// REQUIRES: `task` is a verified view (TaskBytes::Verify).
void WriteTaskJson(const TaskView& task, PayloadFormat format,
                   JsonWriter* writer);

// Appends the time `micros` (since the Unix epoch, UTC) in RFC 3339 form
// with six fractional digits, e.g. "2024-02-29T13:05:09.000123Z", without
// quotes. Years outside 0000..9999, which RFC 3339 cannot express, use the
// ISO 8601 expanded form with a sign and six year digits, as JavaScript's
// Date.prototype.toISOString does, e.g. "+275760-09-13T00:00:00.000000Z".
// Defined for every int64_t value.
void AppendRfc3339(int64_t micros, std::string* out);

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_RECORD_JSON_H_
