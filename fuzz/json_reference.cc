#include "fuzz/json_reference.h"

#include <cstdint>

#include "fuzz/fuzz_support.h"

namespace spool::fuzz {
namespace {

class Parser {
 public:
  Parser(std::string_view text, size_t max_depth)
      : text_(text), max_depth_(max_depth) {}

  std::optional<JsonValue> ParseDocument() {
    JsonValue value;
    SkipWhitespace();
    if (!ParseValue(&value, 0)) return std::nullopt;
    SkipWhitespace();
    if (pos_ != text_.size()) return std::nullopt;
    return value;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  unsigned char Peek() const { return static_cast<unsigned char>(text_[pos_]); }

  void SkipWhitespace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' ||
                        Peek() == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  // `depth` is the number of arrays and objects around the value.
  bool ParseValue(JsonValue* out, size_t depth) {
    if (AtEnd()) return false;
    switch (Peek()) {
      case '{':
        return ParseObject(out, depth);
      case '[':
        return ParseArray(out, depth);
      case '"':
        out->kind = JsonValue::Kind::kString;
        return ParseString(&out->text);
      case 't':
        out->kind = JsonValue::Kind::kBool;
        out->boolean = true;
        return Consume("true");
      case 'f':
        out->kind = JsonValue::Kind::kBool;
        out->boolean = false;
        return Consume("false");
      case 'n':
        out->kind = JsonValue::Kind::kNull;
        return Consume("null");
      default:
        out->kind = JsonValue::Kind::kNumber;
        return ParseNumber(&out->text);
    }
  }

  bool ParseArray(JsonValue* out, size_t depth) {
    if (depth >= max_depth_) return false;
    out->kind = JsonValue::Kind::kArray;
    ++pos_;  // '['
    SkipWhitespace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipWhitespace();
      out->items.emplace_back();
      if (!ParseValue(&out->items.back(), depth + 1)) return false;
      SkipWhitespace();
      if (AtEnd()) return false;
      if (Peek() == ']') {
        ++pos_;
        return true;
      }
      if (Peek() != ',') return false;
      ++pos_;
    }
  }

  bool ParseObject(JsonValue* out, size_t depth) {
    if (depth >= max_depth_) return false;
    out->kind = JsonValue::Kind::kObject;
    ++pos_;  // '{'
    SkipWhitespace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipWhitespace();
      if (AtEnd() || Peek() != '"') return false;
      std::string name;
      if (!ParseString(&name)) return false;
      SkipWhitespace();
      if (AtEnd() || Peek() != ':') return false;
      ++pos_;
      SkipWhitespace();
      out->members.emplace_back(std::move(name), JsonValue());
      if (!ParseValue(&out->members.back().second, depth + 1)) return false;
      SkipWhitespace();
      if (AtEnd()) return false;
      if (Peek() == '}') {
        ++pos_;
        return true;
      }
      if (Peek() != ',') return false;
      ++pos_;
    }
  }

  bool ParseHex4(uint32_t* unit) {
    if (text_.size() - pos_ < 4) return false;
    uint32_t value = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text_[pos_ + k];
      int digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return false;
      }
      value = value * 16 + static_cast<uint32_t>(digit);
    }
    pos_ += 4;
    *unit = value;
    return true;
  }

  bool ParseString(std::string* out) {
    ++pos_;  // '"'
    while (true) {
      if (AtEnd()) return false;
      const unsigned char c = Peek();
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        ++pos_;
        if (AtEnd()) return false;
        const char e = text_[pos_++];
        switch (e) {
          case '"':
            *out += '"';
            break;
          case '\\':
            *out += '\\';
            break;
          case '/':
            *out += '/';
            break;
          case 'b':
            *out += '\b';
            break;
          case 'f':
            *out += '\f';
            break;
          case 'n':
            *out += '\n';
            break;
          case 'r':
            *out += '\r';
            break;
          case 't':
            *out += '\t';
            break;
          case 'u': {
            uint32_t unit;
            if (!ParseHex4(&unit)) return false;
            if (unit >= 0xDC00 && unit <= 0xDFFF) return false;
            if (unit >= 0xD800 && unit <= 0xDBFF) {
              uint32_t low;
              if (!Consume("\\u") || !ParseHex4(&low) || low < 0xDC00 ||
                  low > 0xDFFF) {
                return false;
              }
              unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            }
            AppendUtf8(unit, out);
            break;
          }
          default:
            return false;
        }
        continue;
      }
      if (c < 0x80) {
        *out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      size_t subpart;
      const size_t length = Utf8AtReference(text_, pos_, &subpart);
      if (length == 0) return false;
      out->append(text_.substr(pos_, length));
      pos_ += length;
    }
  }

  bool Digits() {
    const size_t start = pos_;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
    return pos_ > start;
  }

  bool ParseNumber(std::string* out) {
    const size_t start = pos_;
    if (!AtEnd() && Peek() == '-') ++pos_;
    if (AtEnd()) return false;
    if (Peek() == '0') {
      ++pos_;
    } else if (Peek() >= '1' && Peek() <= '9') {
      Digits();
    } else {
      return false;
    }
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      if (!Digits()) return false;
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (!Digits()) return false;
    }
    *out = std::string(text_.substr(start, pos_ - start));
    return true;
  }

  std::string_view text_;
  size_t max_depth_;
  size_t pos_ = 0;
};

void Describe(const JsonValue& value, std::string* out) {
  switch (value.kind) {
    case JsonValue::Kind::kNull:
      *out += "null";
      return;
    case JsonValue::Kind::kBool:
      *out += value.boolean ? "true" : "false";
      return;
    case JsonValue::Kind::kNumber:
      *out += value.text;
      return;
    case JsonValue::Kind::kString:
      *out += '"' + Printable(value.text) + '"';
      return;
    case JsonValue::Kind::kArray:
      *out += '[';
      for (size_t i = 0; i < value.items.size(); ++i) {
        if (i > 0) *out += ',';
        Describe(value.items[i], out);
      }
      *out += ']';
      return;
    case JsonValue::Kind::kObject:
      *out += '{';
      for (size_t i = 0; i < value.members.size(); ++i) {
        if (i > 0) *out += ',';
        *out += '"' + Printable(value.members[i].first) + "\":";
        Describe(value.members[i].second, out);
      }
      *out += '}';
      return;
  }
}

}  // namespace

const JsonValue* JsonValue::Find(std::string_view name) const {
  for (const auto& [key, value] : members) {
    if (key == name) return &value;
  }
  return nullptr;
}

bool operator==(const JsonValue& a, const JsonValue& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case JsonValue::Kind::kNull:
      return true;
    case JsonValue::Kind::kBool:
      return a.boolean == b.boolean;
    case JsonValue::Kind::kNumber:
    case JsonValue::Kind::kString:
      return a.text == b.text;
    case JsonValue::Kind::kArray:
      return a.items == b.items;
    case JsonValue::Kind::kObject:
      return a.members == b.members;
  }
  return false;
}

std::optional<JsonValue> ParseJsonReference(std::string_view text,
                                            size_t max_depth) {
  return Parser(text, max_depth).ParseDocument();
}

std::string DescribeJson(const JsonValue& value) {
  std::string out;
  Describe(value, &out);
  return out;
}

}  // namespace spool::fuzz
