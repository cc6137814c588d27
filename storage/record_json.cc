#include "storage/record_json.h"

#include <array>
#include <cstring>
#include <string_view>

#include <spool/task.h>

#include <flatbuffers/flatbuffers.h>

#include "storage/json_writer.h"
#include "storage/record.h"
#include "storage/task_record_generated.h"
#include "util/civil_time.h"

namespace spool::storage {
namespace {

std::string_view AsView(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : s->string_view();
}

std::string_view AsView(const flatbuffers::Vector<uint8_t>* bytes) {
  if (bytes == nullptr) return std::string_view();
  return std::string_view(reinterpret_cast<const char*>(bytes->data()),
                          bytes->size());
}

// "00" "01" ... "99": two digits per lookup instead of one per division.
constexpr std::array<char, 200> MakeDigitPairs() {
  std::array<char, 200> pairs{};
  for (int v = 0; v < 100; ++v) {
    pairs[2 * v] = static_cast<char>('0' + v / 10);
    pairs[2 * v + 1] = static_cast<char>('0' + v % 10);
  }
  return pairs;
}
constexpr std::array<char, 200> kDigitPairs = MakeDigitPairs();

// Writes `value` as two digits at `dst`. REQUIRES: 0 <= value < 100.
char* Put2(char* dst, int64_t value) {
  std::memcpy(dst, &kDigitPairs[static_cast<size_t>(2 * value)], 2);
  return dst + 2;
}

// The longest form: "-290308-12-21T19:59:05.224192Z", 30 bytes.
constexpr size_t kMaxRfc3339Size = 32;

// Formats `micros` as AppendRfc3339 describes into `dst`; returns the end.
char* FormatRfc3339(int64_t micros, char* dst) {
  // No multiplication back: seconds * 10^6 overflows near INT64_MIN.
  const int64_t seconds = FloorDiv(micros, 1'000'000);
  const int64_t fraction = FloorMod(micros, 1'000'000);
  const int64_t days = FloorDiv(seconds, 86400);
  const int64_t second_of_day = FloorMod(seconds, 86400);
  const CivilDate date = CivilFromDays(days);
  if (date.year >= 0 && date.year <= 9999) {
    dst = Put2(dst, date.year / 100);
    dst = Put2(dst, date.year % 100);
  } else {
    // |year| <= 294247 for any int64_t time, so six digits suffice.
    const int64_t year = date.year < 0 ? -date.year : date.year;
    *dst++ = date.year < 0 ? '-' : '+';
    dst = Put2(dst, year / 10000);
    dst = Put2(dst, year / 100 % 100);
    dst = Put2(dst, year % 100);
  }
  *dst++ = '-';
  dst = Put2(dst, date.month);
  *dst++ = '-';
  dst = Put2(dst, date.day);
  *dst++ = 'T';
  dst = Put2(dst, second_of_day / 3600);
  *dst++ = ':';
  dst = Put2(dst, second_of_day / 60 % 60);
  *dst++ = ':';
  dst = Put2(dst, second_of_day % 60);
  *dst++ = '.';
  dst = Put2(dst, fraction / 10000);
  dst = Put2(dst, fraction / 100 % 100);
  dst = Put2(dst, fraction % 100);
  *dst++ = 'Z';
  return dst;
}

void WriteTime(JsonWriter* writer, int64_t micros) {
  char buffer[kMaxRfc3339Size + 2];
  buffer[0] = '"';
  char* end = FormatRfc3339(micros, buffer + 1);
  *end++ = '"';
  writer->Raw(std::string_view(buffer, static_cast<size_t>(end - buffer)));
}

bool IsJsonWhitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view TrimJsonWhitespace(std::string_view text) {
  while (!text.empty() && IsJsonWhitespace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsJsonWhitespace(text.back())) text.remove_suffix(1);
  return text;
}

// An optional string field: absent (empty) is null.
void WriteStringOrNull(JsonWriter* w, std::string_view value) {
  if (value.empty()) {
    w->Null();
  } else {
    w->String(value);
  }
}

// Bytes as the payload's rule shows them: under `json_key` as the JSON
// itself when the format is kJson and the bytes are valid JSON, else under
// `base64_key` in base64. Literal keys, as the writer's fast path wants.
template <size_t N, size_t M>
void WriteBytes(JsonWriter* w, const char (&json_key)[N],
                const char (&base64_key)[M], std::string_view bytes,
                PayloadFormat format) {
  if (format == PayloadFormat::kJson) {
    const std::string_view json = TrimJsonWhitespace(bytes);
    if (IsValidJson(json)) {
      w->LiteralKey(json_key);
      w->Raw(json);
      return;
    }
  }
  w->LiteralKey(base64_key);
  w->Base64(bytes);
}

}  // namespace

void AppendRfc3339(int64_t micros, std::string* out) {
  char buffer[kMaxRfc3339Size];
  const char* end = FormatRfc3339(micros, buffer);
  out->append(buffer, static_cast<size_t>(end - buffer));
}

void WriteTaskJson(const TaskView& task, PayloadFormat format,
                   JsonWriter* writer) {
  const fb::TaskSpec& spec = *task.spec;
  const fb::TaskState& state = *task.state;
  JsonWriter& w = *writer;
  w.BeginObject();
  w.LiteralKey("id");
  w.Uint(spec.id());
  w.LiteralKey("type");
  w.String(AsView(spec.type()));
  w.LiteralKey("status");
  w.String(TaskStatusName(static_cast<TaskStatus>(state.status())));
  w.LiteralKey("priority");
  w.Int(state.priority());
  w.LiteralKey("group");
  WriteStringOrNull(&w, AsView(spec.group()));
  w.LiteralKey("dedup_key");
  WriteStringOrNull(&w, AsView(spec.dedup_key()));
  w.LiteralKey("idempotency_key");
  WriteStringOrNull(&w, AsView(spec.idempotency_key()));
  w.LiteralKey("attempts");
  w.Uint(state.attempts());
  w.LiteralKey("max_attempts");
  w.Uint(state.max_attempts());
  w.LiteralKey("snoozes");
  w.Uint(state.snoozes());
  w.LiteralKey("interrupted_attempts");
  w.Uint(state.interrupted_attempts());
  w.LiteralKey("created_at");
  WriteTime(&w, spec.created_us());
  w.LiteralKey("updated_at");
  WriteTime(&w, state.updated_us());
  w.LiteralKey("next_attempt_at");
  if (state.next_attempt_us() == 0) {
    w.Null();
  } else {
    WriteTime(&w, state.next_attempt_us());
  }
  w.LiteralKey("sequence");
  w.Uint(state.sequence());
  w.LiteralKey("last_error");
  WriteStringOrNull(&w, AsView(state.last_error()));
  w.LiteralKey("failures");
  w.BeginArray();
  if (task.failures != nullptr) {
    for (const fb::Failure* failure : *task.failures) {
      w.BeginObject();
      w.LiteralKey("attempt");
      w.Uint(failure->attempt());
      w.LiteralKey("at");
      WriteTime(&w, failure->at_us());
      w.LiteralKey("error");
      w.String(AsView(failure->error()));
      w.EndObject();
    }
  }
  w.EndArray();
  if (format == PayloadFormat::kOmitted) {
    // A listing's projection: the application's bytes, payload and result,
    // are left out.
    w.EndObject();
    return;
  }
  if (state.result() == nullptr) {
    w.LiteralKey("result");
    w.Null();
  } else {
    WriteBytes(&w, "result", "result_base64", AsView(state.result()), format);
  }
  WriteBytes(&w, "payload", "payload_base64", AsView(spec.payload()), format);
  w.EndObject();
}

void AppendTaskJson(const TaskView& task, PayloadFormat format,
                    std::string* out) {
  JsonWriter writer(out);
  WriteTaskJson(task, format, &writer);
}

}  // namespace spool::storage
