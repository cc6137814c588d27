// fuzz_json: the JSON writer and validator of storage/json_writer.h, and the
// time format of storage/record_json.h.
//
// Invariants checked on every input:
//   - IsValidJson(text) agrees with an independent recursive-descent parser
//     (json_reference.h) that applies the same rules: RFC 8259, valid UTF-8,
//     no unpaired surrogate escapes, at most kMaxJsonDepth levels;
//   - AppendJsonString(text) keeps what the buffer held, and appends one
//     JSON string, valid UTF-8, with no raw control characters, U+2028 or
//     U+2029, that decodes to `text` with each maximal subpart of an
//     ill-formed sequence replaced by U+FFFD (so to `text` itself when it is
//     valid UTF-8);
//   - for valid JSON, JsonWriter::Raw embeds a value equal to the original
//     and the writer's output stays valid JSON;
//   - a document built through every JsonWriter call is valid and reads
//     back: keys and strings as above, integers exactly, doubles to the
//     same value (non-finite ones as null);
//   - AppendBase64 decodes back to its input, in the canonical length;
//   - AppendRfc3339 parses back to the same microsecond.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "fuzz/json_reference.h"
#include "storage/json_writer.h"
#include "storage/record_json.h"

namespace spool::fuzz {
namespace {

using storage::JsonWriter;
using storage::kMaxJsonDepth;

bool HasRawSeparator(std::string_view text) {
  return text.find("\xE2\x80\xA8") != std::string_view::npos ||
         text.find("\xE2\x80\xA9") != std::string_view::npos;
}

void CheckValidator(std::string_view text) {
  const bool spool = storage::IsValidJson(text);
  const bool reference = ParseJsonReference(text, kMaxJsonDepth).has_value();
  FUZZ_CHECK(spool == reference,
             std::string("IsValidJson says ") + (spool ? "valid" : "invalid") +
                 ", the reference parser disagrees: " + Printable(text, 400));
  if (spool) FUZZ_CHECK(IsValidUtf8(text), "valid JSON that is not UTF-8");
}

void CheckString(std::string_view text) {
  std::string out = "prefix";
  storage::AppendJsonString(text, &out);
  FUZZ_CHECK(out.compare(0, 6, "prefix") == 0,
             "AppendJsonString changed what the buffer held");
  const std::string_view quoted = std::string_view(out).substr(6);
  FUZZ_CHECK(
      quoted.size() >= 2 && quoted.front() == '"' && quoted.back() == '"',
      "not quoted: " + Printable(quoted));
  FUZZ_CHECK(IsValidUtf8(quoted), "output is not UTF-8: " + Printable(quoted));
  FUZZ_CHECK(!HasRawSeparator(quoted), "raw U+2028/U+2029 in the output");
  for (char c : quoted) {
    FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20,
               "raw control character in the output: " + Printable(quoted));
  }
  FUZZ_CHECK(storage::IsValidJson(quoted),
             "IsValidJson rejects " + Printable(quoted));
  const std::optional<JsonValue> value = ParseJsonReference(quoted, 1);
  FUZZ_CHECK(value.has_value() && value->kind == JsonValue::Kind::kString,
             "the reference parser rejects " + Printable(quoted));
  const std::string expected = ReplaceInvalidUtf8(text);
  FUZZ_CHECK(value->text == expected, "decodes to " + Printable(value->text) +
                                          ", expected " + Printable(expected));
  if (IsValidUtf8(text)) {
    FUZZ_CHECK(value->text == text, "valid UTF-8 did not survive");
  }
}

void CheckRaw(std::string_view text) {
  const std::optional<JsonValue> original =
      ParseJsonReference(text, kMaxJsonDepth - 1);
  if (!original.has_value()) return;  // Too deep to nest one level more.
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Raw(text);
  w.Raw(text);
  w.EndArray();
  FUZZ_CHECK(!HasRawSeparator(out), "Raw left a raw U+2028/U+2029");
  FUZZ_CHECK(storage::IsValidJson(out),
             "Raw made invalid JSON: " + Printable(out, 400));
  const std::optional<JsonValue> doc = ParseJsonReference(out, kMaxJsonDepth);
  FUZZ_CHECK(doc.has_value() && doc->items.size() == 2 &&
                 doc->items[0] == *original && doc->items[1] == *original,
             "Raw changed the value: " + Printable(text, 400));
}

void CheckBase64(std::string_view bytes) {
  std::string out = "x";
  storage::AppendBase64(bytes, &out);
  FUZZ_CHECK(out[0] == 'x', "AppendBase64 changed what the buffer held");
  const std::string_view encoded = std::string_view(out).substr(1);
  FUZZ_CHECK(encoded.size() == (bytes.size() + 2) / 3 * 4,
             "base64 length " + std::to_string(encoded.size()));
  const std::optional<std::string> decoded = DecodeBase64(encoded);
  FUZZ_CHECK(decoded.has_value() && *decoded == bytes,
             "base64 " + std::string(encoded) + " does not decode back");
}

void CheckTime(int64_t micros) {
  std::string out;
  storage::AppendRfc3339(micros, &out);
  const std::optional<int64_t> parsed = ParseRfc3339Micros(out);
  FUZZ_CHECK(parsed.has_value() && *parsed == micros,
             "AppendRfc3339(" + std::to_string(micros) + ") = \"" + out +
                 "\" does not parse back");
}

// A document through every JsonWriter call, with values from the input.
void CheckWriter(ByteReader* in, std::string_view text) {
  const int64_t i = in->I64();
  const uint64_t u = in->U64();
  double d;
  const uint64_t bits = in->U64();
  std::memcpy(&d, &bits, sizeof d);
  const bool b = (in->Byte() & 1) != 0;
  const std::string_view key = in->ShortString();

  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key(key);
  w.String(text);
  w.LiteralKey("int");
  w.Int(i);
  w.LiteralKey("uint");
  w.Uint(u);
  w.LiteralKey("double");
  w.Double(d);
  w.LiteralKey("bool");
  w.Bool(b);
  w.LiteralKey("null");
  w.Null();
  w.LiteralKey("base64");
  w.Base64(text);
  w.LiteralKey("array");
  w.BeginArray();
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.String(key);
  w.EndArray();
  w.EndObject();
  FUZZ_CHECK(w.output() == &out, "output()");

  FUZZ_CHECK(storage::IsValidJson(out),
             "the writer made invalid JSON: " + Printable(out, 400));
  const std::optional<JsonValue> doc = ParseJsonReference(out, kMaxJsonDepth);
  FUZZ_CHECK(doc.has_value() && doc->kind == JsonValue::Kind::kObject &&
                 doc->members.size() == 8,
             "the reference parser reads " + Printable(out, 400));
  FUZZ_CHECK(doc->members[0].first == ReplaceInvalidUtf8(key), "key");
  FUZZ_CHECK(doc->members[0].second.text == ReplaceInvalidUtf8(text), "string");
  FUZZ_CHECK(doc->members[1].second.text == std::to_string(i), "Int");
  FUZZ_CHECK(doc->members[2].second.text == std::to_string(u), "Uint");
  const JsonValue& dv = doc->members[3].second;
  if (std::isfinite(d)) {
    FUZZ_CHECK(dv.kind == JsonValue::Kind::kNumber, "Double");
    const double back = std::strtod(dv.text.c_str(), nullptr);
    FUZZ_CHECK(std::memcmp(&back, &d, sizeof d) == 0,
               "Double wrote " + dv.text + " for a different value");
  } else {
    FUZZ_CHECK(dv.kind == JsonValue::Kind::kNull, "non-finite Double");
  }
  FUZZ_CHECK(doc->members[4].second.kind == JsonValue::Kind::kBool &&
                 doc->members[4].second.boolean == b,
             "Bool");
  FUZZ_CHECK(doc->members[5].second.kind == JsonValue::Kind::kNull, "Null");
  const std::optional<std::string> base64 =
      DecodeBase64(doc->members[6].second.text);
  FUZZ_CHECK(base64.has_value() && *base64 == text, "Base64");
  const JsonValue& array = doc->members[7].second;
  FUZZ_CHECK(array.items.size() == 3 &&
                 array.items[0].kind == JsonValue::Kind::kObject &&
                 array.items[0].members.empty() &&
                 array.items[1].kind == JsonValue::Kind::kArray &&
                 array.items[1].items.empty() &&
                 array.items[2].text == ReplaceInvalidUtf8(key),
             "nested containers");
}

}  // namespace
}  // namespace spool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spool::fuzz;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckValidator(text);
  CheckString(text);
  CheckRaw(text);
  CheckBase64(text);
  ByteReader times(data, size);
  CheckTime(times.I64());
  ByteReader values(data, size);
  CheckWriter(&values, text);
  return 0;
}
