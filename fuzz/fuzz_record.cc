// fuzz_record: the task record decoder (storage/record.h) and its JSON form
// (storage/record_json.h) on arbitrary bytes, as a reader meets them when a
// record on disk is damaged.
//
// Invariants checked on every input:
//   - VerifyRecord accepts exactly the buffers that pass FlatBuffers
//     verification, carry the expected id, and hold in-range enums and a
//     non-empty type; everything else is Corruption naming the task id.
//   - DecodeRecord agrees with VerifyRecord, with the same status.
//   - A verified record read in place (FillTaskInfo) matches the decoded one.
//   - Its JSON (both payload formats) is valid by IsValidJson and by an
//     independent parser, and reads back to the record's fields: numbers,
//     UTF-8 text (invalid bytes replaced), RFC 3339 times that parse back to
//     the same microsecond, the failure history and the payload (base64
//     decoding back to the bytes, or embedded JSON equal to the payload's).
//   - Re-encoding the decoded record decodes to the same record, encodes to
//     the same bytes again, and writes the same JSON.
//   - RecordFailure keeps the history bounded and the error cut on a UTF-8
//     boundary, and the record still round-trips.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <flatbuffers/flatbuffers.h>

#include "fuzz/fuzz_support.h"
#include "fuzz/json_reference.h"
#include "storage/json_writer.h"
#include "storage/record.h"
#include "storage/record_json.h"
#include "storage/task_record_generated.h"

namespace spool::fuzz {
namespace {

using storage::DecodeRecord;
using storage::EncodeRecord;
using storage::FailureEntry;
using storage::PayloadFormat;
using storage::TaskRecord;
using storage::VerifyRecord;

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Field-by-field equality; jitter compares bits so that NaN equals itself.
bool SameRecord(const TaskRecord& a, const TaskRecord& b) {
  if (a.failures.size() != b.failures.size()) return false;
  for (size_t i = 0; i < a.failures.size(); ++i) {
    const FailureEntry& x = a.failures[i];
    const FailureEntry& y = b.failures[i];
    if (x.attempt != y.attempt || x.at_us != y.at_us || x.error != y.error) {
      return false;
    }
  }
  return a.id == b.id && a.type == b.type && a.payload == b.payload &&
         a.status == b.status && a.priority == b.priority &&
         a.attempts == b.attempts && a.max_attempts == b.max_attempts &&
         a.created_us == b.created_us && a.updated_us == b.updated_us &&
         a.next_attempt_us == b.next_attempt_us && a.sequence == b.sequence &&
         a.last_error == b.last_error && a.retry.kind == b.retry.kind &&
         a.retry.max_attempts == b.retry.max_attempts &&
         a.retry.initial_delay == b.retry.initial_delay &&
         a.retry.max_delay == b.retry.max_delay &&
         SameBits(a.retry.jitter, b.retry.jitter);
}

std::string IdMessage(TaskId id) { return "task " + std::to_string(id) + ": "; }

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

void CheckTime(const JsonValue& value, std::string_view name, int64_t micros) {
  FUZZ_CHECK(value.kind == JsonValue::Kind::kString,
             std::string(name) + " is not a string");
  const std::optional<int64_t> parsed = ParseRfc3339Micros(value.text);
  FUZZ_CHECK(parsed.has_value() && *parsed == micros,
             std::string(name) + ": \"" + value.text + "\" is not " +
                 std::to_string(micros) + " us");
}

// The JSON of a verified record, read back through the reference parser.
void CheckJson(const storage::fb::TaskRecord& table, const TaskRecord& record,
               PayloadFormat format, const std::string& json) {
  FUZZ_CHECK(storage::IsValidJson(json),
             "IsValidJson rejects " + Printable(json, 2000));
  FUZZ_CHECK(IsValidUtf8(json), "not UTF-8: " + Printable(json, 2000));
  std::optional<JsonValue> doc = ParseJsonReference(json, 512);
  FUZZ_CHECK(doc.has_value(),
             "reference parser rejects " + Printable(json, 2000));
  FUZZ_CHECK(doc->kind == JsonValue::Kind::kObject, "not an object");

  CheckNumber(*doc, "id", std::to_string(record.id));
  CheckString(*doc, "type", record.type);
  const JsonValue* status = doc->Find("status");
  FUZZ_CHECK(status != nullptr && status->text == TaskStatusName(record.status),
             "status");
  CheckNumber(*doc, "priority", std::to_string(record.priority));
  CheckNumber(*doc, "attempts", std::to_string(record.attempts));
  CheckNumber(*doc, "max_attempts", std::to_string(record.max_attempts));
  FUZZ_CHECK(doc->Find("created_at") && doc->Find("updated_at"), "times");
  CheckTime(*doc->Find("created_at"), "created_at", record.created_us);
  CheckTime(*doc->Find("updated_at"), "updated_at", record.updated_us);
  const JsonValue* next = doc->Find("next_attempt_at");
  FUZZ_CHECK(next != nullptr, "next_attempt_at missing");
  if (record.next_attempt_us == 0) {
    FUZZ_CHECK(next->kind == JsonValue::Kind::kNull, "next_attempt_at");
  } else {
    CheckTime(*next, "next_attempt_at", record.next_attempt_us);
  }
  CheckNumber(*doc, "sequence", std::to_string(record.sequence));
  const JsonValue* last_error = doc->Find("last_error");
  FUZZ_CHECK(last_error != nullptr, "last_error missing");
  if (record.last_error.empty()) {
    FUZZ_CHECK(last_error->kind == JsonValue::Kind::kNull, "last_error");
  } else {
    CheckString(*doc, "last_error", record.last_error);
  }
  const JsonValue* failures = doc->Find("failures");
  FUZZ_CHECK(failures != nullptr && failures->kind == JsonValue::Kind::kArray &&
                 failures->items.size() == record.failures.size(),
             "failures");
  for (size_t i = 0; i < record.failures.size(); ++i) {
    const JsonValue& entry = failures->items[i];
    CheckNumber(entry, "attempt", std::to_string(record.failures[i].attempt));
    FUZZ_CHECK(entry.Find("at") != nullptr, "failure without at");
    CheckTime(*entry.Find("at"), "failures[].at", record.failures[i].at_us);
    CheckString(entry, "error", record.failures[i].error);
  }

  const JsonValue* payload = doc->Find("payload");
  const JsonValue* base64 = doc->Find("payload_base64");
  FUZZ_CHECK((payload == nullptr) != (base64 == nullptr),
             "exactly one of payload and payload_base64");
  // What the writer should have embedded: the payload without surrounding
  // JSON whitespace, when that is valid JSON.
  std::string_view trimmed = record.payload;
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
                                       Printable(record.payload));
    FUZZ_CHECK(*payload == *payload_doc,
               "embedded payload " + DescribeJson(*payload) + " differs from " +
                   DescribeJson(*payload_doc));
  } else {
    FUZZ_CHECK(base64 != nullptr && base64->kind == JsonValue::Kind::kString,
               "payload_base64 missing for " + Printable(record.payload));
    const std::optional<std::string> bytes = DecodeBase64(base64->text);
    FUZZ_CHECK(bytes.has_value() && *bytes == record.payload,
               "payload_base64 does not decode to the payload");
  }
  (void)table;
}

void CheckVerifiedRecord(TaskId id, const storage::fb::TaskRecord& table,
                         const TaskRecord& record, std::string_view bytes) {
  FUZZ_CHECK(record.id == id, "decoded id");
  FUZZ_CHECK(!record.type.empty(), "empty type accepted");
  FUZZ_CHECK(static_cast<size_t>(record.status) < kTaskStatusCount,
             "status out of range accepted");
  FUZZ_CHECK(record.retry.max_attempts == record.max_attempts,
             "retry.max_attempts");

  // In place and decoded agree.
  TaskInfo info;
  storage::FillTaskInfo(table, &info);
  FUZZ_CHECK(
      info.id == record.id && info.type == record.type &&
          info.payload == record.payload && info.status == record.status &&
          info.priority == record.priority &&
          info.attempts == record.attempts &&
          info.max_attempts == record.max_attempts &&
          info.created_at.time_since_epoch().count() == record.created_us &&
          info.updated_at.time_since_epoch().count() == record.updated_us &&
          info.sequence == record.sequence &&
          info.last_error == record.last_error,
      "FillTaskInfo differs from DecodeRecord");
  FUZZ_CHECK(info.next_attempt_at.has_value() == (record.next_attempt_us != 0),
             "next_attempt_at presence");
  if (info.next_attempt_at) {
    FUZZ_CHECK(info.next_attempt_at->time_since_epoch().count() ==
                   record.next_attempt_us,
               "next_attempt_at value");
  }

  // JSON, both formats; appending keeps what the buffer held.
  std::string binary_json = "[";
  storage::AppendTaskJson(table, PayloadFormat::kBinary, &binary_json);
  FUZZ_CHECK(binary_json[0] == '[', "AppendTaskJson overwrote the buffer");
  binary_json.erase(0, 1);
  CheckJson(table, record, PayloadFormat::kBinary, binary_json);
  std::string json_json;
  storage::AppendTaskJson(table, PayloadFormat::kJson, &json_json);
  CheckJson(table, record, PayloadFormat::kJson, json_json);

  // Re-encode: a fixed point after one round.
  const std::string encoded = EncodeRecord(record);
  TaskRecord again;
  Status s = DecodeRecord(id, encoded, &again);
  FUZZ_CHECK(s.ok(), "re-encoded record fails: " + s.ToString());
  FUZZ_CHECK(SameRecord(record, again),
             "re-encoded record decodes differently");
  FUZZ_CHECK(EncodeRecord(again) == encoded, "encoding is not deterministic");
  const storage::fb::TaskRecord* table_again = nullptr;
  s = VerifyRecord(id, encoded, &table_again);
  FUZZ_CHECK(s.ok(), "re-encoded record fails VerifyRecord: " + s.ToString());
  std::string binary_again;
  storage::AppendTaskJson(*table_again, PayloadFormat::kBinary, &binary_again);
  FUZZ_CHECK(binary_again == binary_json,
             "JSON of the re-encoded record differs:\n  " +
                 Printable(binary_json, 2000) + "\n  " +
                 Printable(binary_again, 2000));

  // A failed attempt whose error text is the payload (any bytes, any size).
  TaskRecord failed = record;
  const size_t before = failed.failures.size();
  const uint32_t attempt = record.attempts + 1;
  storage::RecordFailure(&failed, attempt, record.updated_us, record.payload);
  const size_t expected =
      before >= storage::kMaxFailureHistory ? before : before + 1;
  FUZZ_CHECK(failed.failures.size() == expected,
             "history holds " + std::to_string(failed.failures.size()) +
                 " entries, expected " + std::to_string(expected));
  FUZZ_CHECK(failed.last_error.size() <= storage::kMaxErrorBytes,
             "last_error holds " + std::to_string(failed.last_error.size()) +
                 " bytes");
  if (record.payload.size() <= storage::kMaxErrorBytes) {
    FUZZ_CHECK(failed.last_error == record.payload, "a short error was cut");
  } else {
    const std::string_view cut = failed.last_error;
    FUZZ_CHECK(cut.size() >= 3 && cut.substr(cut.size() - 3) == "..." &&
                   record.payload.compare(0, cut.size() - 3, cut.data(),
                                          cut.size() - 3) == 0,
               "a long error is not a prefix and \"...\"");
    if (IsValidUtf8(record.payload)) {
      FUZZ_CHECK(IsValidUtf8(cut), "the cut splits a UTF-8 sequence");
    }
  }
  const FailureEntry& last = failed.failures.back();
  FUZZ_CHECK(last.attempt == attempt && last.at_us == record.updated_us &&
                 last.error == failed.last_error,
             "the new history entry");
  TaskRecord failed_again;
  s = DecodeRecord(id, EncodeRecord(failed), &failed_again);
  FUZZ_CHECK(s.ok() && SameRecord(failed, failed_again),
             "a record with a failure does not round-trip");
  (void)bytes;
}

void CheckBytes(std::string_view bytes) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());

  // FlatBuffers' own verdict on the structure, and the id the buffer holds.
  bool structure_ok = false;
  TaskId stored_id = 0;
  if (bytes.size() >= 8 && storage::fb::TaskRecordBufferHasIdentifier(data)) {
    flatbuffers::Verifier verifier(data, bytes.size());
    if (storage::fb::VerifyTaskRecordBuffer(verifier)) {
      structure_ok = true;
      stored_id = storage::fb::GetTaskRecord(data)->id();
    }
  }

  const storage::fb::TaskRecord* table = nullptr;
  const Status verified = VerifyRecord(stored_id, bytes, &table);
  TaskRecord record;
  const Status decoded = DecodeRecord(stored_id, bytes, &record);
  FUZZ_CHECK(verified == decoded, "VerifyRecord says " + verified.ToString() +
                                      ", DecodeRecord says " +
                                      decoded.ToString());
  if (!verified.ok()) {
    FUZZ_CHECK(verified.IsCorruption(), verified.ToString());
    FUZZ_CHECK(verified.message().rfind(IdMessage(stored_id), 0) == 0,
               "message does not name the task: " + verified.ToString());
    return;
  }
  FUZZ_CHECK(structure_ok, "VerifyRecord accepts what FlatBuffers rejects");
  FUZZ_CHECK(table == storage::fb::GetTaskRecord(data),
             "the table is not read in place");

  // The same bytes under another id are refused.
  const Status other = VerifyRecord(stored_id + 1, bytes, &table);
  FUZZ_CHECK(other.IsCorruption() &&
                 other.message().rfind(IdMessage(stored_id + 1), 0) == 0,
             "a record accepted under the wrong id: " + other.ToString());
  table = storage::fb::GetTaskRecord(data);

  CheckVerifiedRecord(stored_id, *table, record, bytes);
}

}  // namespace
}  // namespace spool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libFuzzer's buffer holds exactly `size` bytes, so AddressSanitizer
  // catches a read one byte past the record.
  spool::fuzz::CheckBytes(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
