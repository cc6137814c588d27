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

// Advances `i` over bytes that need no work, eight at a time, stopping at
// the first byte that may need work or when fewer than eight bytes remain.
inline size_t SkipPlainBytes(const char* p, size_t i, size_t n) {
  while (i + 8 <= n) {
    const uint64_t mask = NeedsWorkMask(Load64(p + i));
    if (mask != 0) return i + FirstFlaggedByte(mask);
    i += 8;
  }
  return i;
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
      if (kAsciiEscapes[c] == 0) {  // A plain byte in the tail or a false
        ++i;                        // positive on big-endian machines.
        continue;
      }
      out->append(p + run_start, i - run_start);
      AppendAsciiEscape(c, out);
      run_start = ++i;
      continue;
    }
    size_t bad_length = 0;
    const size_t length = Utf8SequenceLength(u + i, n - i, &bad_length);
    if (length == 0) {
      out->append(p + run_start, i - run_start);
      out->append(kReplacementCharacter, 3);
      i += bad_length;
      run_start = i;
    } else if (length == 3 && IsLineOrParagraphSeparator(u + i)) {
      out->append(p + run_start, i - run_start);
      out->append(u[i + 2] == 0xA8 ? "\\u2028" : "\\u2029", 6);
      i += 3;
      run_start = i;
    } else {
      i += length;  // Valid UTF-8 stays part of the run.
    }
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

// A cursor over the text being validated. Each Consume* function starts at
// the first byte of its token and, on success, leaves the cursor after it.
class JsonValidator {
 public:
  explicit JsonValidator(std::string_view text)
      : p_(reinterpret_cast<const unsigned char*>(text.data())),
        begin_(p_),
        end_(p_ + text.size()) {}

  bool Run();

 private:
  enum class Expect { kValue, kMemberKey, kAfterValue };

  bool AtEnd() const { return p_ == end_; }
  void SkipWhitespace() {
    while (p_ != end_ && IsJsonWhitespace(*p_)) ++p_;
  }
  bool ConsumeString();
  bool ConsumeHex4(uint32_t* code_unit);
  bool ConsumeNumber();
  bool ConsumeDigits();
  bool ConsumeLiteral(std::string_view word);

  const unsigned char* p_;
  const unsigned char* const begin_;
  const unsigned char* const end_;
};

bool JsonValidator::ConsumeHex4(uint32_t* code_unit) {
  if (end_ - p_ < 4) return false;
  uint32_t value = 0;
  for (int k = 0; k < 4; ++k) {
    const int digit = HexValue(p_[k]);
    if (digit < 0) return false;
    value = (value << 4) | static_cast<uint32_t>(digit);
  }
  p_ += 4;
  *code_unit = value;
  return true;
}

bool JsonValidator::ConsumeString() {
  ++p_;  // The opening quote.
  const char* base = reinterpret_cast<const char*>(begin_);
  const size_t n = static_cast<size_t>(end_ - begin_);
  while (true) {
    p_ = begin_ + SkipPlainBytes(base, static_cast<size_t>(p_ - begin_), n);
    if (AtEnd()) return false;  // Unterminated.
    const unsigned char c = *p_;
    if (c == '"') {
      ++p_;
      return true;
    }
    if (c < 0x20) return false;  // Raw control characters are not allowed.
    if (c == '\\') {
      ++p_;
      if (AtEnd()) return false;
      const unsigned char e = *p_++;
      if (e == 'u') {
        uint32_t unit;
        if (!ConsumeHex4(&unit)) return false;
        if (unit >= 0xDC00 && unit <= 0xDFFF) return false;  // Lone low.
        if (unit >= 0xD800 && unit <= 0xDBFF) {
          // A high surrogate must be followed by an escaped low surrogate.
          if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
          p_ += 2;
          if (!ConsumeHex4(&unit)) return false;
          if (unit < 0xDC00 || unit > 0xDFFF) return false;
        }
      } else if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' &&
                 e != 'n' && e != 'r' && e != 't') {
        return false;
      }
      continue;
    }
    if (c < 0x80) {  // Plain ASCII seen by the byte-wise path.
      ++p_;
      continue;
    }
    size_t bad_length;
    const size_t length =
        Utf8SequenceLength(p_, static_cast<size_t>(end_ - p_), &bad_length);
    if (length == 0) return false;
    p_ += length;
  }
}

bool JsonValidator::ConsumeDigits() {
  if (AtEnd() || !IsDigit(*p_)) return false;
  while (p_ != end_ && IsDigit(*p_)) ++p_;
  return true;
}

// number = [ "-" ] ( "0" / 1-9 *DIGIT ) [ "." 1*DIGIT ]
//          [ ( "e" / "E" ) [ "+" / "-" ] 1*DIGIT ]
bool JsonValidator::ConsumeNumber() {
  if (*p_ == '-') ++p_;
  if (AtEnd()) return false;
  if (*p_ == '0') {
    ++p_;  // No leading zeros: "01" fails at the caller's next token.
  } else if (!ConsumeDigits()) {
    return false;
  }
  if (p_ != end_ && *p_ == '.') {
    ++p_;
    if (!ConsumeDigits()) return false;
  }
  if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
    ++p_;
    if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
    if (!ConsumeDigits()) return false;
  }
  return true;
}

bool JsonValidator::ConsumeLiteral(std::string_view word) {
  if (static_cast<size_t>(end_ - p_) < word.size() ||
      std::memcmp(p_, word.data(), word.size()) != 0) {
    return false;
  }
  p_ += word.size();
  return true;
}

bool JsonValidator::Run() {
  // Bit d is set when nesting level d is an object. A fixed-size set keeps
  // validation allocation-free; kMaxJsonDepth bounds it.
  std::bitset<kMaxJsonDepth> is_object;
  size_t depth = 0;
  Expect expect = Expect::kValue;
  while (true) {
    SkipWhitespace();
    if (expect == Expect::kAfterValue) {
      if (depth == 0) return AtEnd();
      if (AtEnd()) return false;
      const unsigned char c = *p_++;
      const bool in_object = is_object[depth - 1];
      if (c == ',') {
        expect = in_object ? Expect::kMemberKey : Expect::kValue;
      } else if (c == (in_object ? '}' : ']')) {
        --depth;
      } else {
        return false;
      }
      continue;
    }
    if (AtEnd()) return false;
    if (expect == Expect::kMemberKey) {
      if (*p_ != '"' || !ConsumeString()) return false;
      SkipWhitespace();
      if (AtEnd() || *p_ != ':') return false;
      ++p_;
      expect = Expect::kValue;
      continue;
    }
    // Expect::kValue.
    const unsigned char c = *p_;
    if (c == '{' || c == '[') {
      if (depth == kMaxJsonDepth) return false;
      ++p_;
      SkipWhitespace();
      const char close = c == '{' ? '}' : ']';
      if (p_ != end_ && *p_ == close) {  // Empty container.
        ++p_;
        expect = Expect::kAfterValue;
        continue;
      }
      is_object[depth++] = c == '{';
      expect = c == '{' ? Expect::kMemberKey : Expect::kValue;
      continue;
    }
    bool ok;
    if (c == '"') {
      ok = ConsumeString();
    } else if (c == '-' || IsDigit(c)) {
      ok = ConsumeNumber();
    } else if (c == 't') {
      ok = ConsumeLiteral("true");
    } else if (c == 'f') {
      ok = ConsumeLiteral("false");
    } else if (c == 'n') {
      ok = ConsumeLiteral("null");
    } else {
      ok = false;
    }
    if (!ok) return false;
    expect = Expect::kAfterValue;
  }
}

// Copies valid JSON text, rewriting raw U+2028/U+2029 (which valid JSON can
// hold only inside strings, where the escape means the same) as escapes.
void AppendRawJson(std::string_view json, std::string* out) {
  const auto* u = reinterpret_cast<const unsigned char*>(json.data());
  const size_t n = json.size();
  size_t run_start = 0;
  const void* hit;
  while (run_start < n &&
         (hit = std::memchr(u + run_start, 0xE2, n - run_start)) != nullptr) {
    const size_t i =
        static_cast<size_t>(static_cast<const unsigned char*>(hit) - u);
    if (i + 3 <= n && IsLineOrParagraphSeparator(u + i)) {
      out->append(json.data() + run_start, i - run_start);
      out->append(u[i + 2] == 0xA8 ? "\\u2028" : "\\u2029", 6);
      run_start = i + 3;
    } else {
      // Any other E2 sequence stays; resume the search after this byte.
      out->append(json.data() + run_start, i + 1 - run_start);
      run_start = i + 1;
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

bool IsValidJson(std::string_view text) { return JsonValidator(text).Run(); }

// ---------------------------------------------------------------------------
// JsonWriter

void JsonWriter::BeforeValue() {
  // Inside an object every value must follow a Key().
  assert(depth_ == 0 || depth_ > 64 || !((object_bits_ >> (depth_ - 1)) & 1) ||
         after_key_);
  if (need_comma_) out_->push_back(',');
  need_comma_ = true;
  after_key_ = false;
}

void JsonWriter::BeginContainer(char open, bool is_object) {
  BeforeValue();
  out_->push_back(open);
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

void JsonWriter::Key(std::string_view key) {
  assert(depth_ > 0 && (depth_ > 64 || ((object_bits_ >> (depth_ - 1)) & 1)) &&
         "Key outside an object");
  assert(!after_key_ && "two keys in a row");
  if (need_comma_) out_->push_back(',');
  AppendJsonString(key, out_);
  out_->push_back(':');
  need_comma_ = false;
  after_key_ = true;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendJsonString(value, out_);
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out_->append(buffer, static_cast<size_t>(result.ptr - buffer));
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out_->append(buffer, static_cast<size_t>(result.ptr - buffer));
}

void JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_->append("null", 4);
    return;
  }
  // std::to_chars without a format gives the shortest text that reads back
  // exactly, e.g. "0.1", "1e+100", "-0"; all are valid JSON numbers. 32
  // bytes hold the longest, "-2.2250738585072014e-308".
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out_->append(buffer, static_cast<size_t>(result.ptr - buffer));
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  if (value) {
    out_->append("true", 4);
  } else {
    out_->append("false", 5);
  }
}

void JsonWriter::Null() {
  BeforeValue();
  out_->append("null", 4);
}

void JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  AppendRawJson(json, out_);
}

void JsonWriter::Base64(std::string_view bytes) {
  BeforeValue();
  out_->push_back('"');
  AppendBase64(bytes, out_);
  out_->push_back('"');
}

}  // namespace spool::storage
