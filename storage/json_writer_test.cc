#include "storage/json_writer.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <time.h>
#include <vector>

#include <gtest/gtest.h>

#include "storage/record.h"
#include "storage/record_json.h"
#include "storage/task_record_generated.h"

namespace spool::storage {
namespace {

// U+FFFD REPLACEMENT CHARACTER in UTF-8.
const std::string kR = "\xEF\xBF\xBD";

std::string Quoted(std::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

std::string Hex(std::string_view bytes) {
  std::string out;
  char buffer[4];
  for (unsigned char c : bytes) {
    std::snprintf(buffer, sizeof(buffer), "%02X ", c);
    out += buffer;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Test-only reference UTF-8 decoding, written differently from the
// production code: instead of a table of second-byte ranges, a byte prefix is
// accepted when the code points whose encodings start with it include a
// Unicode scalar value that needs exactly that encoding length.

int LengthFromLead(unsigned char b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 0;
}

uint32_t DecodeUnchecked(const unsigned char* p, int length) {
  static constexpr unsigned char kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = p[0] & kLeadMask[length];
  for (int k = 1; k < length; ++k) cp = (cp << 6) | (p[k] & 0x3F);
  return cp;
}

bool IsPrefixOfWellFormed(const unsigned char* p, int k) {
  const int length = LengthFromLead(p[0]);
  if (length == 0 || k > length) return false;
  for (int j = 1; j < k; ++j) {
    if ((p[j] & 0xC0) != 0x80) return false;
  }
  unsigned char low[4], high[4];
  for (int j = 0; j < length; ++j) {
    low[j] = j < k ? p[j] : 0x80;
    high[j] = j < k ? p[j] : 0xBF;
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  static constexpr uint32_t kMax[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  const uint32_t lo = std::max(DecodeUnchecked(low, length), kMin[length]);
  const uint32_t hi = std::min(DecodeUnchecked(high, length), kMax[length]);
  if (lo > hi) return false;
  // Some value in [lo, hi] must not be a surrogate.
  return lo < 0xD800 || hi > 0xDFFF;
}

// Decodes arbitrary bytes to code points, with one U+FFFD per maximal
// subpart of an ill-formed sequence.
std::vector<uint32_t> ReferenceDecode(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  std::vector<uint32_t> out;
  size_t i = 0;
  while (i < n) {
    int k = 0;
    while (k < 4 && i + k < n && IsPrefixOfWellFormed(p + i, k + 1)) {
      ++k;
    }
    if (k > 0 && k == LengthFromLead(p[i])) {
      out.push_back(DecodeUnchecked(p + i, k));
      i += k;
    } else {
      out.push_back(0xFFFD);
      i += k == 0 ? 1 : k;
    }
  }
  return out;
}

// Strictly decodes UTF-8; returns false on any ill-formed sequence.
bool StrictDecode(std::string_view bytes, std::vector<uint32_t>* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    const int length = LengthFromLead(p[i]);
    if (length == 0 || i + length > bytes.size()) return false;
    for (int k = 1; k <= length; ++k) {
      if (!IsPrefixOfWellFormed(p + i, k)) return false;
    }
    out->push_back(DecodeUnchecked(p + i, length));
    i += length;
  }
  return true;
}

// Parses one JSON string literal (the whole of `json`) into code points.
// Returns false if it is not a valid literal, or if it holds a raw control
// character, U+2028 or U+2029, which the writer must always escape.
bool ParseJsonString(std::string_view json, std::vector<uint32_t>* out) {
  if (json.size() < 2 || json.front() != '"' || json.back() != '"') {
    return false;
  }
  std::vector<uint32_t> raw;
  if (!StrictDecode(json.substr(1, json.size() - 2), &raw)) return false;
  auto hex4 = [&](size_t at, uint32_t* unit) {
    if (at + 4 > raw.size()) return false;
    *unit = 0;
    for (size_t k = at; k < at + 4; ++k) {
      const uint32_t c = raw[k];
      int digit;
      if (c >= '0' && c <= '9') {
        digit = static_cast<int>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<int>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<int>(c - 'A' + 10);
      } else {
        return false;
      }
      *unit = *unit * 16 + static_cast<uint32_t>(digit);
    }
    return true;
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    const uint32_t c = raw[i];
    if (c < 0x20 || c == '"' || c == 0x2028 || c == 0x2029) return false;
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    if (++i >= raw.size()) return false;
    switch (raw[i]) {
      case '"':
        out->push_back('"');
        break;
      case '\\':
        out->push_back('\\');
        break;
      case '/':
        out->push_back('/');
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'u': {
        uint32_t unit;
        if (!hex4(i + 1, &unit)) return false;
        i += 4;
        if (unit >= 0xD800 && unit <= 0xDFFF) return false;  // Not emitted.
        out->push_back(unit);
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Escaping

std::string ExpectedForByte(unsigned char c) {
  switch (c) {
    case '\b':
      return "\"\\b\"";
    case '\f':
      return "\"\\f\"";
    case '\n':
      return "\"\\n\"";
    case '\r':
      return "\"\\r\"";
    case '\t':
      return "\"\\t\"";
    case '"':
      return "\"\\\"\"";
    case '\\':
      return "\"\\\\\"";
    default:
      break;
  }
  if (c < 0x20) {
    char buffer[16];
    std::snprintf(buffer, sizeof(buffer), "\"\\u%04x\"", c);
    return buffer;
  }
  if (c < 0x80) return std::string("\"") + static_cast<char>(c) + "\"";
  return "\"" + kR + "\"";  // A lone non-ASCII byte is never well-formed.
}

TEST(JsonEscapeTest, EveryOneByteString) {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    EXPECT_EQ(Quoted(std::string_view(&c, 1)),
              ExpectedForByte(static_cast<unsigned char>(b)))
        << "byte 0x" << std::hex << b;
  }
}

TEST(JsonEscapeTest, ControlCharactersAtEveryOffset) {
  // Each control character, '"' and '\\' at every position of strings long
  // enough to cross several 8-byte SWAR words and the byte-wise tail.
  std::vector<unsigned char> specials;
  for (int c = 0; c < 0x20; ++c)
    specials.push_back(static_cast<unsigned char>(c));
  specials.push_back('"');
  specials.push_back('\\');
  for (unsigned char special : specials) {
    const std::string escaped = ExpectedForByte(special);
    const std::string inner = escaped.substr(1, escaped.size() - 2);
    for (size_t length = 1; length <= 24; ++length) {
      for (size_t at = 0; at < length; ++at) {
        std::string input(length, 'a');
        input[at] = static_cast<char>(special);
        const std::string expected = "\"" + std::string(at, 'a') + inner +
                                     std::string(length - at - 1, 'a') + "\"";
        ASSERT_EQ(Quoted(input), expected)
            << "byte " << static_cast<int>(special) << " at " << at << " of "
            << length;
      }
    }
  }
}

TEST(JsonEscapeTest, ShortAndUnicodeEscapeForms) {
  EXPECT_EQ(Quoted(std::string("\0", 1)), "\"\\u0000\"");
  EXPECT_EQ(Quoted("\x01\x1f"), "\"\\u0001\\u001f\"");
  EXPECT_EQ(Quoted("\x0b"), "\"\\u000b\"");  // \v has no JSON short form.
  EXPECT_EQ(Quoted("a\"b\\c/d"), "\"a\\\"b\\\\c/d\"");  // '/' is not escaped.
  EXPECT_EQ(Quoted("\x7f"), "\"\x7f\"");  // DEL needs no escape in JSON.
  EXPECT_EQ(Quoted(""), "\"\"");
}

struct Utf8Case {
  const char* name;
  std::string input;
  std::string expected;  // The escaped body, without the quotes.
};

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Cases after Markus Kuhn's "UTF-8 decoder capability and stress test"
// (https://www.cl.cam.ac.uk/~mgk25/ucs/examples/UTF-8-test.txt), section
// numbers in the names, with the output that U+FFFD substitution of maximal
// subparts (Unicode 15, section 3.9) prescribes.
std::vector<Utf8Case> KuhnCases() {
  std::vector<Utf8Case> cases = {
      // 1 and 2: valid text and boundary conditions pass through.
      {"1 greek kosme", "\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5",
       "\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5"},
      {"2.1.1 U+0000", std::string("\0", 1), "\\u0000"},
      {"2.1.2 U+0080", "\xC2\x80", "\xC2\x80"},
      {"2.1.3 U+0800", "\xE0\xA0\x80", "\xE0\xA0\x80"},
      {"2.1.4 U+10000", "\xF0\x90\x80\x80", "\xF0\x90\x80\x80"},
      {"2.1.5 5-byte first", "\xF8\x88\x80\x80\x80", Repeat(kR, 5)},
      {"2.1.6 6-byte first", "\xFC\x84\x80\x80\x80\x80", Repeat(kR, 6)},
      {"2.2.1 U+007F", "\x7F", "\x7F"},
      {"2.2.2 U+07FF", "\xDF\xBF", "\xDF\xBF"},
      {"2.2.3 U+FFFF", "\xEF\xBF\xBF", "\xEF\xBF\xBF"},
      {"2.2.4 U+1FFFFF", "\xF7\xBF\xBF\xBF", Repeat(kR, 4)},
      {"2.2.5 5-byte last", "\xFB\xBF\xBF\xBF\xBF", Repeat(kR, 5)},
      {"2.2.6 6-byte last", "\xFD\xBF\xBF\xBF\xBF\xBF", Repeat(kR, 6)},
      {"2.3.1 U+D7FF", "\xED\x9F\xBF", "\xED\x9F\xBF"},
      {"2.3.2 U+E000", "\xEE\x80\x80", "\xEE\x80\x80"},
      {"2.3.3 U+FFFD", "\xEF\xBF\xBD", "\xEF\xBF\xBD"},
      {"2.3.4 U+10FFFF", "\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"},
      {"2.3.5 U+110000", "\xF4\x90\x80\x80", Repeat(kR, 4)},
      // 3.1 Unexpected continuation bytes: one U+FFFD each.
      {"3.1.1 first continuation", "\x80", kR},
      {"3.1.2 last continuation", "\xBF", kR},
      {"3.1.3 2 continuations", "\x80\xBF", Repeat(kR, 2)},
      {"3.1.4 3 continuations", "\x80\xBF\x80", Repeat(kR, 3)},
      {"3.1.5 4 continuations", "\x80\xBF\x80\xBF", Repeat(kR, 4)},
      {"3.1.6 5 continuations", "\x80\xBF\x80\xBF\x80", Repeat(kR, 5)},
      {"3.1.7 6 continuations", "\x80\xBF\x80\xBF\x80\xBF", Repeat(kR, 6)},
      {"3.1.8 7 continuations", "\x80\xBF\x80\xBF\x80\xBF\x80", Repeat(kR, 7)},
      // 3.3 Sequences with the last continuation byte missing. A truncated
      // well-formed prefix is one maximal subpart; a lead byte that can never
      // start a well-formed sequence stands alone.
      {"3.3.1 2-byte U+0000 truncated", "\xC0", kR},
      {"3.3.2 3-byte U+0000 truncated", "\xE0\x80", Repeat(kR, 2)},
      {"3.3.3 4-byte U+0000 truncated", "\xF0\x80\x80", Repeat(kR, 3)},
      {"3.3.4 5-byte U+0000 truncated", "\xF8\x80\x80\x80", Repeat(kR, 4)},
      {"3.3.5 6-byte U+0000 truncated", "\xFC\x80\x80\x80\x80", Repeat(kR, 5)},
      {"3.3.6 2-byte U+07FF truncated", "\xDF", kR},
      {"3.3.7 3-byte U+FFFF truncated", "\xEF\xBF", kR},
      {"3.3.8 4-byte U+1FFFFF truncated", "\xF7\xBF\xBF", Repeat(kR, 3)},
      {"3.3.9 5-byte truncated", "\xFB\xBF\xBF\xBF", Repeat(kR, 4)},
      {"3.3.10 6-byte truncated", "\xFD\xBF\xBF\xBF\xBF", Repeat(kR, 5)},
      {"3.3 valid 4-byte truncated", "\xF0\x9F\x98", kR},
      {"3.3 valid 4-byte cut to 2", "\xF0\x9F", kR},
      {"3.3 valid 3-byte cut to 1", "\xE2", kR},
      // 3.4 Concatenation of the 3.3 sequences.
      {"3.4 concatenated",
       "\xC0\xE0\x80\xF0\x80\x80\xF8\x80\x80\x80\xFC\x80\x80\x80\x80"
       "\xDF\xEF\xBF\xF7\xBF\xBF\xFB\xBF\xBF\xBF\xFD\xBF\xBF\xBF\xBF",
       Repeat(kR, 1 + 2 + 3 + 4 + 5 + 1 + 1 + 3 + 4 + 5)},
      // 3.5 Impossible bytes.
      {"3.5.1 FE", "\xFE", kR},
      {"3.5.2 FF", "\xFF", kR},
      {"3.5.3 FE FE FF FF", "\xFE\xFE\xFF\xFF", Repeat(kR, 4)},
      // 4 Overlong forms: the lead byte (or its second byte) rules them out,
      // so every byte becomes one U+FFFD.
      {"4.1.1 '/' in 2 bytes", "\xC0\xAF", Repeat(kR, 2)},
      {"4.1.2 '/' in 3 bytes", "\xE0\x80\xAF", Repeat(kR, 3)},
      {"4.1.3 '/' in 4 bytes", "\xF0\x80\x80\xAF", Repeat(kR, 4)},
      {"4.1.4 '/' in 5 bytes", "\xF8\x80\x80\x80\xAF", Repeat(kR, 5)},
      {"4.1.5 '/' in 6 bytes", "\xFC\x80\x80\x80\x80\xAF", Repeat(kR, 6)},
      {"4.2.1 max overlong 2", "\xC1\xBF", Repeat(kR, 2)},
      {"4.2.2 max overlong 3", "\xE0\x9F\xBF", Repeat(kR, 3)},
      {"4.2.3 max overlong 4", "\xF0\x8F\xBF\xBF", Repeat(kR, 4)},
      {"4.2.4 max overlong 5", "\xF8\x87\xBF\xBF\xBF", Repeat(kR, 5)},
      {"4.2.5 max overlong 6", "\xFC\x83\xBF\xBF\xBF\xBF", Repeat(kR, 6)},
      {"4.3.1 NUL in 2 bytes", "\xC0\x80", Repeat(kR, 2)},
      {"4.3.2 NUL in 3 bytes", "\xE0\x80\x80", Repeat(kR, 3)},
      {"4.3.3 NUL in 4 bytes", "\xF0\x80\x80\x80", Repeat(kR, 4)},
      {"4.3.4 NUL in 5 bytes", "\xF8\x80\x80\x80\x80", Repeat(kR, 5)},
      {"4.3.5 NUL in 6 bytes", "\xFC\x80\x80\x80\x80\x80", Repeat(kR, 6)},
      // 5.1 Single UTF-16 surrogates encoded in UTF-8.
      {"5.1.1 U+D800", "\xED\xA0\x80", Repeat(kR, 3)},
      {"5.1.2 U+DB7F", "\xED\xAD\xBF", Repeat(kR, 3)},
      {"5.1.3 U+DB80", "\xED\xAE\x80", Repeat(kR, 3)},
      {"5.1.4 U+DBFF", "\xED\xAF\xBF", Repeat(kR, 3)},
      {"5.1.5 U+DC00", "\xED\xB0\x80", Repeat(kR, 3)},
      {"5.1.6 U+DF80", "\xED\xBE\x80", Repeat(kR, 3)},
      {"5.1.7 U+DFFF", "\xED\xBF\xBF", Repeat(kR, 3)},
      // 5.2 Paired surrogates are no better.
      {"5.2.1 U+D800 U+DC00", "\xED\xA0\x80\xED\xB0\x80", Repeat(kR, 6)},
      {"5.2.8 U+DBFF U+DFFF", "\xED\xAF\xBF\xED\xBF\xBF", Repeat(kR, 6)},
      // 5.3 Noncharacters are valid scalar values and pass through.
      {"5.3.1 U+FFFE", "\xEF\xBF\xBE", "\xEF\xBF\xBE"},
      {"5.3.2 U+FFFF", "\xEF\xBF\xBF", "\xEF\xBF\xBF"},
      {"5.3.3 U+FDD0", "\xEF\xB7\x90", "\xEF\xB7\x90"},
      {"5.3.4 U+10FFFE", "\xF4\x8F\xBF\xBE", "\xF4\x8F\xBF\xBE"},
      // Unicode 15, Table 3-8: the standard's own worked example.
      {"unicode table 3-8",
       "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
       "a" + kR + kR + kR + "b" + kR + "c" + kR + kR + "d"},
      // Invalid bytes mixed into ASCII across SWAR word boundaries.
      {"lone continuation in ascii", "abcdefg\x80hijklmnop",
       "abcdefg" + kR + "hijklmnop"},
      {"truncated before quote", "abc\xE2\x82\"", "abc" + kR + "\\\""},
      {"lead before ascii", "\xC3(", kR + "("},
      {"surrogate lead then ascii", "\xED\xA0z", kR + kR + "z"},
      {"F4 over range", "\xF4\x90\x80\x80x", Repeat(kR, 4) + "x"},
      {"F5 lead", "\xF5\x80\x80\x80", Repeat(kR, 4)},
  };
  // 3.1.9: all 64 continuation bytes in a row.
  std::string continuations;
  for (int b = 0x80; b <= 0xBF; ++b) continuations += static_cast<char>(b);
  cases.push_back(
      {"3.1.9 all 64 continuations", continuations, Repeat(kR, 64)});
  // 3.2: every lead byte followed by a space: the lead alone is replaced.
  for (int b = 0xC0; b <= 0xFD; ++b) {
    std::string input;
    for (int k = 0; k < 2; ++k) {
      input += static_cast<char>(b);
      input += ' ';
    }
    cases.push_back({"3.2 lonely start + space", input, kR + " " + kR + " "});
  }
  return cases;
}

TEST(JsonEscapeTest, KuhnStressCases) {
  for (const Utf8Case& c : KuhnCases()) {
    EXPECT_EQ(Quoted(c.input), "\"" + c.expected + "\"")
        << c.name << ": input " << Hex(c.input);
    // The independent reference decoder must agree on the code points.
    std::vector<uint32_t> parsed;
    ASSERT_TRUE(ParseJsonString(Quoted(c.input), &parsed)) << c.name;
    EXPECT_EQ(parsed, ReferenceDecode(c.input)) << c.name;
  }
}

TEST(JsonEscapeTest, ValidMultiByteTextPassesThrough) {
  const std::vector<std::string> texts = {
      "caf\xC3\xA9",                                       // 2 bytes
      "\xE2\x82\xAC 100",                                  // 3 bytes
      "\xF0\x9D\x84\x9E clef",                             // 4 bytes
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",              // CJK
      "\xF0\x9F\x98\x80\xF0\x9F\x98\x81\xF0\x9F\x98\x82",  // emoji
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",  // Cyrillic
      "\xE2\x80\xA7\xE2\x80\xAA",  // U+2027, U+202A: neighbours of U+2028
  };
  for (const std::string& text : texts) {
    // At every offset, so that sequences straddle 8-byte words.
    for (size_t pad = 0; pad < 9; ++pad) {
      const std::string input = std::string(pad, 'x') + text + "tail";
      EXPECT_EQ(Quoted(input), "\"" + input + "\"") << Hex(input);
    }
  }
}

TEST(JsonEscapeTest, LineAndParagraphSeparatorsAreEscaped) {
  EXPECT_EQ(Quoted("\xE2\x80\xA8"), "\"\\u2028\"");
  EXPECT_EQ(Quoted("\xE2\x80\xA9"), "\"\\u2029\"");
  EXPECT_EQ(Quoted("a\xE2\x80\xA8"
                   "b\xE2\x80\xA9"
                   "c"),
            "\"a\\u2028b\\u2029c\"");
  // Truncated separators are ill-formed, not separators.
  EXPECT_EQ(Quoted("\xE2\x80"), "\"" + kR + "\"");
}

TEST(JsonEscapeTest, LongRunsAreCopiedIntact) {
  std::string ascii;
  for (int i = 0; i < 10000; ++i) ascii += static_cast<char>('a' + i % 26);
  EXPECT_EQ(Quoted(ascii), "\"" + ascii + "\"");
  std::string mixed =
      Repeat("h\xC3\xA9llo w\xC3\xB6rld \xE2\x82\xAC\xF0\x9F\x98\x80 ", 200);
  EXPECT_EQ(Quoted(mixed), "\"" + mixed + "\"");
}

TEST(JsonEscapeTest, AppendsToExistingContents) {
  std::string out = "prefix:";
  AppendJsonString("x\n", &out);
  EXPECT_EQ(out, "prefix:\"x\\n\"");
}

// Random byte strings: the output is always valid UTF-8, a valid JSON
// string, and decodes to exactly the reference decoder's code points.
TEST(JsonEscapeTest, RandomBytesAlwaysGiveValidJson) {
  constexpr uint32_t kSeed = 20240229;
  std::mt19937 rng(kSeed);
  // Byte pieces that exercise every path; half the strings are built from
  // them, half are uniformly random bytes.
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           " ",
                                           "\"",
                                           "\\",
                                           "/",
                                           std::string("\0", 1),
                                           "\x1f",
                                           "\x7f",
                                           "\n",
                                           "\xC3\xA9",
                                           "\xE2\x82\xAC",
                                           "\xF0\x9F\x98\x80",
                                           "\xE2\x80\xA8",
                                           "\xE2\x80\xA9",
                                           "\x80",
                                           "\xBF",
                                           "\xC0",
                                           "\xC1",
                                           "\xC2",
                                           "\xE0",
                                           "\xE0\xA0",
                                           "\xED",
                                           "\xED\xA0",
                                           "\xED\x9F",
                                           "\xEF\xBF",
                                           "\xF0",
                                           "\xF0\x90",
                                           "\xF0\x90\x80",
                                           "\xF4\x8F",
                                           "\xF4\x90",
                                           "\xF5",
                                           "\xFF",
                                           "\xE2",
                                           "\xE2\x80",
                                           "0123456789abcdef"};
  std::uniform_int_distribution<int> length_dist(0, 40);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  std::uniform_int_distribution<size_t> piece_dist(0, pieces.size() - 1);
  std::string out;
  for (int iteration = 0; iteration < 100000; ++iteration) {
    std::string input;
    const int length = length_dist(rng);
    const bool from_pieces = iteration % 2 == 0;
    for (int k = 0; k < length; ++k) {
      if (from_pieces) {
        input += pieces[piece_dist(rng)];
      } else {
        input += static_cast<char>(byte_dist(rng));
      }
    }
    out.clear();
    AppendJsonString(input, &out);
    std::vector<uint32_t> parsed;
    ASSERT_TRUE(ParseJsonString(out, &parsed))
        << "seed " << kSeed << " iteration " << iteration << ": input "
        << Hex(input) << " gave " << Hex(out);
    ASSERT_EQ(parsed, ReferenceDecode(input))
        << "seed " << kSeed << " iteration " << iteration << ": input "
        << Hex(input) << " gave " << Hex(out);
    ASSERT_TRUE(IsValidJson(out))
        << "seed " << kSeed << " iteration " << iteration << ": " << Hex(out);
  }
}

TEST(JsonEscapeTest, ReferenceDecoderAgreesWithStrictDecoderOnValidText) {
  // Guards the test's own reference: for every scalar value, encoding then
  // decoding gives it back.
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    const std::vector<uint32_t> decoded = ReferenceDecode(s);
    ASSERT_EQ(decoded.size(), 1u) << cp;
    ASSERT_EQ(decoded[0], cp);
    if (cp >= 0x20 && cp != '"' && cp != '\\' && cp != 0x2028 && cp != 0x2029) {
      ASSERT_EQ(Quoted(s), "\"" + s + "\"") << "U+" << std::hex << cp;
    }
  }
}

// ---------------------------------------------------------------------------
// Base64

TEST(Base64Test, Rfc4648Vectors) {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [input, expected] : vectors) {
    std::string out;
    AppendBase64(input, &out);
    EXPECT_EQ(out, expected) << input;
  }
}

TEST(Base64Test, UsesStandardAlphabetAndRoundTrips) {
  std::string out;
  AppendBase64("\xFB\xFF\xBF", &out);
  EXPECT_EQ(out, "+/+/");
  out.clear();
  AppendBase64(std::string("\0\0\0", 3), &out);
  EXPECT_EQ(out, "AAAA");

  auto decode = [](std::string_view text) {
    static const std::string alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    uint32_t bits = 0;
    int count = 0;
    for (char c : text) {
      if (c == '=') break;
      bits = (bits << 6) | static_cast<uint32_t>(alphabet.find(c));
      count += 6;
      if (count >= 8) {
        count -= 8;
        bytes += static_cast<char>((bits >> count) & 0xFF);
      }
    }
    return bytes;
  };
  std::mt19937 rng(7);
  for (int length = 0; length < 300; ++length) {
    std::string input;
    for (int k = 0; k < length; ++k) input += static_cast<char>(rng());
    out.clear();
    AppendBase64(input, &out);
    ASSERT_EQ(out.size(), (input.size() + 2) / 3 * 4);
    ASSERT_EQ(decode(out), input) << length;
  }
}

// ---------------------------------------------------------------------------
// JsonWriter

TEST(JsonWriterTest, InsertsCommasAndColons) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("id");
  w.Uint(42);
  w.Key("tags");
  w.BeginArray();
  w.String("a");
  w.String("b");
  w.BeginArray();
  w.EndArray();
  w.BeginObject();
  w.EndObject();
  w.EndArray();
  w.Key("nested");
  w.BeginObject();
  w.Key("x");
  w.Null();
  w.Key("y");
  w.Bool(true);
  w.Key("z");
  w.Bool(false);
  w.EndObject();
  w.Key("k\"ey");
  w.Int(-1);
  w.EndObject();
  EXPECT_EQ(out,
            R"({"id":42,"tags":["a","b",[],{}],"nested":{"x":null,"y":true,)"
            R"("z":false},"k\"ey":-1})");
  EXPECT_TRUE(IsValidJson(out));
}

TEST(JsonWriterTest, LiteralKeyMatchesKey) {
  std::string via_key, via_literal;
  {
    JsonWriter w(&via_key);
    w.BeginObject();
    w.Key("a");
    w.Int(1);
    w.Key("created_at");
    w.String("x");
    w.Key("a_key_longer_than_the_short_string_fast_path_of_48_bytes");
    w.Null();
    w.EndObject();
  }
  {
    JsonWriter w(&via_literal);
    w.BeginObject();
    w.LiteralKey("a");
    w.Int(1);
    w.LiteralKey("created_at");
    w.String("x");
    w.LiteralKey("a_key_longer_than_the_short_string_fast_path_of_48_bytes");
    w.Null();
    w.EndObject();
  }
  EXPECT_EQ(via_literal, via_key);
  EXPECT_EQ(
      via_key,
      R"({"a":1,"created_at":"x",)"
      R"("a_key_longer_than_the_short_string_fast_path_of_48_bytes":null})");
}

TEST(JsonWriterTest, LongAndEscapedStringValues) {
  // Strings past the short fast path, and short ones that need escaping.
  const std::string long_plain(100, 'x');
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.String(long_plain);
  w.String("tab\there");
  w.String("");
  w.EndArray();
  EXPECT_EQ(out, "[\"" + long_plain + "\",\"tab\\there\",\"\"]");
}

TEST(JsonWriterTest, TopLevelScalarsAndAppending) {
  std::string out = "[";
  {
    JsonWriter w(&out);
    w.Int(1);
  }
  out += ",";
  {
    JsonWriter w(&out);
    w.String("two");
  }
  out += "]";
  EXPECT_EQ(out, R"([1,"two"])");
}

TEST(JsonWriterTest, IntegerLimits) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Int(std::numeric_limits<int64_t>::min());
  w.Int(std::numeric_limits<int64_t>::max());
  w.Int(0);
  w.Uint(std::numeric_limits<uint64_t>::max());
  w.Uint(0);
  w.EndArray();
  EXPECT_EQ(out,
            "[-9223372036854775808,9223372036854775807,0,"
            "18446744073709551615,0]");
}

TEST(JsonWriterTest, DoublesAreShortestRoundTripAndNonFiniteIsNull) {
  auto text = [](double d) {
    std::string out;
    JsonWriter w(&out);
    w.Double(d);
    return out;
  };
  EXPECT_EQ(text(0.0), "0");
  EXPECT_EQ(text(-0.0), "-0");
  EXPECT_EQ(text(0.1), "0.1");
  EXPECT_EQ(text(1.5), "1.5");
  EXPECT_EQ(text(100.0), "100");
  EXPECT_EQ(text(1e300), "1e+300");
  EXPECT_EQ(text(-2.5e-8), "-2.5e-08");
  EXPECT_EQ(text(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(text(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(text(-std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(text(std::numeric_limits<double>::max()),
            "1.7976931348623157e+308");
  EXPECT_EQ(text(std::numeric_limits<double>::denorm_min()), "5e-324");

  std::mt19937_64 rng(99);
  for (int i = 0; i < 100000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    const std::string t = text(d);
    if (!std::isfinite(d)) {
      ASSERT_EQ(t, "null");
      continue;
    }
    ASSERT_TRUE(IsValidJson(t)) << t;
    const double back = std::strtod(t.c_str(), nullptr);
    ASSERT_EQ(std::memcmp(&back, &d, sizeof(d)), 0) << t;
  }
}

TEST(JsonWriterTest, RawAndBase64Values) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("raw");
  w.Raw(R"({"a":[1,2]})");
  w.Key("bin");
  w.Base64("foob");
  w.Key("sep");
  w.Raw("\"x\xE2\x80\xA8y\xE2\x80\xA9z\xE2\x82\xAC\"");
  w.Key("quotes");
  // Other characters from the E2 block stay; a separator after them is
  // still rewritten.
  w.Raw(
      "[\"\xE2\x80\x9C"
      "a\xE2\x80\x9D\xE2\x80\xA8\",\"\xE2\x80\x93\"]");
  w.EndObject();
  EXPECT_EQ(out,
            "{\"raw\":{\"a\":[1,2]},\"bin\":\"Zm9vYg==\","
            "\"sep\":\"x\\u2028y\\u2029z\xE2\x82\xAC\","
            "\"quotes\":[\"\xE2\x80\x9C"
            "a\xE2\x80\x9D\\u2028\",\"\xE2\x80\x93\"]}");
}

// ---------------------------------------------------------------------------
// IsValidJson

TEST(JsonValidatorTest, AcceptsValidJson) {
  const char* valid[] = {
      "0",
      "-0",
      "1",
      "-1",
      "123",
      "1.5",
      "-1.5e10",
      "1E+2",
      "1e-2",
      "0.0",
      "1.0E+00",
      "true",
      "false",
      "null",
      "\"\"",
      "\"abc\"",
      "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"",
      "\"\\u0000\\u00e9\\uFFFF\"",
      "\"\\ud83d\\ude00\"",
      "\"\xF0\x9F\x98\x80\"",
      "\"\xE2\x80\xA8\"",
      "[]",
      "{}",
      "[1,2,3]",
      "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}",
      " \t\n\r[ 1 , { \"x\" : [ ] } ] \n",
      "[[[[[]]]]]",
      "{\"\":0}",
      "{\"a\":1,\"a\":2}",  // Duplicate names are valid JSON.
      "\"\x7f\"",
  };
  for (const char* text : valid) EXPECT_TRUE(IsValidJson(text)) << text;
}

TEST(JsonValidatorTest, RejectsInvalidJson) {
  const std::vector<std::string> invalid = {
      "",
      " ",
      "01",
      "-",
      "+1",
      ".5",
      "1.",
      "1.e5",
      "1e",
      "1e+",
      "0x10",
      "-01",
      "NaN",
      "Infinity",
      "-Infinity",
      "tru",
      "True",
      "nul",
      "nulll",
      "'a'",
      "\"abc",
      "\"\\x\"",
      "\"\\u12\"",
      "\"\\u12G4\"",
      "\"\\ud800\"",
      "\"\\udc00\"",
      "\"\\ud800\\u0041\"",
      "\"\\ud800x\"",
      "\"a\tb\"",
      "\"a\nb\"",
      std::string("\"\0\"", 3),
      "\"\x80\"",
      "\"\xC0\xAF\"",
      "\"\xED\xA0\x80\"",
      "\"\xF4\x90\x80\x80\"",
      "\"\xE2\x82\"",
      "[",
      "]",
      "[1,]",
      "[,1]",
      "[1 2]",
      "{",
      "}",
      "{\"a\"}",
      "{\"a\":}",
      "{\"a\":1,}",
      "{a:1}",
      "{1:1}",
      "{\"a\" 1}",
      "[1}",
      "{\"a\":1]",
      "1 2",
      "[] []",
      "// c\n1",
      "/* c */1",
      "\xEF\xBB\xBF"
      "1",  // A byte order mark.
      "\x0c"
      "1",  // Form feed is not JSON whitespace.
      "[1]x",
      "\xC3\xA9",
  };
  for (const std::string& text : invalid) {
    EXPECT_FALSE(IsValidJson(text)) << Hex(text);
  }
}

TEST(JsonValidatorTest, NestingLimit) {
  auto nested = [](size_t depth, bool empty_inner) {
    std::string s(depth, '[');
    if (!empty_inner) s += "1";
    s += std::string(depth, ']');
    return s;
  };
  EXPECT_TRUE(IsValidJson(nested(kMaxJsonDepth, false)));
  EXPECT_TRUE(IsValidJson(nested(kMaxJsonDepth, true)));
  EXPECT_FALSE(IsValidJson(nested(kMaxJsonDepth + 1, false)));
  EXPECT_FALSE(IsValidJson(nested(kMaxJsonDepth + 1, true)));
  // Hostile depth fails quickly rather than exhausting the stack.
  EXPECT_FALSE(IsValidJson(std::string(1 << 20, '[')));
  std::string objects;
  for (size_t i = 0; i < kMaxJsonDepth; ++i) objects += "{\"k\":";
  objects += "0";
  objects += std::string(kMaxJsonDepth, '}');
  EXPECT_TRUE(IsValidJson(objects));
}

// ---------------------------------------------------------------------------
// RFC 3339 times

std::string Rfc3339(int64_t micros) {
  std::string out;
  AppendRfc3339(micros, &out);
  return out;
}

TEST(Rfc3339Test, KnownTimes) {
  EXPECT_EQ(Rfc3339(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(Rfc3339(1), "1970-01-01T00:00:00.000001Z");
  EXPECT_EQ(Rfc3339(-1), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(Rfc3339(1709211909000123), "2024-02-29T13:05:09.000123Z");
  EXPECT_EQ(Rfc3339(951782400000000), "2000-02-29T00:00:00.000000Z");
  EXPECT_EQ(Rfc3339(253402300799999999), "9999-12-31T23:59:59.999999Z");
  EXPECT_EQ(Rfc3339(253402300800000000), "+010000-01-01T00:00:00.000000Z");
  EXPECT_EQ(Rfc3339(-62167219200000000), "0000-01-01T00:00:00.000000Z");
  EXPECT_EQ(Rfc3339(-62167219200000001), "-000001-12-31T23:59:59.999999Z");
  // JavaScript's largest Date, new Date(8.64e15).toISOString().
  EXPECT_EQ(Rfc3339(8640000000000000000), "+275760-09-13T00:00:00.000000Z");
  EXPECT_EQ(Rfc3339(std::numeric_limits<int64_t>::max()),
            "+294247-01-10T04:00:54.775807Z");
  EXPECT_EQ(Rfc3339(std::numeric_limits<int64_t>::min()),
            "-290308-12-21T19:59:05.224192Z");
}

TEST(Rfc3339Test, AgreesWithGmtime) {
  std::mt19937_64 rng(3339);
  // Years 0001 to 9999.
  std::uniform_int_distribution<int64_t> dist(-62135596800000000,
                                              253402300799999999);
  for (int i = 0; i < 100000; ++i) {
    const int64_t micros = dist(rng);
    const time_t seconds =
        static_cast<time_t>(micros / 1000000 - (micros % 1000000 < 0 ? 1 : 0));
    const int64_t fraction = ((micros % 1000000) + 1000000) % 1000000;
    struct tm tm;
    ASSERT_NE(gmtime_r(&seconds, &tm), nullptr);
    char expected[64];
    std::snprintf(expected, sizeof(expected),
                  "%04d-%02d-%02dT%02d:%02d:%02d.%06" PRId64 "Z",
                  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                  tm.tm_min, tm.tm_sec, fraction);
    ASSERT_EQ(Rfc3339(micros), expected) << micros;
  }
}

// ---------------------------------------------------------------------------
// Tasks: a spec, a state and a failure history, read in place

// A task as the writer stores it, in memory.
struct SampleTask {
  SpecRecord spec;
  StateRecord state;
  std::vector<FailureEntry> failures;
};

SampleTask Sample() {
  SampleTask t;
  t.spec.id = 42;
  t.spec.type = "email.send";
  t.spec.payload = " {\"to\": \"a@example.com\", \"n\": [1, 2.5, null]}\n";
  t.spec.group = "tenant-9";
  t.spec.idempotency_key = "k\"1";
  t.spec.created_us = 1709211909000123;  // 2024-02-29T13:05:09.000123Z
  t.state.id = 42;
  t.state.type = "email.send";
  t.state.status = TaskStatus::kRetryScheduled;
  t.state.priority = -7;
  t.state.stored_group = "tenant-9";
  t.state.attempts = 2;
  t.state.max_attempts = 5;
  t.state.updated_us = 1709211910500000;
  t.state.next_attempt_us = 1709211970000000;
  t.state.sequence = 99;
  t.state.last_error = "timeout\n\"smtp\"";
  t.state.failures_total = 2;
  t.state.retry =
      RetryPolicy::Exponential(5, Duration(10), Duration(1000), 0.25);
  t.failures.push_back({1, 1709211909500000, "refused"});
  t.failures.push_back({2, 1709211910400000, "timeout\n\"smtp\""});
  return t;
}

// Encodes `task` into *bytes and verifies it, as a reader does.
void Store(const SampleTask& task, TaskBytes* bytes) {
  bytes->Clear();
  *bytes->mutable_spec() = EncodeSpec(task.spec);
  bytes->set_has_spec();
  *bytes->mutable_state() = EncodeState(task.state);
  bytes->set_has_state();
  for (const FailureEntry& f : task.failures) {
    *bytes->AddFailure() = EncodeFailure(f);
  }
  Status s = bytes->Verify(task.spec.id);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// Encodes, verifies and renders `task` the way a reader does.
std::string TaskJson(const SampleTask& task, PayloadFormat format) {
  TaskBytes bytes;
  Store(task, &bytes);
  if (bytes.view().spec == nullptr) return "";
  std::string out;
  AppendTaskJson(bytes.view(), format, &out);
  EXPECT_TRUE(IsValidJson(out)) << out;
  return out;
}

TEST(TaskJsonTest, SampleTaskWithEmbeddedJsonPayload) {
  EXPECT_EQ(
      TaskJson(Sample(), PayloadFormat::kJson),
      R"({"id":42,"type":"email.send","status":"retry_scheduled",)"
      R"("priority":-7,"group":"tenant-9","dedup_key":null,)"
      R"("idempotency_key":"k\"1","attempts":2,"max_attempts":5,)"
      R"("snoozes":0,"interrupted_attempts":0,)"
      R"("created_at":"2024-02-29T13:05:09.000123Z",)"
      R"("updated_at":"2024-02-29T13:05:10.500000Z",)"
      R"("next_attempt_at":"2024-02-29T13:06:10.000000Z","sequence":99,)"
      R"("last_error":"timeout\n\"smtp\"","failures":[)"
      R"({"attempt":1,"at":"2024-02-29T13:05:09.500000Z","error":"refused"},)"
      R"({"attempt":2,"at":"2024-02-29T13:05:10.400000Z",)"
      R"("error":"timeout\n\"smtp\""}],"result":null,)"
      R"("payload":{"to": "a@example.com", "n": [1, 2.5, null]}})");
}

// Each member comes from the value that holds it: what the task is from the
// spec (the application's group, not the state's stored form, which is a
// lookup tag in an encrypted store), where it is from the state.
TEST(TaskJsonTest, MembersComeFromSpecStateAndHistory) {
  SampleTask t = Sample();
  t.state.stored_group = std::string(32, '\x01');  // as a lookup tag
  t.spec.dedup_key = "invoice-1";
  t.state.stored_dedup_key = std::string(32, '\x02');
  t.state.status = TaskStatus::kFailed;
  t.state.attempts = 5;
  t.failures.push_back({5, 1709211920000000, "gave up"});
  const std::string json = TaskJson(t, PayloadFormat::kBinary);
  EXPECT_NE(json.find(R"("group":"tenant-9","dedup_key":"invoice-1",)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("status":"failed")"), std::string::npos);
  EXPECT_NE(json.find(R"("attempts":5,)"), std::string::npos);
  EXPECT_NE(json.find(R"({"attempt":5,"at":"2024-02-29T13:05:20.000000Z",)"
                      R"("error":"gave up"}])"),
            std::string::npos)
      << json;
  EXPECT_EQ(json.find("\\u0001"), std::string::npos)
      << "the stored group must not appear";
}

TEST(TaskJsonTest, NonJsonPayloadDeclaredJsonFallsBackToBase64) {
  SampleTask t = Sample();
  t.spec.payload = "{not json";
  const std::string json = TaskJson(t, PayloadFormat::kJson);
  EXPECT_NE(json.find(R"("payload_base64":"e25vdCBqc29u"})"), std::string::npos)
      << json;
  EXPECT_EQ(json.find("\"payload\":"), std::string::npos);

  // Invalid UTF-8 inside an otherwise well-formed JSON string.
  t.spec.payload = "\"\xFF\"";
  EXPECT_NE(
      TaskJson(t, PayloadFormat::kJson).find(R"("payload_base64":"Iv8i"})"),
      std::string::npos);

  t.spec.payload.clear();
  EXPECT_NE(TaskJson(t, PayloadFormat::kJson).find(R"("payload_base64":""})"),
            std::string::npos);
}

TEST(TaskJsonTest, BinaryFormatIsAlwaysBase64) {
  SampleTask t = Sample();
  t.spec.payload = "[1]";
  const std::string json = TaskJson(t, PayloadFormat::kBinary);
  EXPECT_NE(json.find(R"("payload_base64":"WzFd"})"), std::string::npos)
      << json;
  t.spec.payload = std::string("\0binary\xff", 8);
  EXPECT_NE(TaskJson(t, PayloadFormat::kBinary)
                .find(R"("payload_base64":"AGJpbmFyef8="})"),
            std::string::npos);
}

TEST(TaskJsonTest, EmptyOptionalFieldsAreNull) {
  SampleTask t;
  t.spec.id = 7;
  t.spec.type = "t";
  t.spec.payload = "null";
  t.state.id = 7;
  t.state.type = "t";
  EXPECT_EQ(TaskJson(t, PayloadFormat::kJson),
            R"({"id":7,"type":"t","status":"pending","priority":0,)"
            R"("group":null,"dedup_key":null,"idempotency_key":null,)"
            R"("attempts":0,"max_attempts":1,"snoozes":0,)"
            R"("interrupted_attempts":0,)"
            R"("created_at":"1970-01-01T00:00:00.000000Z",)"
            R"("updated_at":"1970-01-01T00:00:00.000000Z",)"
            R"("next_attempt_at":null,"sequence":0,"last_error":null,)"
            R"("failures":[],"result":null,"payload":null})");
}

// A result is shown as the payload is: the JSON itself when the format is
// JSON and it is valid JSON, else base64; the snooze count as a number.
TEST(TaskJsonTest, ResultFollowsThePayloadsRuleAndSnoozesAreCounted) {
  SampleTask t = Sample();
  t.state.status = TaskStatus::kSucceeded;
  t.state.snoozes = 3;
  t.state.interrupted_attempts = 1;
  t.state.result = " {\"sum\": 7} ";
  std::string json = TaskJson(t, PayloadFormat::kJson);
  EXPECT_NE(json.find(R"("max_attempts":5,"snoozes":3,)"
                      R"("interrupted_attempts":1,)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("result":{"sum": 7},"payload":)"), std::string::npos)
      << json;
  EXPECT_NE(TaskJson(t, PayloadFormat::kBinary)
                .find(R"("result_base64":"IHsic3VtIjogN30g",)"),
            std::string::npos);
  t.state.result = std::string("\0\xff", 2);
  EXPECT_NE(
      TaskJson(t, PayloadFormat::kJson).find(R"("result_base64":"AP8=",)"),
      std::string::npos);
  t.state.result = "";
  EXPECT_NE(TaskJson(t, PayloadFormat::kJson).find(R"("result_base64":"",)"),
            std::string::npos)
      << "an empty result is a result, not null";
}

TEST(TaskJsonTest, HostileStringsStayValid) {
  SampleTask t = Sample();
  t.spec.type = "bad\xC0type\x01";
  t.state.type = t.spec.type;
  t.state.last_error = "\xED\xA0\x80\xE2\x80\xA8";
  t.failures = {{1, -1, std::string("\0\x7f\xF8", 3)}};
  t.spec.payload = "[\"\xE2\x80\xA8\"]";
  const std::string json = TaskJson(t, PayloadFormat::kJson);
  EXPECT_NE(json.find("\"type\":\"bad" + kR + "type\\u0001\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"last_error\":\"" + kR + kR + kR + "\\u2028\""),
            std::string::npos);
  EXPECT_NE(json.find("\"at\":\"1969-12-31T23:59:59.999999Z\",\"error\":"
                      "\"\\u0000\x7f" +
                      kR + "\""),
            std::string::npos);
  EXPECT_NE(json.find("\"payload\":[\"\\u2028\"]}"), std::string::npos);
}

TEST(TaskJsonTest, ListingThroughOneWriter) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  // One TaskBytes reused for every task, as a listing does.
  TaskBytes bytes;
  for (TaskId id = 1; id <= 3; ++id) {
    SampleTask t = Sample();
    t.spec.id = id;
    t.state.id = id;
    if (id == 3) t.failures.clear();
    Store(t, &bytes);
    ASSERT_NE(bytes.view().spec, nullptr);
    WriteTaskJson(bytes.view(),
                  id == 2 ? PayloadFormat::kBinary : PayloadFormat::kJson, &w);
  }
  w.EndArray();
  EXPECT_TRUE(IsValidJson(out)) << out;
  EXPECT_EQ(out.rfind("[{\"id\":1,", 0), 0u);
  EXPECT_NE(out.find("},{\"id\":2,"), std::string::npos);
  EXPECT_NE(out.find("},{\"id\":3,"), std::string::npos);
  EXPECT_NE(out.find("\"failures\":[],\"result\":null,\"payload\""),
            std::string::npos);
  EXPECT_EQ(out.back(), ']');
}

}  // namespace
}  // namespace spool::storage
