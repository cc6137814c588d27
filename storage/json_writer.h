// JsonWriter: builds JSON text straight into a caller-owned std::string.
//
// Readers answer list and get queries with one JSON buffer that the HTTP
// layer sends as is, so the writer emits bytes directly, with no document
// object and no allocation per value (only the output string grows). The
// caller keeps one std::string per reader and clears it between queries, so
// after warm-up a query allocates nothing at all.
//
// The output is always valid UTF-8 and valid RFC 8259 JSON, provided the
// caller nests Begin/End calls properly and passes only valid JSON to Raw():
//   - strings are escaped exactly: '"', '\\' and U+0000..U+001F are escaped
//     (with the short forms \b \f \n \r \t where JSON has them), U+2028 and
//     U+2029 become \u2028 and \u2029 so the text can be embedded in
//     JavaScript source, and invalid UTF-8 is replaced by U+FFFD, one per
//     maximal subpart (Unicode 15, section 3.9, "U+FFFD Substitution of
//     Maximal Subparts"), so no input can make the output invalid;
//   - NaN and infinities, which JSON cannot express, are written as null.
//
// Thread safety: a JsonWriter is used by one thread at a time.

#ifndef SPOOL_STORAGE_JSON_WRITER_H_
#define SPOOL_STORAGE_JSON_WRITER_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <spool/query.h>

namespace spool::storage {

// Appends `text` to *out as a JSON string literal: quoted and escaped as
// described above. Never fails.
void AppendJsonString(std::string_view text, std::string* out);

// Appends the standard base64 encoding of `bytes` (RFC 4648 section 4: the
// "+/" alphabet, '=' padding, no line breaks) to *out, without quotes.
void AppendBase64(std::string_view bytes, std::string* out);

// Returns whether `text` is exactly one JSON value per RFC 8259, optionally
// surrounded by whitespace, and safe to copy verbatim into a JSON document.
// Stricter than the RFC's grammar in two ways, both for safety when the text
// is embedded: the text must be valid UTF-8 (RFC 8259 section 8.1 requires it
// between systems), and a \u escape must not leave a surrogate unpaired
// (RFC 7493, I-JSON). Nesting deeper than kMaxJsonDepth is rejected, which
// bounds the state kept. Runs in linear time, without recursion and without
// allocating, so hostile input cannot exhaust the stack or memory.
bool IsValidJson(std::string_view text);

// The deepest nesting of arrays and objects IsValidJson accepts: the public
// spool::kMaxJsonDepth (spool/query.h), one bound for every JSON spool reads.
using spool::kMaxJsonDepth;

// Emits one JSON value (usually an array or an object) into a string.
//
// The writer inserts the commas and colons; the caller states the structure:
//
//   std::string out;
//   JsonWriter w(&out);
//   w.BeginObject();
//   w.Key("id");
//   w.Uint(42);
//   w.Key("tags");
//   w.BeginArray();
//   w.String("a");
//   w.String("b");
//   w.EndArray();
//   w.EndObject();        // out == R"({"id":42,"tags":["a","b"]})"
//
// REQUIRES (checked by assert in debug builds, up to 64 levels deep): every
// Begin has its matching End; inside an object, Key() precedes each value;
// Key() is used only inside an object. The writer does not check that keys
// are unique.
class JsonWriter {
 public:
  // Appends to *out, which must outlive the writer. Existing contents are
  // kept, so several writers may fill one buffer one after another.
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();

  // The name of the next member of the current object; escaped like String.
  void Key(std::string_view key);

  // Key() for a string literal that needs no escaping, such as "created_at".
  // Faster because the length is a compile-time constant and nothing is
  // scanned: each member costs one append.
  // REQUIRES: `key` holds only printable ASCII other than '"' and '\\'
  // (checked by assert in debug builds), and no NUL before its end.
  template <size_t N>
  void LiteralKey(const char (&key)[N]);

  // A string value, escaped; see the file comment.
  void String(std::string_view value);
  void Int(int64_t value);
  void Uint(uint64_t value);
  // The shortest decimal text that reads back as exactly `value`; NaN and
  // infinities are written as null.
  void Double(double value);
  void Bool(bool value);
  void Null();

  // Copies `json` as one value. The text is copied verbatim except that raw
  // U+2028 and U+2029 (which valid JSON can hold only inside strings, where
  // the escape means the same) are rewritten as \u2028 and \u2029, as
  // String() writes them.
  // REQUIRES: `json` is one valid JSON value (see IsValidJson).
  void Raw(std::string_view json);

  // A string value holding the base64 encoding of `bytes` (see AppendBase64).
  void Base64(std::string_view bytes);

  // The buffer being written.
  std::string* output() const { return out_; }

 private:
  // Called before writing a value: updates the nesting state and returns
  // whether a comma must separate the value from the previous one.
  bool StartValue();
  void BeginContainer(char open, bool is_object);
  void EndContainer(char close, bool is_object);

  // The part of Key() that does not depend on the key: the debug checks
  // and the comma. Returns whether a comma is due.
  bool StartKey();
  static bool IsPlainLiteral(const char* key, size_t size);

  std::string* out_;
  // True once a value or member has been written at the current level, so
  // the next one needs a comma. Key() clears it so its value gets none.
  bool need_comma_ = false;

  // Debug-only bookkeeping for the REQUIRES clause; kept in every build so
  // the class has one layout regardless of NDEBUG. Bit i of object_bits_ is
  // set when level i (0 = outermost) is an object.
  uint64_t object_bits_ = 0;
  uint32_t depth_ = 0;
  bool after_key_ = false;
};

template <size_t N>
void JsonWriter::LiteralKey(const char (&key)[N]) {
  static_assert(N >= 1, "a string literal ends in NUL");
  constexpr size_t kSize = N - 1;
  assert(IsPlainLiteral(key, kSize));
  // ',' '"' key '"' ':' assembled in place so that the copy has a constant
  // length the compiler can inline.
  char buffer[kSize + 4];
  buffer[0] = ',';
  buffer[1] = '"';
  std::memcpy(buffer + 2, key, kSize);
  buffer[kSize + 2] = '"';
  buffer[kSize + 3] = ':';
  const bool comma = StartKey();
  out_->append(comma ? buffer : buffer + 1, comma ? kSize + 4 : kSize + 3);
}

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_JSON_WRITER_H_
