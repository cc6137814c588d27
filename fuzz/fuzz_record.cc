// fuzz_record: the decoders of a task's stored values (storage/record.h:
// its spec, its state and its failure entries), TaskBytes, and the task's
// JSON form (storage/record_json.h) on arbitrary bytes, as a reader or the
// writer meets them when a value on disk is damaged.
//
// Every input is used twice:
//   - whole, as a value of each kind (spec, state, failure entry);
//   - as a task (TaskBytes), framed like this:
//       byte 0      bit 0: the task has a spec; bit 1: it has a state
//       then        each value present, spec first, then state, then
//                   failure entries (oldest first) until the input ends;
//                   each a 4-byte big-endian length and that many bytes (a
//                   shorter tail is taken whole)
//     and each of its values again as a value of its kind.
// make_corpus.cc writes seeds of both shapes.
//
// Invariants checked on every input:
//   - Verify{Spec,State,Failure} accept exactly the buffers that pass
//     FlatBuffers verification with their kind's identifier ("SPSP",
//     "SPST", "SPFL"), carry the expected id (spec and state), and hold a
//     non-empty type, in-range enums and an aligned dependency list (state);
//     everything else is Corruption naming the task id. The accepted table
//     is read in place.
//   - Decode{Spec,State,Failure} agree with the verifiers, with the same
//     status, and decode the same from a misaligned copy.
//   - Re-encoding a decoded value decodes to the same value, encodes to the
//     same bytes again and verifies.
//   - RecordFailure on a decoded state sets last_error, cut on a UTF-8
//     boundary, counts the failure and stages an entry that encodes and
//     decodes back; the state still round-trips.
//   - TaskBytes::Verify accepts a task exactly when it has a spec and a
//     state and every value verifies as the task's; else Corruption naming
//     it. A verified view fills a TaskInfo with the decoded fields, and its
//     JSON (both payload formats) is valid by IsValidJson and by an
//     independent parser, and reads back to the task's fields: numbers,
//     UTF-8 text (invalid bytes replaced), RFC 3339 times that parse back to
//     the same microsecond, the failure history and the payload (base64
//     decoding back to the bytes, or embedded JSON equal to the payload's).
//   - The task re-encoded from its decoded values, moved or copied into
//     another TaskBytes, writes the same JSON.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "fuzz/fuzz_support.h"
#include "fuzz/json_reference.h"
#include "storage/json_writer.h"
#include "storage/record.h"
#include "storage/record_json.h"
#include "storage/task_record_generated.h"

namespace spool::fuzz {
namespace {

using storage::FailureEntry;
using storage::PayloadFormat;
using storage::SpecRecord;
using storage::StateRecord;
using storage::TaskBytes;
using storage::TaskView;
namespace fb = storage::fb;

// The file identifiers of storage/record.cc, written down again: they are
// part of the stored format.
constexpr char kSpecIdentifier[] = "SPSP";
constexpr char kStateIdentifier[] = "SPST";
constexpr char kFailureIdentifier[] = "SPFL";

// Bytes at an 8-byte aligned address, exactly `size` long (so that
// AddressSanitizer sees a read one byte past the end), as the verifiers
// require.
class ExactBytes {
 public:
  explicit ExactBytes(std::string_view bytes)
      : data_(new char[bytes.size() + (bytes.empty() ? 1 : 0)]),
        size_(bytes.size()) {
    if (size_ > 0) std::memcpy(data_.get(), bytes.data(), size_);
  }
  std::string_view view() const { return std::string_view(data_.get(), size_); }
  const uint8_t* data() const {
    return reinterpret_cast<const uint8_t*>(data_.get());
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_;
};

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool SameSpec(const SpecRecord& a, const SpecRecord& b) {
  return a.id == b.id && a.type == b.type && a.payload == b.payload &&
         a.created_us == b.created_us && a.group == b.group &&
         a.dedup_key == b.dedup_key && a.idempotency_key == b.idempotency_key &&
         a.payload_version == b.payload_version &&
         a.periodic_name == b.periodic_name &&
         a.periodic_slot_us == b.periodic_slot_us;
}

bool SameFailure(const FailureEntry& a, const FailureEntry& b) {
  return a.attempt == b.attempt && a.at_us == b.at_us && a.error == b.error;
}

// Field-by-field equality of what a state stores; jitter compares bits so
// that NaN equals itself. new_failures is not stored, so not compared.
bool SameState(const StateRecord& a, const StateRecord& b) {
  return a.id == b.id && a.status == b.status && a.attempts == b.attempts &&
         a.max_attempts == b.max_attempts && a.updated_us == b.updated_us &&
         a.next_attempt_us == b.next_attempt_us &&
         a.last_error == b.last_error &&
         a.cancel_requested == b.cancel_requested &&
         a.handoff_reference == b.handoff_reference &&
         a.failures_total == b.failures_total && a.retry.kind == b.retry.kind &&
         a.retry.max_attempts == b.retry.max_attempts &&
         a.retry.initial_delay == b.retry.initial_delay &&
         a.retry.max_delay == b.retry.max_delay &&
         SameBits(a.retry.jitter, b.retry.jitter) && a.type == b.type &&
         a.priority == b.priority && a.sequence == b.sequence &&
         a.stored_group == b.stored_group &&
         a.stored_dedup_key == b.stored_dedup_key &&
         a.depends_on == b.depends_on &&
         a.on_dependency_failure == b.on_dependency_failure &&
         a.timeout_us == b.timeout_us && a.snoozes == b.snoozes &&
         a.interrupted_attempts == b.interrupted_attempts &&
         a.result == b.result;
}

std::string IdMessage(TaskId id) { return "task " + std::to_string(id) + ": "; }

void CheckCorruption(const Status& s, TaskId id, std::string_view what) {
  FUZZ_CHECK(s.IsCorruption(), std::string(what) + ": " + s.ToString());
  FUZZ_CHECK(s.message().rfind(IdMessage(id), 0) == 0,
             std::string(what) + ": message does not name task " +
                 std::to_string(id) + ": " + s.ToString());
}

// ---------------------------------------------------------------------------
// The reference verdicts: FlatBuffers' own verifier, then the rules of
// storage/record.h written out again.

template <class Table>
const Table* Structure(std::string_view bytes, const char* identifier) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  flatbuffers::Verifier verifier(data, bytes.size());
  if (!verifier.VerifyBuffer<Table>(identifier)) return nullptr;
  return flatbuffers::GetRoot<Table>(data);
}

bool NonEmpty(const flatbuffers::String* s) {
  return s != nullptr && s->size() > 0;
}

// Whether VerifySpec(id, bytes) must accept.
bool SpecAcceptable(std::string_view bytes, TaskId id) {
  const auto* spec = Structure<fb::TaskSpec>(bytes, kSpecIdentifier);
  return spec != nullptr && spec->id() == id && NonEmpty(spec->type());
}

bool StateAcceptable(std::string_view bytes, TaskId id) {
  const auto* state = Structure<fb::TaskState>(bytes, kStateIdentifier);
  if (state == nullptr || state->id() != id) return false;
  if (static_cast<uint8_t>(state->status()) >= kTaskStatusCount) return false;
  if (!NonEmpty(state->type())) return false;
  if (state->retry() != nullptr &&
      static_cast<uint8_t>(state->retry()->kind()) > 2) {
    return false;
  }
  if (static_cast<uint8_t>(state->on_dependency_failure()) > 2) return false;
  const auto* deps = state->depends_on();
  return deps == nullptr ||
         reinterpret_cast<uintptr_t>(deps->data()) % alignof(uint64_t) == 0;
}

bool FailureAcceptable(std::string_view bytes) {
  return Structure<fb::Failure>(bytes, kFailureIdentifier) != nullptr;
}

// The id a value holds, when FlatBuffers can read it; else 0.
TaskId SpecId(std::string_view bytes) {
  const auto* spec = Structure<fb::TaskSpec>(bytes, kSpecIdentifier);
  return spec != nullptr ? spec->id() : 0;
}
// Whether spec and state name the same type; REQUIRES: both acceptable.
bool SameType(std::string_view spec_bytes, std::string_view state_bytes) {
  const auto* spec = Structure<fb::TaskSpec>(spec_bytes, kSpecIdentifier);
  const auto* state = Structure<fb::TaskState>(state_bytes, kStateIdentifier);
  return spec->type()->string_view() == state->type()->string_view();
}
TaskId StateId(std::string_view bytes) {
  const auto* state = Structure<fb::TaskState>(bytes, kStateIdentifier);
  return state != nullptr ? state->id() : 0;
}

// A copy of `bytes` one byte past an aligned address: what a RocksDB slice
// may look like. The decoders accept any alignment.
struct Misaligned {
  explicit Misaligned(std::string_view bytes) : buffer(bytes.size() + 1, '\0') {
    if (!bytes.empty()) std::memcpy(&buffer[1], bytes.data(), bytes.size());
  }
  std::string_view view() const { return std::string_view(buffer).substr(1); }
  std::string buffer;
};

// ---------------------------------------------------------------------------
// One value of each kind.

void CheckSpec(std::string_view bytes) {
  const TaskId id = SpecId(bytes);
  const fb::TaskSpec* table = nullptr;
  const Status verified = storage::VerifySpec(id, bytes, &table);
  SpecRecord spec;
  const Status decoded = storage::DecodeSpec(id, bytes, &spec);
  FUZZ_CHECK(verified == decoded, "VerifySpec says " + verified.ToString() +
                                      ", DecodeSpec says " +
                                      decoded.ToString());
  SpecRecord misaligned;
  const Status from_misaligned =
      storage::DecodeSpec(id, Misaligned(bytes).view(), &misaligned);
  FUZZ_CHECK(
      from_misaligned == decoded,
      "DecodeSpec of a misaligned copy says " + from_misaligned.ToString());
  FUZZ_CHECK(verified.ok() == SpecAcceptable(bytes, id),
             "VerifySpec says " + verified.ToString() +
                 " of a spec the reference " +
                 (verified.ok() ? "refuses" : "accepts"));
  if (!verified.ok()) {
    CheckCorruption(verified, id, "VerifySpec");
    return;
  }
  FUZZ_CHECK(static_cast<const void*>(table) ==
                 static_cast<const void*>(
                     flatbuffers::GetRoot<fb::TaskSpec>(bytes.data())),
             "the spec is not read in place");
  FUZZ_CHECK(SameSpec(spec, misaligned), "misaligned copy decodes differently");
  FUZZ_CHECK(spec.id == id && !spec.type.empty(), "decoded id or type");

  const Status other = storage::VerifySpec(id + 1, bytes, &table);
  CheckCorruption(other, id + 1, "a spec under the wrong id");

  const std::string encoded = storage::EncodeSpec(spec);
  SpecRecord again;
  Status s = storage::DecodeSpec(id, encoded, &again);
  FUZZ_CHECK(s.ok(), "re-encoded spec fails: " + s.ToString());
  FUZZ_CHECK(SameSpec(spec, again), "re-encoded spec decodes differently");
  FUZZ_CHECK(storage::EncodeSpec(again) == encoded,
             "spec encoding is not deterministic");
}

void CheckFailureRoundTrip(const FailureEntry& failure, std::string_view what) {
  const std::string encoded = storage::EncodeFailure(failure);
  const ExactBytes exact(encoded);
  const fb::Failure* table = nullptr;
  Status s = storage::VerifyFailure(1, exact.view(), &table);
  FUZZ_CHECK(s.ok(),
             std::string(what) + " fails VerifyFailure: " + s.ToString());
  FailureEntry again;
  s = storage::DecodeFailure(1, encoded, &again);
  FUZZ_CHECK(s.ok() && SameFailure(failure, again),
             std::string(what) + " does not round-trip");
  FUZZ_CHECK(storage::EncodeFailure(again) == encoded,
             std::string(what) + ": encoding is not deterministic");
}

void CheckFailure(std::string_view bytes, TaskId id) {
  const fb::Failure* table = nullptr;
  const Status verified = storage::VerifyFailure(id, bytes, &table);
  FailureEntry failure;
  const Status decoded = storage::DecodeFailure(id, bytes, &failure);
  FUZZ_CHECK(verified == decoded, "VerifyFailure says " + verified.ToString() +
                                      ", DecodeFailure says " +
                                      decoded.ToString());
  FailureEntry misaligned;
  const Status from_misaligned =
      storage::DecodeFailure(id, Misaligned(bytes).view(), &misaligned);
  FUZZ_CHECK(
      from_misaligned == decoded,
      "DecodeFailure of a misaligned copy says " + from_misaligned.ToString());
  FUZZ_CHECK(verified.ok() == FailureAcceptable(bytes),
             "VerifyFailure says " + verified.ToString() +
                 " of an entry the reference " +
                 (verified.ok() ? "refuses" : "accepts"));
  if (!verified.ok()) {
    CheckCorruption(verified, id, "VerifyFailure");
    return;
  }
  FUZZ_CHECK(static_cast<const void*>(table) ==
                 static_cast<const void*>(
                     flatbuffers::GetRoot<fb::Failure>(bytes.data())),
             "the failure entry is not read in place");
  FUZZ_CHECK(SameFailure(failure, misaligned),
             "misaligned copy decodes differently");
  CheckFailureRoundTrip(failure, "re-encoded failure entry");
}

// `error` is any text: the failure RecordFailure records.
void CheckState(std::string_view bytes, std::string_view error) {
  const TaskId id = StateId(bytes);
  const fb::TaskState* table = nullptr;
  const Status verified = storage::VerifyState(id, bytes, &table);
  StateRecord state;
  const Status decoded = storage::DecodeState(id, bytes, &state);
  FUZZ_CHECK(verified == decoded, "VerifyState says " + verified.ToString() +
                                      ", DecodeState says " +
                                      decoded.ToString());
  StateRecord misaligned;
  const Status from_misaligned =
      storage::DecodeState(id, Misaligned(bytes).view(), &misaligned);
  FUZZ_CHECK(from_misaligned == decoded,
             "DecodeState of a misaligned copy says " +
                 from_misaligned.ToString() + ", of the original " +
                 decoded.ToString());
  FUZZ_CHECK(verified.ok() == StateAcceptable(bytes, id),
             "VerifyState says " + verified.ToString() +
                 " of a state the reference " +
                 (verified.ok() ? "refuses" : "accepts"));
  if (!verified.ok()) {
    CheckCorruption(verified, id, "VerifyState");
    return;
  }
  FUZZ_CHECK(static_cast<const void*>(table) ==
                 static_cast<const void*>(
                     flatbuffers::GetRoot<fb::TaskState>(bytes.data())),
             "the state is not read in place");
  FUZZ_CHECK(SameState(state, misaligned),
             "misaligned copy decodes differently");
  FUZZ_CHECK(state.id == id && !state.type.empty(), "decoded id or type");
  FUZZ_CHECK(static_cast<size_t>(state.status) < kTaskStatusCount,
             "status out of range accepted");
  FUZZ_CHECK(storage::StatusOf(*table) == state.status, "StatusOf");
  FUZZ_CHECK(state.retry.max_attempts == state.max_attempts,
             "retry.max_attempts");
  FUZZ_CHECK(state.new_failures.empty(), "a decoded state has new failures");

  const Status other = storage::VerifyState(id + 1, bytes, &table);
  CheckCorruption(other, id + 1, "a state under the wrong id");

  // Re-encode: a fixed point after one round.
  const std::string encoded = storage::EncodeState(state);
  StateRecord again;
  Status s = storage::DecodeState(id, encoded, &again);
  FUZZ_CHECK(s.ok(), "re-encoded state fails: " + s.ToString());
  FUZZ_CHECK(SameState(state, again), "re-encoded state decodes differently");
  FUZZ_CHECK(storage::EncodeState(again) == encoded,
             "state encoding is not deterministic");
  {
    const ExactBytes exact(encoded);
    s = storage::VerifyState(id, exact.view(), &table);
    FUZZ_CHECK(s.ok(), "re-encoded state fails VerifyState: " + s.ToString());
  }

  // A failed attempt whose error text is `error` (any bytes, any size).
  StateRecord failed = state;
  const uint32_t attempt = state.attempts + 1;
  storage::RecordFailure(&failed, attempt, state.updated_us, error);
  FUZZ_CHECK(failed.failures_total == state.failures_total + 1,
             "failures_total " + std::to_string(failed.failures_total) +
                 " after " + std::to_string(state.failures_total));
  FUZZ_CHECK(failed.last_error.size() <= storage::kMaxErrorBytes,
             "last_error holds " + std::to_string(failed.last_error.size()) +
                 " bytes");
  if (error.size() <= storage::kMaxErrorBytes) {
    FUZZ_CHECK(failed.last_error == error, "a short error was cut");
  } else {
    const std::string_view cut = failed.last_error;
    FUZZ_CHECK(
        cut.size() >= 3 && cut.substr(cut.size() - 3) == "..." &&
            error.substr(0, cut.size() - 3) == cut.substr(0, cut.size() - 3),
        "a long error is not a prefix and \"...\"");
    if (IsValidUtf8(error)) {
      FUZZ_CHECK(IsValidUtf8(cut), "the cut splits a UTF-8 sequence");
    }
  }
  FUZZ_CHECK(failed.new_failures.size() == 1, "RecordFailure stages one entry");
  const FailureEntry& entry = failed.new_failures.back();
  FUZZ_CHECK(entry.attempt == attempt && entry.at_us == state.updated_us &&
                 entry.error == failed.last_error,
             "the staged failure entry");
  CheckFailureRoundTrip(entry, "a recorded failure entry");
  StateRecord failed_again;
  s = storage::DecodeState(id, storage::EncodeState(failed), &failed_again);
  FUZZ_CHECK(s.ok() && SameState(failed, failed_again) &&
                 failed_again.new_failures.empty(),
             "a state with a failure does not round-trip");
}

// ---------------------------------------------------------------------------
// A whole task.

void CheckNumber(const JsonValue& object, std::string_view name,
                 const std::string& expected) {
  const JsonValue* value = object.Find(name);
  FUZZ_CHECK(value != nullptr && value->kind == JsonValue::Kind::kNumber &&
                 value->text == expected,
             std::string(name) + " should be " + expected);
}

void CheckString(const JsonValue& object, std::string_view name,
                 std::string_view raw) {
  const JsonValue* value = object.Find(name);
  FUZZ_CHECK(value != nullptr && value->kind == JsonValue::Kind::kString,
             std::string(name) + " is not a string");
  FUZZ_CHECK(value->text == ReplaceInvalidUtf8(raw),
             std::string(name) + ": " + Printable(value->text) +
                 " does not read back as " + Printable(raw));
}

// An optional text: null when empty.
void CheckStringOrNull(const JsonValue& object, std::string_view name,
                       std::string_view raw) {
  const JsonValue* value = object.Find(name);
  FUZZ_CHECK(value != nullptr, std::string(name) + " missing");
  if (raw.empty()) {
    FUZZ_CHECK(value->kind == JsonValue::Kind::kNull,
               std::string(name) + " should be null");
  } else {
    CheckString(object, name, raw);
  }
}

void CheckTime(const JsonValue& value, std::string_view name, int64_t micros) {
  FUZZ_CHECK(value.kind == JsonValue::Kind::kString,
             std::string(name) + " is not a string");
  const std::optional<int64_t> parsed = ParseRfc3339Micros(value.text);
  FUZZ_CHECK(parsed.has_value() && *parsed == micros,
             std::string(name) + ": \"" + value.text + "\" is not " +
                 std::to_string(micros) + " us");
}

// A task's values, decoded.
struct Decoded {
  SpecRecord spec;
  StateRecord state;
  std::vector<FailureEntry> failures;
};

// The JSON of a verified task, read back through the reference parser.
void CheckJson(const Decoded& task, PayloadFormat format,
               const std::string& json) {
  FUZZ_CHECK(storage::IsValidJson(json),
             "IsValidJson rejects " + Printable(json, 2000));
  FUZZ_CHECK(IsValidUtf8(json), "not UTF-8: " + Printable(json, 2000));
  std::optional<JsonValue> doc = ParseJsonReference(json, 512);
  FUZZ_CHECK(doc.has_value(),
             "reference parser rejects " + Printable(json, 2000));
  FUZZ_CHECK(doc->kind == JsonValue::Kind::kObject, "not an object");

  // The members, in order (storage/record_json.h).
  static const char* const kMembers[] = {"id",
                                         "type",
                                         "status",
                                         "priority",
                                         "group",
                                         "dedup_key",
                                         "idempotency_key",
                                         "attempts",
                                         "max_attempts",
                                         "snoozes",
                                         "interrupted_attempts",
                                         "created_at",
                                         "updated_at",
                                         "next_attempt_at",
                                         "sequence",
                                         "last_error",
                                         "failures"};
  constexpr size_t kCount = sizeof(kMembers) / sizeof(kMembers[0]);
  // The members above, "result", and the payload's.
  FUZZ_CHECK(doc->members.size() == kCount + 2,
             "the object has " + std::to_string(doc->members.size()) +
                 " members: " + DescribeJson(*doc));
  for (size_t i = 0; i < kCount; ++i) {
    FUZZ_CHECK(doc->members[i].first == kMembers[i],
               "member " + std::to_string(i) + " is " + doc->members[i].first +
                   ", not " + kMembers[i]);
  }

  const SpecRecord& spec = task.spec;
  const StateRecord& state = task.state;
  CheckNumber(*doc, "id", std::to_string(spec.id));
  CheckString(*doc, "type", spec.type);
  const JsonValue* status = doc->Find("status");
  FUZZ_CHECK(status != nullptr && status->kind == JsonValue::Kind::kString &&
                 status->text == TaskStatusName(state.status),
             "status");
  CheckNumber(*doc, "priority", std::to_string(state.priority));
  CheckStringOrNull(*doc, "group", spec.group);
  CheckStringOrNull(*doc, "dedup_key", spec.dedup_key);
  CheckStringOrNull(*doc, "idempotency_key", spec.idempotency_key);
  CheckNumber(*doc, "attempts", std::to_string(state.attempts));
  CheckNumber(*doc, "max_attempts", std::to_string(state.max_attempts));
  CheckNumber(*doc, "snoozes", std::to_string(state.snoozes));
  CheckNumber(*doc, "interrupted_attempts",
              std::to_string(state.interrupted_attempts));
  CheckTime(*doc->Find("created_at"), "created_at", spec.created_us);
  CheckTime(*doc->Find("updated_at"), "updated_at", state.updated_us);
  const JsonValue* next = doc->Find("next_attempt_at");
  if (state.next_attempt_us == 0) {
    FUZZ_CHECK(next->kind == JsonValue::Kind::kNull, "next_attempt_at");
  } else {
    CheckTime(*next, "next_attempt_at", state.next_attempt_us);
  }
  CheckNumber(*doc, "sequence", std::to_string(state.sequence));
  CheckStringOrNull(*doc, "last_error", state.last_error);
  const JsonValue* failures = doc->Find("failures");
  FUZZ_CHECK(failures->kind == JsonValue::Kind::kArray &&
                 failures->items.size() == task.failures.size(),
             "failures");
  for (size_t i = 0; i < task.failures.size(); ++i) {
    const JsonValue& entry = failures->items[i];
    FUZZ_CHECK(
        entry.kind == JsonValue::Kind::kObject && entry.members.size() == 3,
        "failure entry " + DescribeJson(entry));
    CheckNumber(entry, "attempt", std::to_string(task.failures[i].attempt));
    FUZZ_CHECK(entry.Find("at") != nullptr, "failure without at");
    CheckTime(*entry.Find("at"), "failures[].at", task.failures[i].at_us);
    CheckString(entry, "error", task.failures[i].error);
  }

  const std::string& last_name = doc->members.back().first;
  FUZZ_CHECK(last_name == "payload" || last_name == "payload_base64",
             "the last member is " + last_name);
  const JsonValue* payload = doc->Find("payload");
  const JsonValue* base64 = doc->Find("payload_base64");
  // What the writer should have embedded: the payload without surrounding
  // JSON whitespace, when that is valid JSON.
  std::string_view trimmed = spec.payload;
  auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  while (!trimmed.empty() && is_space(trimmed.front()))
    trimmed.remove_prefix(1);
  while (!trimmed.empty() && is_space(trimmed.back())) trimmed.remove_suffix(1);
  const std::optional<JsonValue> payload_doc =
      format == PayloadFormat::kJson ? ParseJsonReference(trimmed, 512)
                                     : std::nullopt;
  if (payload_doc.has_value()) {
    FUZZ_CHECK(payload != nullptr, "valid JSON payload was not embedded: " +
                                       Printable(spec.payload));
    FUZZ_CHECK(*payload == *payload_doc,
               "embedded payload " + DescribeJson(*payload) + " differs from " +
                   DescribeJson(*payload_doc));
  } else {
    FUZZ_CHECK(base64 != nullptr && base64->kind == JsonValue::Kind::kString,
               "payload_base64 missing for " + Printable(spec.payload));
    const std::optional<std::string> bytes = DecodeBase64(base64->text);
    FUZZ_CHECK(bytes.has_value() && *bytes == spec.payload,
               "payload_base64 does not decode to the payload");
  }
}

// TaskInfo from the view agrees with the decoded values. `info` starts out
// holding another task's fields, all of which must be replaced.
void CheckTaskInfo(const TaskView& view, const Decoded& task) {
  TaskInfo info;
  info.id = task.spec.id + 1;
  info.payload = "stale";
  info.next_attempt_at = Timestamp(Duration(1));
  info.last_error = "stale";
  info.failures.push_back({1, Timestamp(Duration(1)), "stale"});
  info.group = info.dedup_key = info.idempotency_key = "stale";
  info.depends_on = {1, 2};
  info.cancel_requested = !task.state.cancel_requested;
  info.handoff_reference = "stale";
  storage::FillTaskInfo(view, &info);

  const SpecRecord& spec = task.spec;
  const StateRecord& state = task.state;
  FUZZ_CHECK(
      info.id == spec.id && info.type == spec.type &&
          info.payload == spec.payload && info.status == state.status &&
          info.priority == state.priority && info.attempts == state.attempts &&
          info.max_attempts == state.max_attempts &&
          info.created_at.time_since_epoch().count() == spec.created_us &&
          info.updated_at.time_since_epoch().count() == state.updated_us &&
          info.sequence == state.sequence &&
          info.last_error == state.last_error && info.group == spec.group &&
          info.dedup_key == spec.dedup_key &&
          info.idempotency_key == spec.idempotency_key &&
          info.depends_on == state.depends_on &&
          info.on_dependency_failure == state.on_dependency_failure &&
          info.timeout.count() == state.timeout_us &&
          info.cancel_requested == state.cancel_requested &&
          info.handoff_reference == state.handoff_reference &&
          info.payload_version == spec.payload_version &&
          info.snoozes == state.snoozes &&
          info.interrupted_attempts == state.interrupted_attempts &&
          info.unique_for.count() == state.unique_for_us &&
          info.result == state.result,
      "FillTaskInfo differs from the decoded values");
  FUZZ_CHECK(info.next_attempt_at.has_value() == (state.next_attempt_us != 0),
             "next_attempt_at presence");
  if (info.next_attempt_at) {
    FUZZ_CHECK(info.next_attempt_at->time_since_epoch().count() ==
                   state.next_attempt_us,
               "next_attempt_at value");
  }
  FUZZ_CHECK(info.failures.size() == task.failures.size(), "failure count");
  for (size_t i = 0; i < task.failures.size(); ++i) {
    FUZZ_CHECK(info.failures[i].attempt == task.failures[i].attempt &&
                   info.failures[i].at.time_since_epoch().count() ==
                       task.failures[i].at_us &&
                   info.failures[i].error == task.failures[i].error,
               "failure " + std::to_string(i));
  }
}

std::string JsonOf(const TaskBytes& task, PayloadFormat format) {
  std::string json;
  storage::AppendTaskJson(task.view(), format, &json);
  return json;
}

// `parts` are the task's values as framed: spec, state, failures; a spec or
// state the frame leaves out is absent.
void CheckTask(bool has_spec, bool has_state,
               const std::vector<std::string_view>& parts) {
  const std::string_view spec_bytes = has_spec ? parts[0] : "";
  const std::string_view state_bytes = has_state ? parts[has_spec ? 1 : 0] : "";
  const size_t first_failure = (has_spec ? 1 : 0) + (has_state ? 1 : 0);
  TaskBytes task;
  if (has_spec) {
    task.mutable_spec()->assign(spec_bytes.data(), spec_bytes.size());
    task.set_has_spec();
  }
  if (has_state) {
    task.mutable_state()->assign(state_bytes.data(), state_bytes.size());
    task.set_has_state();
  }
  for (size_t i = first_failure; i < parts.size(); ++i) {
    task.AddFailure()->assign(parts[i].data(), parts[i].size());
  }
  FUZZ_CHECK(task.failure_count() == parts.size() - first_failure,
             "failure_count");

  // The reference reads the copies: a part of the frame may sit anywhere.
  TaskId id = 0;
  if (has_state && StateId(task.state()) != 0) {
    id = StateId(task.state());
  } else if (has_spec) {
    id = SpecId(task.spec());
  }
  // A state copies its spec's type; one naming another belongs elsewhere.
  bool acceptable = has_spec && has_state && SpecAcceptable(task.spec(), id) &&
                    StateAcceptable(task.state(), id) &&
                    SameType(task.spec(), task.state());
  for (size_t i = 0; i < task.failure_count(); ++i) {
    acceptable = acceptable && FailureAcceptable(task.failure(i));
  }

  const Status verified = task.Verify(id);
  FUZZ_CHECK(verified.ok() == acceptable,
             "TaskBytes::Verify says " + verified.ToString() +
                 " of a task the reference " +
                 (verified.ok() ? "refuses" : "accepts"));
  if (!verified.ok()) {
    CheckCorruption(verified, id, "TaskBytes::Verify");
    return;
  }

  const TaskView& view = task.view();
  FUZZ_CHECK(
      static_cast<const void*>(view.spec) ==
              static_cast<const void*>(
                  flatbuffers::GetRoot<fb::TaskSpec>(task.spec().data())) &&
          static_cast<const void*>(view.state) ==
              static_cast<const void*>(
                  flatbuffers::GetRoot<fb::TaskState>(task.state().data())),
      "the view is not read in place");
  FUZZ_CHECK(
      view.failures != nullptr && view.failures->size() == task.failure_count(),
      "the view's failures");

  Decoded decoded;
  Status s = storage::DecodeSpec(id, task.spec(), &decoded.spec);
  FUZZ_CHECK(s.ok(), "a verified spec does not decode: " + s.ToString());
  s = storage::DecodeState(id, task.state(), &decoded.state);
  FUZZ_CHECK(s.ok(), "a verified state does not decode: " + s.ToString());
  for (size_t i = 0; i < task.failure_count(); ++i) {
    decoded.failures.emplace_back();
    s = storage::DecodeFailure(id, task.failure(i), &decoded.failures.back());
    FUZZ_CHECK(s.ok(), "a verified failure does not decode: " + s.ToString());
  }
  FUZZ_CHECK(storage::TypeOf(view) == decoded.state.type, "TypeOf");
  FUZZ_CHECK(storage::StatusOf(*view.state) == decoded.state.status,
             "StatusOf");

  CheckTaskInfo(view, decoded);

  // JSON, both formats; appending keeps what the buffer held.
  std::string binary_json = "[";
  storage::AppendTaskJson(view, PayloadFormat::kBinary, &binary_json);
  FUZZ_CHECK(binary_json[0] == '[', "AppendTaskJson overwrote the buffer");
  binary_json.erase(0, 1);
  CheckJson(decoded, PayloadFormat::kBinary, binary_json);
  const std::string json_json = JsonOf(task, PayloadFormat::kJson);
  CheckJson(decoded, PayloadFormat::kJson, json_json);
  {
    // Through a JsonWriter, as a listing writes tasks into an array.
    std::string listed;
    storage::JsonWriter writer(&listed);
    writer.BeginArray();
    storage::WriteTaskJson(view, PayloadFormat::kJson, &writer);
    storage::WriteTaskJson(view, PayloadFormat::kJson, &writer);
    writer.EndArray();
    FUZZ_CHECK(listed == "[" + json_json + "," + json_json + "]",
               "WriteTaskJson in an array differs from AppendTaskJson");
  }

  // The task re-encoded from its decoded values writes the same JSON.
  TaskBytes again;
  *again.mutable_spec() = storage::EncodeSpec(decoded.spec);
  again.set_has_spec();
  *again.mutable_state() = storage::EncodeState(decoded.state);
  again.set_has_state();
  for (const FailureEntry& f : decoded.failures) {
    *again.AddFailure() = storage::EncodeFailure(f);
  }
  s = again.Verify(id);
  FUZZ_CHECK(s.ok(), "the re-encoded task fails Verify: " + s.ToString());
  const std::string binary_again = JsonOf(again, PayloadFormat::kBinary);
  FUZZ_CHECK(binary_again == binary_json,
             "JSON of the re-encoded task differs:\n  " +
                 Printable(binary_json, 2000) + "\n  " +
                 Printable(binary_again, 2000));
  FUZZ_CHECK(JsonOf(again, PayloadFormat::kJson) == json_json,
             "JSON (payload format json) of the re-encoded task differs");

  // Copied and moved, the values verify again to the same task.
  TaskBytes copy;
  copy.CopyFrom(task);
  s = copy.Verify(id);
  FUZZ_CHECK(s.ok() && JsonOf(copy, PayloadFormat::kBinary) == binary_json,
             "a copied task differs: " + s.ToString());
  TaskBytes moved(std::move(task));
  s = moved.Verify(id);
  FUZZ_CHECK(s.ok() && JsonOf(moved, PayloadFormat::kBinary) == binary_json,
             "a moved task differs: " + s.ToString());
  // Moved from, a TaskBytes is cleared.
  s = task.Verify(id);
  CheckCorruption(s, id, "a moved-from task");
  // Cleared and refilled, a reused TaskBytes reads the next task.
  moved.Clear();
  s = moved.Verify(id);
  CheckCorruption(s, id, "a cleared task");
}

// Splits the framed form (see the file comment).
void CheckFramed(std::string_view input) {
  if (input.empty()) return;
  const auto flags = static_cast<uint8_t>(input[0]);
  input.remove_prefix(1);
  std::vector<std::string_view> parts;
  // A bound on the failures, so that an input of many empty ones stays fast.
  constexpr size_t kMaxParts = 2 + 2 * storage::kMaxFailureHistory;
  while (!input.empty() && parts.size() < kMaxParts) {
    uint32_t length = 0;
    for (int i = 0; i < 4 && !input.empty(); ++i) {
      length = (length << 8) | static_cast<uint8_t>(input[0]);
      input.remove_prefix(1);
    }
    const size_t n = length < input.size() ? length : input.size();
    parts.push_back(input.substr(0, n));
    input.remove_prefix(n);
  }
  const bool has_spec = (flags & 1) != 0 && !parts.empty();
  const bool has_state =
      (flags & 2) != 0 && parts.size() > (has_spec ? 1u : 0u);

  // Each value as its kind, in an exact buffer of its own.
  std::vector<ExactBytes> exact;
  exact.reserve(parts.size());
  for (std::string_view part : parts) exact.emplace_back(part);
  size_t i = 0;
  if (has_spec) CheckSpec(exact[i++].view());
  if (has_state) {
    CheckState(exact[i].view(), parts[0]);
    ++i;
  }
  for (; i < exact.size(); ++i) CheckFailure(exact[i].view(), 7);

  CheckTask(has_spec, has_state, parts);
}

}  // namespace
}  // namespace spool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spool::fuzz;
  // libFuzzer's buffer holds exactly `size` bytes at an aligned address, so
  // AddressSanitizer catches a read one byte past a value.
  const std::string_view whole(reinterpret_cast<const char*>(data), size);
  CheckSpec(whole);
  CheckState(whole, whole);
  CheckFailure(whole, 42);
  CheckFramed(whole);
  return 0;
}
