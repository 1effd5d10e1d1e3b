// Definitions of tessel/io/npy.hpp's functions: compiled once, in the tessel library (src/tessel.cpp),
// or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before including
// tessel/tessel.hpp.
#pragma once

#include "tessel/io/npy.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/io/atomic_file.hpp"

namespace tessel::io {

std::size_t npy_item_size(std::string_view descr) noexcept {
  if (descr == "<f4" || descr == "<i4" || descr == "<u4") return 4;
  if (descr == "<u2") return 2;
  if (descr == "|b1" || descr == "|u1") return 1;
  return 0;
}

namespace detail {

std::string npy_preamble(std::string_view descr, std::span<const std::size_t> dims) {
  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + npy_shape_text<std::size_t>(dims) + ", }";
  // 10 bytes of magic, version and length come first; the data must start at a multiple of 64.
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 0xFFFF)  // version 1.0 stores the length in 2 bytes; only ranks in the thousands get here
    throw std::invalid_argument("tessel::io::write_npy: the header of a rank-" + std::to_string(dims.size()) +
                                " array does not fit the 65535 bytes of .npy version 1.0");
  std::string out(npy_magic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

// The header dict, in the subset NumPy writes: the keys descr, fortran_order and shape once each.
class npy_header_parser {
 public:
  npy_header_parser(std::string_view text, const std::string& prefix) : s_(text), prefix_(prefix) {}

  npy_array parse() {
    npy_array out;
    bool have_descr = false, have_order = false, have_shape = false;
    space();
    expect('{');
    for (;;) {
      space();
      if (peek() == '}') break;
      const std::string key = quoted();
      space();
      expect(':');
      space();
      if (key == "descr" && !have_descr) {
        out.descr = quoted();
        have_descr = true;
      } else if (key == "fortran_order" && !have_order) {
        if (s_.substr(pos_, 5) == "False") {
          pos_ += 5;
        } else if (s_.substr(pos_, 4) == "True") {
          fail("'fortran_order': True (column-major data) is not supported; save the array in C order");
        } else {
          fail("'fortran_order' must be True or False");
        }
        have_order = true;
      } else if (key == "shape" && !have_shape) {
        out.shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected or repeated key '" + key + "' (expected descr, fortran_order and shape)");
      }
      space();
      if (peek() != ',') break;
      ++pos_;
    }
    space();
    expect('}');
    if (!have_descr || !have_order || !have_shape) fail("the header needs the keys descr, fortran_order and shape");
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
    if (pos_ + 1 != s_.size() || s_[pos_] != '\n') fail("the header must end with spaces and a newline");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw format_error(prefix_ + "header byte " + std::to_string(pos_) + ": " + what);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void space() {
    while (peek() == ' ') ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted() {
    expect('\'');
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != '\'') {
      const char c = s_[pos_];
      if (c == '\\' || c < ' ' || c > '~') fail("unsupported character in a string");
      ++pos_;
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return std::string(s_.substr(start, pos_ - 1 - start));
  }
  std::vector<std::uint64_t> tuple() {
    std::vector<std::uint64_t> dims;
    expect('(');
    space();
    bool trailing_comma = false;
    while (peek() != ')') {
      if (peek() < '0' || peek() > '9') fail("expected a non-negative integer in the shape");
      if (peek() == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
        fail("integer with a leading zero in the shape");
      std::uint64_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        const auto digit = static_cast<std::uint64_t>(peek() - '0');
        if (d > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) fail("dimension out of range");
        d = d * 10 + digit;
        ++pos_;
      }
      if (dims.size() == 64) fail("more than 64 dimensions");
      dims.push_back(d);
      space();
      trailing_comma = peek() == ',';
      if (!trailing_comma) break;
      ++pos_;
      space();
    }
    expect(')');
    if (dims.size() == 1 && !trailing_comma) fail("a one-element shape is written (n,)");
    return dims;
  }

  std::string_view s_;
  const std::string& prefix_;
  std::size_t pos_ = 0;
};

[[noreturn]] void npy_fail(const std::string& prefix, const std::string& what) { throw format_error(prefix + what); }

// Parses the preamble of `bytes` (the whole file) and returns the array with its data.
npy_array parse_npy_bytes(std::span<const std::byte> bytes, const std::string& prefix) {
  const auto byte = [&](std::size_t i) { return std::size_t{static_cast<unsigned char>(bytes[i])}; };
  if (bytes.size() < 10)
    npy_fail(prefix, "truncated: an .npy file starts with 10 bytes of magic, version and header length, found " +
                         std::to_string(bytes.size()));
  if (std::memcmp(bytes.data(), npy_magic, 6) != 0) npy_fail(prefix, "not an .npy file: the magic \\x93NUMPY is missing");
  const std::size_t major = byte(6), minor = byte(7);
  std::size_t header_len = byte(8) | byte(9) << 8, header_at = 10;
  if (major == 2 && minor == 0) {
    if (bytes.size() < 12) npy_fail(prefix, "truncated: a version 2.0 header length takes 4 bytes");
    header_len |= byte(10) << 16 | byte(11) << 24;
    header_at = 12;
  } else if (major != 1 || minor != 0) {
    npy_fail(prefix, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                         " (expected 1.0 or 2.0)");
  }
  if (header_len > bytes.size() - header_at)
    npy_fail(prefix, "truncated: the header length is " + std::to_string(header_len) + " bytes, but only " +
                         std::to_string(bytes.size() - header_at) + " follow");
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + header_at), header_len);
  npy_array out = npy_header_parser(header, prefix).parse();
  const std::size_t item = npy_item_size(out.descr);
  if (item == 0)
    npy_fail(prefix, "unsupported descr '" + out.descr + "' (expected '<f4', '<u2', '<i4', '<u4', '|b1' or '|u1')");
  const bool empty = std::find(out.shape.begin(), out.shape.end(), std::uint64_t{0}) != out.shape.end();
  std::uint64_t need = empty ? 0 : item;
  bool overflow = false;
  for (const std::uint64_t d : out.shape) {
    if (empty) break;
    if (need > std::numeric_limits<std::uint64_t>::max() / d) overflow = true;
    need *= d;
  }
  const std::uint64_t have = bytes.size() - header_at - header_len;
  if (overflow || need != have)
    npy_fail(prefix, std::string(overflow || need > have ? "truncated" : "trailing data") + ": shape " +
                         npy_shape_text<std::uint64_t>(out.shape) + " of '" + out.descr + "' needs " +
                         (overflow ? std::string("more than 2^64") : std::to_string(need)) + " bytes of data, found " +
                         std::to_string(have));
  out.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header_at + header_len), bytes.end());
  if (out.descr == "|b1")
    for (std::size_t i = 0; i < out.bytes.size(); ++i)
      if (out.bytes[i] != std::byte{0} && out.bytes[i] != std::byte{1})
        npy_fail(prefix, "bool element " + std::to_string(i) + " is byte " +
                             std::to_string(static_cast<unsigned>(out.bytes[i])) + ", expected 0 or 1");
  return out;
}

}  // namespace detail

npy_array parse_npy(std::span<const std::byte> bytes, std::string_view source) {
  return detail::parse_npy_bytes(bytes, "tessel::io::parse_npy: '" + std::string(source) + "': ");
}

npy_array read_npy(const std::filesystem::path& path) {
  input_file in(path, "tessel::io::read_npy");
  if (in.size() > std::numeric_limits<std::size_t>::max()) in.fail("file too large");
  std::vector<std::byte> bytes(static_cast<std::size_t>(in.size()));
  in.read_exact(bytes, "the file");
  return detail::parse_npy_bytes(bytes, in.prefix());
}

}  // namespace tessel::io
