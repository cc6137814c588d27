#include "storage/json_writer.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>

namespace spool::storage {
namespace {

// ---------------------------------------------------------------------------
// Output growth

// Makes room for `extra` more bytes, growing geometrically. std::string's
// reserve() may allocate exactly what is asked for, which would make a long
// series of small appends quadratic.
inline void Reserve(std::string* out, size_t extra) {
  const size_t needed = out->size() + extra;
  if (needed > out->capacity()) {
    out->reserve(std::max(needed, 2 * out->capacity()));
  }
}

// ---------------------------------------------------------------------------
// SWAR scanning: examine 8 bytes per step for bytes that need escaping.

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighBits = 0x8080808080808080ULL;

inline uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Returns a word whose byte k has its high bit set if byte k of `v` (in
// memory order on little-endian machines) is a control character, '"', '\\'
// or a non-ASCII byte, i.e. needs more than a plain copy. Zero means all
// eight bytes can be copied as they are.
//
// The subtractions can borrow, which may also flag bytes that follow a
// flagged byte; the lowest flagged byte is always exact, and that is the only
// one the callers use. (On big-endian machines borrows run towards lower
// addresses, so there the callers re-check byte by byte; see
// FirstFlaggedByte.)
inline uint64_t NeedsWorkMask(uint64_t v) {
  const uint64_t control = (v - kOnes * 0x20) & ~v;
  const uint64_t q = v ^ (kOnes * '"');
  const uint64_t quote = (q - kOnes) & ~q;
  const uint64_t b = v ^ (kOnes * '\\');
  const uint64_t backslash = (b - kOnes) & ~b;
  return (control | quote | backslash | v) & kHighBits;
}

// The offset of the first byte flagged in a non-zero NeedsWorkMask result,
// or 0 where that cannot be computed cheaply (the caller then proceeds byte
// by byte, which is always correct).
inline size_t FirstFlaggedByte(uint64_t mask) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return static_cast<size_t>(__builtin_ctzll(mask)) / 8;
#else
  (void)mask;
  return 0;
#endif
}

// Returns the offset of the first byte at or after `i` that may need work,
// or `n` if there is none, examining eight bytes per step. The last partial
// word is padded with spaces, which need no work, so short strings such as
// object keys take the word-wise path too.
inline size_t SkipPlainBytes(const char* p, size_t i, size_t n) {
  while (i + 8 <= n) {
    const uint64_t mask = NeedsWorkMask(Load64(p + i));
    if (mask != 0) return i + FirstFlaggedByte(mask);
    i += 8;
  }
  if (i < n) {
    uint64_t word = kOnes * ' ';
    std::memcpy(&word, p + i, n - i);
    const uint64_t mask = NeedsWorkMask(word);
    return mask == 0 ? n : i + FirstFlaggedByte(mask);
  }
  return n;
}

// ---------------------------------------------------------------------------
// UTF-8

// Examines the non-ASCII byte at p[0] (n >= 1 bytes available). Returns the
// length of the well-formed sequence starting there (2 to 4), or 0 if there
// is none, in which case *bad_length is set to the length of the maximal
// subpart: the longest prefix of a well-formed sequence, or 1 if the lead
// byte can never start one. Well-formedness follows Unicode Table 3-7, which
// excludes overlong forms, UTF-16 surrogates and code points above U+10FFFF
// by narrowing the range of the second byte.
inline size_t Utf8SequenceLength(const unsigned char* p, size_t n,
                                 size_t* bad_length) {
  const unsigned char lead = p[0];
  size_t length;
  unsigned char second_min = 0x80;
  unsigned char second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // Overlong below U+0800.
    if (lead == 0xED) second_max = 0x9F;  // Surrogates U+D800..U+DFFF.
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // Overlong below U+10000.
    if (lead == 0xF4) second_max = 0x8F;  // Above U+10FFFF.
  } else {
    // 0x80..0xBF are continuation bytes; 0xC0, 0xC1 only start overlong
    // forms; 0xF5..0xFF would encode beyond U+10FFFF.
    *bad_length = 1;
    return 0;
  }
  if (n < 2 || p[1] < second_min || p[1] > second_max) {
    *bad_length = 1;
    return 0;
  }
  size_t good = 2;
  while (good < length && good < n && (p[good] & 0xC0) == 0x80) ++good;
  if (good == length) return length;
  *bad_length = good;
  return 0;
}

constexpr char kReplacementCharacter[] = "\xEF\xBF\xBD";  // U+FFFD

// U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR are E2 80 A8/A9.
inline bool IsLineOrParagraphSeparator(const unsigned char* p) {
  return p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9);
}

// ---------------------------------------------------------------------------
// Escaping

constexpr char kHexDigits[] = "0123456789abcdef";

// For each ASCII byte: 0 if it is copied as is, 'u' if it is written as
// \u00XX, otherwise the letter that follows the backslash.
constexpr std::array<char, 128> MakeAsciiEscapes() {
  std::array<char, 128> table{};
  for (int c = 0; c < 0x20; ++c) table[c] = 'u';
  table['\b'] = 'b';
  table['\f'] = 'f';
  table['\n'] = 'n';
  table['\r'] = 'r';
  table['\t'] = 't';
  table['"'] = '"';
  table['\\'] = '\\';
  return table;
}
constexpr std::array<char, 128> kAsciiEscapes = MakeAsciiEscapes();

inline void AppendAsciiEscape(unsigned char c, std::string* out) {
  const char kind = kAsciiEscapes[c];
  if (kind == 'u') {
    const char escape[6] = {
        '\\', 'u', '0', '0', kHexDigits[c >> 4], kHexDigits[c & 0xF]};
    out->append(escape, sizeof(escape));
  } else {
    const char escape[2] = {'\\', kind};
    out->append(escape, sizeof(escape));
  }
}

// Appends the escaped form of `text` (without quotes). Runs of bytes that
// need no change are copied with one append each.
void AppendEscaped(std::string_view text, std::string* out) {
  const char* p = text.data();
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  const size_t n = text.size();
  size_t run_start = 0;  // First byte not yet copied to *out.
  size_t i = 0;
  while (true) {
    i = SkipPlainBytes(p, i, n);
    if (i >= n) break;
    const unsigned char c = u[i];
    if (c < 0x80) {
      if (kAsciiEscapes[c] == 0) {  // Only on big-endian machines, where
        ++i;                        // the scan cannot locate the byte.
        continue;
      }
      out->append(p + run_start, i - run_start);
      AppendAsciiEscape(c, out);
      run_start = ++i;
      continue;
    }
    // Non-ASCII. Well-formed sequences stay part of the run; consecutive
    // ones (CJK or Cyrillic text has little else) are taken here without
    // going back to the word scan.
    size_t bad_length = 0;
    size_t length = Utf8SequenceLength(u + i, n - i, &bad_length);
    while (length != 0 && !(length == 3 && IsLineOrParagraphSeparator(u + i))) {
      i += length;
      if (i == n || u[i] < 0x80) break;
      length = Utf8SequenceLength(u + i, n - i, &bad_length);
    }
    if (i == n || u[i] < 0x80) continue;
    // An ill-formed sequence or a separator at i.
    out->append(p + run_start, i - run_start);
    if (length == 0) {
      out->append(kReplacementCharacter, 3);
      i += bad_length;
    } else {
      out->append(u[i + 2] == 0xA8 ? "\\u2028" : "\\u2029", 6);
      i += 3;
    }
    run_start = i;
  }
  out->append(p + run_start, n - run_start);
}

// ---------------------------------------------------------------------------
// Validation

inline bool IsJsonWhitespace(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

inline bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }

inline int HexValue(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The validator's scanners take the position of a token's first byte and
// return the position after the token, or nullptr if the token is invalid.
// `end` is one past the text's last byte.
using Byte = unsigned char;

inline const Byte* SkipWhitespace(const Byte* p, const Byte* end) {
  // Every whitespace byte is <= ' ', so most calls return at the first test.
  while (p != end && *p <= ' ' && IsJsonWhitespace(*p)) ++p;
  return p;
}

inline const Byte* ScanDigits(const Byte* p, const Byte* end) {
  if (p == end || !IsDigit(*p)) return nullptr;
  do {
    ++p;
  } while (p != end && IsDigit(*p));
  return p;
}

// number = [ "-" ] ( "0" / 1-9 *DIGIT ) [ "." 1*DIGIT ]
//          [ ( "e" / "E" ) [ "+" / "-" ] 1*DIGIT ]
const Byte* ScanNumber(const Byte* p, const Byte* end) {
  if (*p == '-') ++p;
  if (p != end && *p == '0') {
    ++p;  // No leading zeros: in "01" the '1' fails as the next token.
  } else {
    p = ScanDigits(p, end);
    if (p == nullptr) return nullptr;
  }
  if (p != end && *p == '.') {
    p = ScanDigits(p + 1, end);
    if (p == nullptr) return nullptr;
  }
  if (p != end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p != end && (*p == '+' || *p == '-')) ++p;
    p = ScanDigits(p, end);
  }
  return p;
}

// Reads four hex digits at p into *code_unit.
inline const Byte* ScanHex4(const Byte* p, const Byte* end,
                            uint32_t* code_unit) {
  if (end - p < 4) return nullptr;
  uint32_t value = 0;
  for (int k = 0; k < 4; ++k) {
    const int digit = HexValue(p[k]);
    if (digit < 0) return nullptr;
    value = (value << 4) | static_cast<uint32_t>(digit);
  }
  *code_unit = value;
  return p + 4;
}

// p is just after the opening quote.
const Byte* ScanString(const Byte* p, const Byte* end) {
  const auto* text = reinterpret_cast<const char*>(p);
  const auto size = static_cast<size_t>(end - p);
  size_t i = 0;
  while (true) {
    i = SkipPlainBytes(text, i, size);
    if (i == size) return nullptr;  // Unterminated.
    const Byte c = p[i];
    if (c == '"') return p + i + 1;
    if (c < 0x20) return nullptr;  // Raw control characters are not allowed.
    if (c == '\\') {
      if (++i == size) return nullptr;
      const Byte e = p[i++];
      if (e == 'u') {
        uint32_t unit;
        const Byte* q = ScanHex4(p + i, end, &unit);
        if (q == nullptr) return nullptr;
        if (unit >= 0xDC00 && unit <= 0xDFFF) return nullptr;  // Lone low.
        if (unit >= 0xD800 && unit <= 0xDBFF) {
          // A high surrogate must be followed by an escaped low surrogate.
          if (end - q < 2 || q[0] != '\\' || q[1] != 'u') return nullptr;
          q = ScanHex4(q + 2, end, &unit);
          if (q == nullptr || unit < 0xDC00 || unit > 0xDFFF) return nullptr;
        }
        i = static_cast<size_t>(q - p);
      } else if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' &&
                 e != 'n' && e != 'r' && e != 't') {
        return nullptr;
      }
      continue;
    }
    if (c < 0x80) {  // Only on big-endian machines; see FirstFlaggedByte.
      ++i;
      continue;
    }
    size_t bad_length;
    const size_t length = Utf8SequenceLength(p + i, size - i, &bad_length);
    if (length == 0) return nullptr;
    i += length;
  }
}

inline const Byte* ScanLiteral(const Byte* p, const Byte* end,
                               std::string_view word) {
  if (static_cast<size_t>(end - p) < word.size() ||
      std::memcmp(p, word.data(), word.size()) != 0) {
    return nullptr;
  }
  return p + word.size();
}

// Scans one value, a scalar or a container's opening bracket. On '{' or '['
// sets *opened to the bracket; otherwise leaves it 0.
inline const Byte* ScanValueStart(const Byte* p, const Byte* end,
                                  Byte* opened) {
  switch (*p) {
    case '{':
    case '[':
      *opened = *p;
      return p + 1;
    case '"':
      return ScanString(p + 1, end);
    case 't':
      return ScanLiteral(p, end, "true");
    case 'f':
      return ScanLiteral(p, end, "false");
    case 'n':
      return ScanLiteral(p, end, "null");
    default:
      if (*p == '-' || IsDigit(*p)) return ScanNumber(p, end);
      return nullptr;
  }
}

bool ValidateJson(const Byte* p, const Byte* const end) {
  // Bit d is set when nesting level d is an object. A fixed-size set keeps
  // validation allocation-free; kMaxJsonDepth bounds it.
  std::bitset<kMaxJsonDepth> is_object;
  size_t depth = 0;
  bool expect_key = false;  // After '{' or a ',' inside an object.
  while (true) {
    // Here a value (or, with expect_key, a member name) is due.
    p = SkipWhitespace(p, end);
    if (p == end) return false;
    if (expect_key) {
      if (*p != '"') return false;
      p = ScanString(p + 1, end);
      if (p == nullptr) return false;
      p = SkipWhitespace(p, end);
      if (p == end || *p != ':') return false;
      p = SkipWhitespace(p + 1, end);
      if (p == end) return false;
    }
    Byte opened = 0;
    p = ScanValueStart(p, end, &opened);
    if (p == nullptr) return false;
    if (opened != 0) {
      // The limit counts empty containers too.
      if (depth == kMaxJsonDepth) return false;
      const Byte close = opened == '{' ? '}' : ']';
      p = SkipWhitespace(p, end);
      if (p != end && *p == close) {
        ++p;  // An empty container is a complete value.
      } else {
        is_object[depth++] = opened == '{';
        expect_key = opened == '{';
        continue;
      }
    }
    // A value is complete: close containers until a ',' asks for more.
    while (true) {
      p = SkipWhitespace(p, end);
      if (depth == 0) return p == end;
      if (p == end) return false;
      const bool in_object = is_object[depth - 1];
      if (*p == ',') {
        ++p;
        expect_key = in_object;
        break;
      }
      if (*p != (in_object ? '}' : ']')) return false;
      ++p;
      --depth;
    }
  }
}

// Copies valid JSON text, rewriting raw U+2028/U+2029 (which valid JSON can
// hold only inside strings, where the escape means the same) as escapes.
void AppendRawJson(std::string_view json, std::string* out) {
  const auto* u = reinterpret_cast<const unsigned char*>(json.data());
  const size_t n = json.size();
  size_t run_start = 0;  // First byte not yet copied to *out.
  size_t search_from = 0;
  while (search_from < n) {
    const void* hit = std::memchr(u + search_from, 0xE2, n - search_from);
    if (hit == nullptr) break;
    const auto i =
        static_cast<size_t>(static_cast<const unsigned char*>(hit) - u);
    if (i + 3 <= n && IsLineOrParagraphSeparator(u + i)) {
      out->append(json.data() + run_start, i - run_start);
      out->append(u[i + 2] == 0xA8 ? "\\u2028" : "\\u2029", 6);
      run_start = i + 3;
      search_from = i + 3;
    } else {
      search_from = i + 1;  // Another character from the E2 block, e.g. '€'.
    }
  }
  out->append(json.data() + run_start, n - run_start);
}

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  // Most strings need no escaping, so this one reservation is usually all.
  Reserve(out, text.size() + 2);
  out->push_back('"');
  AppendEscaped(text, out);
  out->push_back('"');
}

void AppendBase64(std::string_view bytes, std::string* out) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  const size_t encoded_size = (n + 2) / 3 * 4;
  Reserve(out, encoded_size);
  const size_t start = out->size();
  out->resize(start + encoded_size);
  char* dst = &(*out)[start];
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t group = (uint32_t{in[i]} << 16) |
                           (uint32_t{in[i + 1]} << 8) | uint32_t{in[i + 2]};
    *dst++ = kAlphabet[(group >> 18) & 0x3F];
    *dst++ = kAlphabet[(group >> 12) & 0x3F];
    *dst++ = kAlphabet[(group >> 6) & 0x3F];
    *dst++ = kAlphabet[group & 0x3F];
  }
  const size_t rest = n - i;
  if (rest > 0) {
    uint32_t group = uint32_t{in[i]} << 16;
    if (rest == 2) group |= uint32_t{in[i + 1]} << 8;
    *dst++ = kAlphabet[(group >> 18) & 0x3F];
    *dst++ = kAlphabet[(group >> 12) & 0x3F];
    *dst++ = rest == 2 ? kAlphabet[(group >> 6) & 0x3F] : '=';
    *dst++ = '=';
  }
}

bool IsValidJson(std::string_view text) {
  const auto* p = reinterpret_cast<const Byte*>(text.data());
  return ValidateJson(p, p + text.size());
}

// ---------------------------------------------------------------------------
// JsonWriter

namespace {

// Strings up to this long that need no escaping are quoted in a stack
// buffer and appended with one call, the common case for keys and enum-like
// values.
constexpr size_t kShortStringMax = 48;

// Appends `text` quoted, preceded by `,` if `comma` and followed by `:` if
// `colon`, with a single append. Returns false, having appended nothing, if
// `text` is too long or needs escaping.
inline bool AppendShortPlainString(std::string_view text, bool comma,
                                   bool colon, std::string* out) {
  if (text.size() > kShortStringMax ||
      SkipPlainBytes(text.data(), 0, text.size()) != text.size()) {
    return false;
  }
  char buffer[kShortStringMax + 4];
  size_t n = 0;
  if (comma) buffer[n++] = ',';
  buffer[n++] = '"';
  // An empty view may have a null data(), which memcpy must not get even
  // for zero bytes (e.g. a record's missing string through AsView).
  if (!text.empty()) std::memcpy(buffer + n, text.data(), text.size());
  n += text.size();
  buffer[n++] = '"';
  if (colon) buffer[n++] = ':';
  out->append(buffer, n);
  return true;
}

// Appends the text in buffer[1, end), preceded by the comma that the caller
// has stored in buffer[0] if `comma`, with a single append.
inline void AppendWithComma(const char* buffer, const char* end, bool comma,
                            std::string* out) {
  const char* begin = comma ? buffer : buffer + 1;
  out->append(begin, static_cast<size_t>(end - begin));
}

}  // namespace

bool JsonWriter::StartValue() {
  // Inside an object every value must follow a Key().
  assert(depth_ == 0 || depth_ > 64 || !((object_bits_ >> (depth_ - 1)) & 1) ||
         after_key_);
  const bool comma = need_comma_;
  need_comma_ = true;
  after_key_ = false;
  return comma;
}

void JsonWriter::BeginContainer(char open, bool is_object) {
  const char text[2] = {',', open};
  AppendWithComma(text, text + 2, StartValue(), out_);
  need_comma_ = false;
  if (depth_ < 64) {
    const uint64_t bit = uint64_t{1} << depth_;
    object_bits_ = is_object ? (object_bits_ | bit) : (object_bits_ & ~bit);
  }
  ++depth_;
}

void JsonWriter::EndContainer(char close, bool is_object) {
  assert(depth_ > 0 && "End without Begin");
  assert(!after_key_ && "Key without a value");
  assert(depth_ > 64 || ((object_bits_ >> (depth_ - 1)) & 1) == is_object);
  (void)is_object;
  --depth_;
  out_->push_back(close);
  need_comma_ = true;
}

void JsonWriter::BeginObject() { BeginContainer('{', true); }
void JsonWriter::EndObject() { EndContainer('}', true); }
void JsonWriter::BeginArray() { BeginContainer('[', false); }
void JsonWriter::EndArray() { EndContainer(']', false); }

bool JsonWriter::StartKey() {
  assert(depth_ > 0 && (depth_ > 64 || ((object_bits_ >> (depth_ - 1)) & 1)) &&
         "Key outside an object");
  assert(!after_key_ && "two keys in a row");
  const bool comma = need_comma_;
  need_comma_ = false;
  after_key_ = true;
  return comma;
}

bool JsonWriter::IsPlainLiteral(const char* key, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c < 0x20 || c >= 0x7F || c == '"' || c == '\\') return false;
  }
  return true;
}

void JsonWriter::Key(std::string_view key) {
  const bool comma = StartKey();
  if (AppendShortPlainString(key, comma, /*colon=*/true, out_)) return;
  if (comma) out_->push_back(',');
  AppendJsonString(key, out_);
  out_->push_back(':');
}

void JsonWriter::String(std::string_view value) {
  const bool comma = StartValue();
  if (AppendShortPlainString(value, comma, /*colon=*/false, out_)) return;
  if (comma) out_->push_back(',');
  AppendJsonString(value, out_);
}

void JsonWriter::Int(int64_t value) {
  char buffer[24] = {','};
  const auto result = std::to_chars(buffer + 1, buffer + sizeof(buffer), value);
  AppendWithComma(buffer, result.ptr, StartValue(), out_);
}

void JsonWriter::Uint(uint64_t value) {
  char buffer[24] = {','};
  const auto result = std::to_chars(buffer + 1, buffer + sizeof(buffer), value);
  AppendWithComma(buffer, result.ptr, StartValue(), out_);
}

void JsonWriter::Double(double value) {
  if (!std::isfinite(value)) {
    Null();
    return;
  }
  // std::to_chars without a format gives the shortest text that reads back
  // exactly, e.g. "0.1", "1e+100", "-0"; all are valid JSON numbers. The
  // longest, "-2.2250738585072014e-308", is 24 bytes.
  char buffer[40] = {','};
  const auto result = std::to_chars(buffer + 1, buffer + sizeof(buffer), value);
  AppendWithComma(buffer, result.ptr, StartValue(), out_);
}

void JsonWriter::Bool(bool value) {
  static constexpr char kTrue[] = ",true";
  static constexpr char kFalse[] = ",false";
  const char* text = value ? kTrue : kFalse;
  AppendWithComma(text, text + (value ? 5 : 6), StartValue(), out_);
}

void JsonWriter::Null() {
  static constexpr char kNull[] = ",null";
  AppendWithComma(kNull, kNull + 5, StartValue(), out_);
}

void JsonWriter::Raw(std::string_view json) {
  if (StartValue()) out_->push_back(',');
  AppendRawJson(json, out_);
}

void JsonWriter::Base64(std::string_view bytes) {
  Reserve(out_, (bytes.size() + 2) / 3 * 4 + 3);
  static constexpr char kOpen[] = ",\"";
  AppendWithComma(kOpen, kOpen + 2, StartValue(), out_);
  AppendBase64(bytes, out_);
  out_->push_back('"');
}

}  // namespace spool::storage
