// A reference JSON parser for the fuzz targets: plain recursive descent over
// the RFC 8259 grammar, building a document, written without looking at
// storage/json_writer.cc. The targets compare spool's IsValidJson with it and
// read spool's JSON output back through it.
//
// It applies the same two extra rules as IsValidJson (storage/json_writer.h):
// the text must be valid UTF-8, and a \u escape must not leave a surrogate
// unpaired. Nesting deeper than `max_depth` arrays and objects is rejected.

#ifndef SPOOL_FUZZ_JSON_REFERENCE_H_
#define SPOOL_FUZZ_JSON_REFERENCE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spool::fuzz {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind = Kind::kNull;
  bool boolean = false;
  // kNumber: the number's text as written. kString: the decoded string, in
  // UTF-8.
  std::string text;
  std::vector<JsonValue> items;
  // In document order; duplicate names are kept.
  std::vector<std::pair<std::string, JsonValue>> members;

  // The first member called `name`, or nullptr (also for a non-object).
  const JsonValue* Find(std::string_view name) const;

  friend bool operator==(const JsonValue& a, const JsonValue& b);
  friend bool operator!=(const JsonValue& a, const JsonValue& b) {
    return !(a == b);
  }
};

// Parses `text` as exactly one JSON value, optionally surrounded by
// whitespace. Returns nullopt when it is not valid (see the file comment).
std::optional<JsonValue> ParseJsonReference(std::string_view text,
                                            size_t max_depth);

// The value as compact JSON, for failure messages.
std::string DescribeJson(const JsonValue& value);

}  // namespace spool::fuzz

#endif  // SPOOL_FUZZ_JSON_REFERENCE_H_
