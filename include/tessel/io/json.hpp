#pragma once
// A small, strict JSON (RFC 8259) reader and string writer, enough for safetensors headers.
//
// Strict on purpose, because its input may be hostile: duplicate keys, invalid UTF-8, unpaired
// surrogates, bad escapes, raw control characters, leading zeros, integers that do not fit 64 bits and
// nesting deeper than `max_depth` are all errors; nothing is silently repaired. Errors are
// io::format_error with the byte offset: "<context>: JSON at byte 37: expected ':' after an object key".
//
//   auto v = tessel::io::json::parse(R"({"shape": [2, 3]})", "model.safetensors header");
//   v.find("shape")->items[1].integer == 3

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/io/atomic_file.hpp"

namespace tessel::io::json {

enum class kind { null, boolean, number, string, array, object };

struct member;

struct value {
  kind type = kind::null;
  bool boolean = false;
  // A string's decoded UTF-8, or a number's text as written.
  std::string text;
  // Set for a number written as a non-negative integer (no sign, fraction or exponent).
  std::optional<std::uint64_t> integer;
  std::vector<value> items;     // an array's elements
  std::vector<member> members;  // an object's members, in source order, keys unique
  std::size_t offset = 0;       // where the value starts in the source, for messages

  // The member named `key` of an object, or null.
  const value* find(std::string_view key) const noexcept;
};

struct member {
  std::string key;
  value val;
  std::size_t offset = 0;  // where the key starts in the source
};

// "object", "array", ...: for messages that say what was found.
std::string_view kind_name(kind k);

// The length of the valid UTF-8 sequence starting at s[i] (1 to 4), or 0 if it is not valid UTF-8
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) noexcept;

bool valid_utf8(std::string_view s) noexcept;

// Appends `s` as a JSON string literal. Throws std::invalid_argument if `s` is not valid UTF-8.
void write_string(std::string& out, std::string_view s);

struct parse_options {
  // Containers may nest this deep: 1 allows only a flat object or array.
  std::size_t max_depth = 16;
  // An array may hold this many elements. A value takes about 100 bytes in memory, so this bounds what a
  // long array of small numbers can make the parser allocate.
  std::size_t max_array_items = std::numeric_limits<std::size_t>::max();
};

// Parses one JSON value that spans all of `text` (surrounding whitespace allowed).
// Throws io::format_error "<context>: JSON at byte N: <what is wrong>" on any deviation from RFC 8259,
// on duplicate keys, on integers beyond 64 bits, on nesting deeper than options.max_depth and on arrays
// longer than options.max_array_items. Memory used is about 100 bytes per value (strings aside).
value parse(std::string_view text, std::string_view context, parse_options options = {});

}  // namespace tessel::io::json

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/json-inl.hpp"
#endif
