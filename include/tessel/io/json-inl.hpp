// Definitions of tessel/io/json.hpp's functions: compiled once, in the tessel library (src/tessel.cpp),
// or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before including
// tessel/tessel.hpp.
#pragma once

#include "tessel/io/json.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/io/atomic_file.hpp"

namespace tessel::io::json {

const value* value::find(std::string_view key) const noexcept {
  for (const member& m : members)
    if (m.key == key) return &m.val;
  return nullptr;
}

std::string_view kind_name(kind k) {
  switch (k) {
    case kind::null: return "null";
    case kind::boolean: return "a boolean";
    case kind::number: return "a number";
    case kind::string: return "a string";
    case kind::array: return "an array";
    case kind::object: return "an object";
  }
  return "?";
}

std::size_t utf8_sequence_length(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned b0 = byte(0);
  const auto cont = [&](std::size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned b1 = byte(1);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b0 == 0xED && b1 > 0x9F) return 0;  // UTF-16 surrogate
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned b1 = byte(1);
    if (b0 == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && b1 > 0x8F) return 0;  // above U+10FFFF
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

bool valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void write_string(std::string& out, std::string_view s) {
  if (!valid_utf8(s)) throw std::invalid_argument("tessel::io::json::write_string: text is not valid UTF-8");
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

namespace detail {
class parser {
 public:
  parser(std::string_view text, std::string_view context, parse_options options)
      : s_(text), context_(context), options_(options) {}

  value document() {
    skip_space();
    value v = parse_value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw format_error(std::string(context_) + ": JSON at byte " + std::to_string(pos_) + ": " + what);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_space() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  void expect(char c, const char* what) {
    if (at_end() || s_[pos_] != c) fail(std::string("expected ") + what);
    ++pos_;
  }

  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail("invalid literal (expected a value)");
    pos_ += word.size();
  }

  value parse_value(std::size_t depth) {
    value v;
    v.offset = pos_;
    if (at_end()) fail("unexpected end of the text, expected a value");
    switch (s_[pos_]) {
      case '{':
      case '[':
        if (depth >= options_.max_depth)
          fail("nesting deeper than " + std::to_string(options_.max_depth) + " levels");
        if (s_[pos_] == '{')
          parse_object(v, depth + 1);
        else
          parse_array(v, depth + 1);
        break;
      case '"':
        v.type = kind::string;
        v.text = parse_string();
        break;
      case 't':
        literal("true");
        v.type = kind::boolean;
        v.boolean = true;
        break;
      case 'f':
        literal("false");
        v.type = kind::boolean;
        break;
      case 'n':
        literal("null");
        break;
      default:
        parse_number(v);
    }
    return v;
  }

  void parse_object(value& v, std::size_t depth) {
    v.type = kind::object;
    ++pos_;
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_space();
      if (peek() != '"') fail("expected a string key in an object");
      const std::size_t key_at = pos_;
      std::string key = parse_string();
      skip_space();
      expect(':', "':' after an object key");
      skip_space();
      value item = parse_value(depth);
      v.members.push_back({std::move(key), std::move(item), key_at});
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}', "',' or '}' in an object");
      break;
    }
    // Sorted views find duplicates in n log n: a hostile header may hold millions of keys.
    std::vector<const member*> sorted;
    sorted.reserve(v.members.size());
    for (const member& m : v.members) sorted.push_back(&m);
    std::sort(sorted.begin(), sorted.end(), [](const member* a, const member* b) { return a->key < b->key; });
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i]->key == sorted[i - 1]->key) {
        pos_ = std::max(sorted[i]->offset, sorted[i - 1]->offset);
        fail("duplicate key \"" + sorted[i]->key + "\"");
      }
  }

  void parse_array(value& v, std::size_t depth) {
    v.type = kind::array;
    ++pos_;
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_space();
      if (v.items.size() == options_.max_array_items)
        fail("array with more than " + std::to_string(options_.max_array_items) + " elements");
      v.items.push_back(parse_value(depth));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']', "',' or ']' in an array");
      break;
    }
  }

  unsigned hex4() {
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      unsigned digit = 0;
      if (c >= '0' && c <= '9')
        digit = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        digit = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        digit = static_cast<unsigned>(c - 'A' + 10);
      else
        fail("invalid \\u escape: expected 4 hex digits");
      code = code * 16 + digit;
      ++pos_;
    }
    return code;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string parse_string() {
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const char c = s_[pos_];
      const auto u = static_cast<unsigned char>(c);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (u < 0x20) fail("raw control character in a string (write it as an escape)");
      if (c != '\\') {
        const std::size_t n = utf8_sequence_length(s_, pos_);
        if (n == 0) fail("invalid UTF-8 in a string");
        out.append(s_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = hex4();
          if (code >= 0xDC00 && code <= 0xDFFF) fail("invalid \\u escape: unpaired low surrogate");
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (peek() != '\\' || pos_ + 1 >= s_.size() || s_[pos_ + 1] != 'u')
              fail("invalid \\u escape: high surrogate without a low surrogate");
            pos_ += 2;
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("invalid \\u escape: high surrogate without a low surrogate");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default:
          --pos_;
          fail("invalid escape in a string");
      }
    }
  }

  void parse_number(value& v) {
    const std::size_t start = pos_;
    const auto digits = [&] {
      const std::size_t from = pos_;
      while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    bool integral = true;
    if (peek() == '-') {
      ++pos_;
      integral = false;
    }
    const std::size_t int_start = pos_;
    const std::size_t int_digits = digits();
    if (int_digits == 0) {
      pos_ = start;
      fail("expected a value");
    }
    if (int_digits > 1 && s_[int_start] == '0') {
      pos_ = int_start;
      fail("number with a leading zero");
    }
    if (peek() == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) fail("expected digits after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      integral = false;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) fail("expected digits in the exponent");
    }
    v.type = kind::number;
    v.text = std::string(s_.substr(start, pos_ - start));
    std::uint64_t n = 0;
    for (std::size_t i = int_start; i < int_start + int_digits; ++i) {
      const auto d = static_cast<std::uint64_t>(s_[i] - '0');
      if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
        pos_ = start;
        fail("number " + v.text + " is out of range (integers must fit in 64 bits)");
      }
      n = n * 10 + d;
    }
    if (integral) v.integer = n;
  }

  std::string_view s_;
  std::string_view context_;
  parse_options options_;
  std::size_t pos_ = 0;
};
}  // namespace detail

value parse(std::string_view text, std::string_view context, parse_options options) {
  return detail::parser(text, context, options).document();
}

}  // namespace tessel::io::json
