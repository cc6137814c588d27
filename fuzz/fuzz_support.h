// What the fuzz targets share: a check that aborts with a message, a reader
// that turns fuzz bytes into values, and reference implementations of UTF-8
// and RFC 3339 written independently of spool's, so that a target can compare
// spool's output with them.
//
// The targets build with clang's libFuzzer (SPOOL_BUILD_FUZZERS=ON) and, in
// every other build, with replay_main.cc, which runs the seed corpus as a
// test; so nothing here may depend on libFuzzer headers.

#ifndef SPOOL_FUZZ_FUZZ_SUPPORT_H_
#define SPOOL_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace spool::fuzz {

// Reports a broken invariant and aborts, which libFuzzer records as a crash
// (and saves the input as an artifact).
[[noreturn]] inline void Fail(const char* file, int line, const char* condition,
                              const std::string& detail) {
  std::fprintf(stderr, "\n%s:%d: fuzz invariant failed: %s\n", file, line,
               condition);
  if (!detail.empty()) std::fprintf(stderr, "  %s\n", detail.c_str());
  std::fflush(stderr);
  std::abort();
}

// FUZZ_CHECK(condition, detail): `detail` is any expression convertible to
// std::string, evaluated only when the check fails.
#define FUZZ_CHECK(condition, detail)                                \
  do {                                                               \
    if (!(condition)) {                                              \
      ::spool::fuzz::Fail(__FILE__, __LINE__, #condition, (detail)); \
    }                                                                \
  } while (0)

// Printable form of arbitrary bytes for failure messages: printable ASCII as
// is, everything else as \xHH; cut after `limit` bytes.
inline std::string Printable(std::string_view bytes, size_t limit = 200) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof(escaped), "\\x%02X", c);
      out += escaped;
    }
  }
  if (bytes.size() > limit) out += "...";
  return out;
}

// Consumes fuzz bytes front to back. Reads past the end yield zeros, so a
// target never has to check the length (FuzzedDataProvider is clang-only).
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}

  bool empty() const { return size_ == 0; }
  size_t remaining() const { return size_; }

  uint8_t Byte() {
    if (size_ == 0) return 0;
    const auto b = static_cast<uint8_t>(*data_);
    ++data_;
    --size_;
    return b;
  }

  uint64_t U64() {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value = (value << 8) | Byte();
    return value;
  }
  uint32_t U32() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value = (value << 8) | Byte();
    return value;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  int32_t I32() { return static_cast<int32_t>(U32()); }

  // Up to `n` bytes.
  std::string_view Bytes(size_t n) {
    if (n > size_) n = size_;
    std::string_view out(data_, n);
    data_ += n;
    size_ -= n;
    return out;
  }

  // A string whose length is the next byte.
  std::string_view ShortString() { return Bytes(Byte()); }

  std::string_view Rest() { return Bytes(size_); }

 private:
  const char* data_;
  size_t size_;
};

// ---------------------------------------------------------------------------
// UTF-8, straight from the Unicode Standard (version 15, section 3.9).

// Table 3-7, "Well-Formed UTF-8 Byte Sequences": each row lists the allowed
// range of each byte of a sequence.
struct Utf8Row {
  int length;
  unsigned char low[4];
  unsigned char high[4];
};
inline constexpr Utf8Row kUtf8Table[] = {
    {1, {0x00}, {0x7F}},
    {2, {0xC2, 0x80}, {0xDF, 0xBF}},
    {3, {0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}},
    {3, {0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}},
    {3, {0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}},
    {3, {0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}},
    {4, {0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}},
    {4, {0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}},
    {4, {0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}},
};

// At text[i]: the length of the well-formed sequence starting there, or 0
// with *subpart set to the length of the maximal subpart (at least 1): the
// longest prefix of any row that the bytes match.
inline size_t Utf8AtReference(std::string_view text, size_t i,
                              size_t* subpart) {
  size_t best = 0;
  for (const Utf8Row& row : kUtf8Table) {
    size_t k = 0;
    while (k < static_cast<size_t>(row.length) && i + k < text.size()) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if (b < row.low[k] || b > row.high[k]) break;
      ++k;
    }
    if (k == static_cast<size_t>(row.length)) return k;
    if (k > best) best = k;
  }
  *subpart = best > 0 ? best : 1;
  return 0;
}

// Whether `text` is well-formed UTF-8, computed a second way: by decoding
// each code point and rejecting overlong forms, surrogates and values above
// U+10FFFF.
inline bool IsValidUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = p[i];
    int length;
    uint32_t cp;
    uint32_t min;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, cp = lead & 0x1F, min = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, cp = lead & 0x0F, min = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, cp = lead & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (n - i < static_cast<size_t>(length)) return false;
    for (int k = 1; k < length; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

// `text` with each maximal subpart of an ill-formed sequence replaced by
// U+FFFD ("U+FFFD Substitution of Maximal Subparts").
inline std::string ReplaceInvalidUtf8(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t subpart = 0;
    const size_t length = Utf8AtReference(text, i, &subpart);
    if (length > 0) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";
      i += subpart;
    }
  }
  return out;
}

// Appends code point `cp` (a Unicode scalar value) as UTF-8.
inline void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// ---------------------------------------------------------------------------
// Base64 (RFC 4648 section 4), decoding only, strict: padding required, no
// other characters.

inline std::optional<std::string> DecodeBase64(std::string_view text) {
  auto value_of = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = value_of(c)) < 0) {
        return std::nullopt;  // A character after '=' or not base64.
      }
    }
    const uint32_t group = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) |
                           (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    out += static_cast<char>(group >> 16);
    if (pad < 2) out += static_cast<char>((group >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(group & 0xFF);
    // Canonical form: the bits that padding drops must be zero.
    if ((pad == 1 && (group & 0xFF) != 0) ||
        (pad == 2 && (group & 0xFFFF) != 0)) {
      return std::nullopt;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// RFC 3339 times as spool writes them (storage/record_json.h):
// "YYYY-MM-DDTHH:MM:SS.ffffffZ", or with a sign and six year digits outside
// years 0000..9999. Parsing uses days_from_civil, the inverse of the
// algorithm spool formats with, and checked arithmetic, so it never
// overflows.

inline std::optional<int64_t> ParseRfc3339Micros(std::string_view text) {
  size_t i = 0;
  auto digits = [&](int count, int64_t* value) {
    *value = 0;
    for (int k = 0; k < count; ++k, ++i) {
      if (i >= text.size() || text[i] < '0' || text[i] > '9') return false;
      *value = *value * 10 + (text[i] - '0');
    }
    return true;
  };
  auto literal = [&](char c) {
    if (i >= text.size() || text[i] != c) return false;
    ++i;
    return true;
  };
  int64_t year = 0;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    const bool negative = text[0] == '-';
    ++i;
    if (!digits(6, &year)) return std::nullopt;
    // The expanded form is only for years that four digits cannot show.
    if (!negative && year <= 9999) return std::nullopt;
    if (negative) {
      if (year == 0) return std::nullopt;
      year = -year;
    }
  } else if (!digits(4, &year)) {
    return std::nullopt;
  }
  int64_t month, day, hour, minute, second, micros;
  if (!literal('-') || !digits(2, &month) || !literal('-') ||
      !digits(2, &day) || !literal('T') || !digits(2, &hour) || !literal(':') ||
      !digits(2, &minute) || !literal(':') || !digits(2, &second) ||
      !literal('.') || !digits(6, &micros) || !literal('Z') ||
      i != text.size()) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  static constexpr int kDays[12] = {31, 28, 31, 30, 31, 30,
                                    31, 31, 30, 31, 30, 31};
  const int64_t month_days = kDays[month - 1] + (month == 2 && leap ? 1 : 0);
  if (day < 1 || day > month_days) return std::nullopt;

  // days_from_civil (Howard Hinnant), with floor division for negative
  // years.
  const int64_t y = year - (month <= 2 ? 1 : 0);
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t mp = (month + 9) % 12;
  const int64_t doy = (153 * mp + 2) / 5 + day - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = era * 146097 + doe - 719468;

  // seconds * 10^6 + micros, refusing overflow. For negative seconds it is
  // grouped as (seconds + 1) * 10^6 + (micros - 10^6), since near INT64_MIN
  // the product alone overflows although the sum does not.
  int64_t seconds = 0;
  if (__builtin_mul_overflow(days, int64_t{86400}, &seconds) ||
      __builtin_add_overflow(seconds, hour * 3600 + minute * 60 + second,
                             &seconds)) {
    return std::nullopt;
  }
  const int64_t carry = seconds < 0 ? 1 : 0;
  int64_t total = 0;
  if (__builtin_mul_overflow(seconds + carry, int64_t{1'000'000}, &total) ||
      __builtin_add_overflow(total, micros - carry * 1'000'000, &total)) {
    return std::nullopt;
  }
  return total;
}

}  // namespace spool::fuzz

#endif  // SPOOL_FUZZ_FUZZ_SUPPORT_H_
