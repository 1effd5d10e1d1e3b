// Definitions of tessel/io/safetensors.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include "tessel/io/safetensors.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessel/io/atomic_file.hpp"
#include "tessel/io/json.hpp"

namespace tessel::io {

const safetensors_entry* safetensors_file::find(std::string_view name) const noexcept {
  for (const safetensors_entry& e : tensors)
    if (e.name == name) return &e;
  return nullptr;
}

const safetensors_dtype* find_safetensors_dtype(std::string_view name) noexcept {
  for (const safetensors_dtype& d : safetensors_dtypes)
    if (d.name == name) return &d;
  return nullptr;
}

namespace detail {

// The byte size of `shape` of `dtype`, or false if it does not fit in 64 bits.
bool byte_size(const safetensors_dtype& dtype, std::span<const std::uint64_t> shape, std::uint64_t& out) {
  out = 0;
  if (std::find(shape.begin(), shape.end(), std::uint64_t{0}) != shape.end()) return true;
  std::uint64_t n = dtype.size;
  for (const std::uint64_t d : shape) {
    if (n > std::numeric_limits<std::uint64_t>::max() / d) return false;
    n *= d;
  }
  out = n;
  return true;
}

[[noreturn]] void fail(const std::string& prefix, const std::string& what) { throw format_error(prefix + what); }

std::uint64_t load_le64(const std::byte* p) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;  // safetensors.hpp's static_assert guarantees a little-endian target
}

struct safetensors_layout {
  std::vector<safetensors_entry> entries;  // sorted by offset; bytes still empty
  std::vector<std::uint64_t> begins;       // each entry's offset in the buffer
  std::map<std::string, std::string> metadata;
};

// Checks the header text against the format and a data buffer of `buffer_size` bytes. `prefix` starts
// every message ("who: 'path': ").
safetensors_layout parse_safetensors_header(std::string_view header, std::uint64_t buffer_size,
                                            const std::string& prefix) {
  if (header.empty() || header.front() != '{')
    fail(prefix, "the header must be a JSON object starting with '{', found " +
         (header.empty() ? std::string("an empty header") : "byte " + std::to_string(static_cast<unsigned char>(header[0]))));
  // Depth 3 is all the format needs ({"name": {"shape": [..]}}); ranks above 1024 are not real tensors,
  // and refusing them bounds the memory a hostile header can make the parser use (about 20 times its size).
  const json::value root = json::parse(header, prefix + "header", {.max_depth = 3, .max_array_items = 1024});

  safetensors_layout out;
  std::vector<std::uint64_t> ends;
  for (const json::member& m : root.members) {
    if (m.key == "__metadata__") {
      if (m.val.type != json::kind::object)
        fail(prefix, "\"__metadata__\" must be an object of strings, found " + std::string(json::kind_name(m.val.type)));
      for (const json::member& kv : m.val.members) {
        if (kv.val.type != json::kind::string)
          fail(prefix, "\"__metadata__\" value of \"" + kv.key + "\" must be a string, found " +
               std::string(json::kind_name(kv.val.type)));
        out.metadata.emplace(kv.key, kv.val.text);
      }
      continue;
    }
    const std::string what = "tensor '" + m.key + "': ";
    if (m.val.type != json::kind::object)
      fail(prefix, what + "expected an object with dtype, shape and data_offsets, found " + std::string(json::kind_name(m.val.type)));
    for (const json::member& field : m.val.members)
      if (field.key != "dtype" && field.key != "shape" && field.key != "data_offsets")
        fail(prefix, what + "unknown field \"" + field.key + "\" (expected dtype, shape and data_offsets)");
    const json::value* dtype = m.val.find("dtype");
    const json::value* shape = m.val.find("shape");
    const json::value* offsets = m.val.find("data_offsets");
    if (!dtype || !shape || !offsets) fail(prefix, what + "missing field (expected dtype, shape and data_offsets)");
    if (dtype->type != json::kind::string) fail(prefix, what + "dtype must be a string, found " + std::string(json::kind_name(dtype->type)));
    const safetensors_dtype* info = find_safetensors_dtype(dtype->text);
    if (!info) fail(prefix, what + "unsupported dtype \"" + dtype->text + "\"");
    if (shape->type != json::kind::array) fail(prefix, what + "shape must be an array, found " + std::string(json::kind_name(shape->type)));
    safetensors_entry e{m.key, dtype->text, {}, {}};
    for (const json::value& d : shape->items) {
      if (!d.integer) fail(prefix, what + "shape holds " + (d.type == json::kind::number ? d.text : std::string(json::kind_name(d.type))) +
                           ", expected non-negative integers");
      e.shape.push_back(*d.integer);
    }
    if (offsets->type != json::kind::array || offsets->items.size() != 2 || !offsets->items[0].integer ||
        !offsets->items[1].integer)
      fail(prefix, what + "data_offsets must be [begin, end] with non-negative integers");
    const std::uint64_t begin = *offsets->items[0].integer, end = *offsets->items[1].integer;
    if (begin > end) fail(prefix, what + "data_offsets [" + std::to_string(begin) + "," + std::to_string(end) + "] end before they begin");
    std::uint64_t bytes = 0;
    if (!byte_size(*info, e.shape, bytes))
      fail(prefix, what + "shape " + dims_text(e.shape) + " of " + e.dtype + " needs more than 2^64 bytes");
    if (bytes != end - begin)
      fail(prefix, what + "shape " + dims_text(e.shape) + " of " + e.dtype + " needs " + std::to_string(bytes) +
           " bytes, but data_offsets [" + std::to_string(begin) + "," + std::to_string(end) + "] hold " +
           std::to_string(end - begin));
    out.entries.push_back(std::move(e));
    out.begins.push_back(begin);
    ends.push_back(end);
  }

  // The format's rule: the tensors, in offset order, tile the buffer with no gap and no overlap.
  std::vector<std::size_t> order(out.entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return out.begins[a] != out.begins[b] ? out.begins[a] < out.begins[b] : ends[a] < ends[b];
  });
  std::uint64_t covered = 0;
  std::string previous;
  for (const std::size_t i : order) {
    const std::string& name = out.entries[i].name;
    if (out.begins[i] < covered)
      fail(prefix, "tensor '" + name + "': data_offsets begin at " + std::to_string(out.begins[i]) + ", inside tensor '" +
           previous + "' (which ends at " + std::to_string(covered) + "); tensors must not overlap");
    if (out.begins[i] > covered)
      fail(prefix, "tensor '" + name + "': data_offsets begin at " + std::to_string(out.begins[i]) + ", leaving bytes " +
           std::to_string(covered) + " to " + std::to_string(out.begins[i]) + " of the buffer unused; tensors must be contiguous");
    covered = ends[i];
    previous = name;
  }
  if (covered != buffer_size)
    fail(prefix, "the tensors cover " + std::to_string(covered) + " bytes, but the data buffer after the header holds " +
         std::to_string(buffer_size) + (covered < buffer_size ? " (trailing bytes)" : " (truncated file)"));

  safetensors_layout sorted;
  sorted.metadata = std::move(out.metadata);
  for (const std::size_t i : order) {
    sorted.entries.push_back(std::move(out.entries[i]));
    sorted.begins.push_back(out.begins[i]);
  }
  return sorted;
}

void check_bool_bytes(const safetensors_entry& e, const std::string& prefix) {
  if (e.dtype != "BOOL") return;
  for (std::size_t i = 0; i < e.bytes.size(); ++i)
    if (e.bytes[i] != std::byte{0} && e.bytes[i] != std::byte{1})
      throw format_error(prefix + "tensor '" + e.name + "': BOOL element " + std::to_string(i) + " is byte " +
                         std::to_string(static_cast<unsigned>(e.bytes[i])) + ", expected 0 or 1");
}

std::uint64_t check_header_length(std::uint64_t total, const std::string& prefix) {
  if (total < 8)
    throw format_error(prefix + "truncated: a safetensors file starts with an 8-byte header length, found " +
                       std::to_string(total) + " bytes");
  return total - 8;
}

void check_header_fits(std::uint64_t n, std::uint64_t after_length, const std::string& prefix) {
  if (n > safetensors_max_header_bytes)
    throw format_error(prefix + "header length " + std::to_string(n) + " is more than the limit of " +
                       std::to_string(safetensors_max_header_bytes) + " bytes (a corrupted or hostile file)");
  if (n > after_length)
    throw format_error(prefix + "truncated: the header length is " + std::to_string(n) + " bytes, but only " +
                       std::to_string(after_length) + " bytes follow it");
}

[[noreturn]] void invalid(const std::string& who, const std::string& what) {
  throw std::invalid_argument(who + ": " + what);
}

// The padded header text for `file`; checks everything a reader would reject.
std::string safetensors_header(const safetensors_file& file, const std::string& who) {
  std::string h = "{";
  if (!file.metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : file.metadata) {
      if (!json::valid_utf8(k) || !json::valid_utf8(v)) invalid(who, "metadata \"" + k + "\": text is not valid UTF-8");
      if (!first) h += ',';
      json::write_string(h, k);
      h += ':';
      json::write_string(h, v);
      first = false;
    }
    h += "}";
  }
  std::vector<std::string_view> names;
  std::uint64_t offset = 0;
  for (const safetensors_entry& e : file.tensors) {
    const std::string what = "tensor '" + e.name + "': ";
    if (e.name == "__metadata__") invalid(who, what + "the name is reserved for metadata");
    if (!json::valid_utf8(e.name)) invalid(who, what + "the name is not valid UTF-8");
    const safetensors_dtype* info = find_safetensors_dtype(e.dtype);
    if (!info) invalid(who, what + "unsupported dtype \"" + e.dtype + "\"");
    std::uint64_t bytes = 0;
    if (!byte_size(*info, e.shape, bytes) || bytes != e.bytes.size())
      invalid(who, what + "shape " + dims_text(e.shape) + " of " + e.dtype + " does not match its " +
          std::to_string(e.bytes.size()) + " bytes");
    if (e.dtype == "BOOL")
      for (std::size_t i = 0; i < e.bytes.size(); ++i)
        if (e.bytes[i] != std::byte{0} && e.bytes[i] != std::byte{1})
          invalid(who, what + "BOOL element " + std::to_string(i) + " is byte " +
                           std::to_string(static_cast<unsigned>(e.bytes[i])) + ", expected 0 or 1");
    names.push_back(e.name);
    if (h.size() > 1) h += ',';
    json::write_string(h, e.name);
    h += ":{\"dtype\":\"" + e.dtype + "\",\"shape\":" + dims_text(e.shape) + ",\"data_offsets\":[" +
         std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  std::sort(names.begin(), names.end());
  if (const auto dup = std::adjacent_find(names.begin(), names.end()); dup != names.end())
    invalid(who, "two tensors are named '" + std::string(*dup) + "'");
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  if (h.size() > safetensors_max_header_bytes)
    invalid(who, "the header would be " + std::to_string(h.size()) + " bytes, more than readers accept (" +
        std::to_string(safetensors_max_header_bytes) + ")");
  return h;
}

template <class Sink>
void write_safetensors_to(Sink& sink, const std::string& header, const safetensors_file& file) {
  const std::uint64_t n = header.size();
  std::byte length[8];
  std::memcpy(length, &n, 8);
  sink.write(std::span<const std::byte>(length, 8));
  sink.write(std::as_bytes(std::span(header.data(), header.size())));
  for (const safetensors_entry& e : file.tensors) sink.write(std::span<const std::byte>(e.bytes));
}

struct vector_sink {
  std::vector<std::byte>& out;
  void write(std::span<const std::byte> bytes) {
    const std::size_t at = out.size();
    out.resize(at + bytes.size());
    if (!bytes.empty()) std::memcpy(out.data() + at, bytes.data(), bytes.size());
  }
};

}  // namespace detail

safetensors_file parse_safetensors(std::span<const std::byte> bytes, std::string_view source) {
  const std::string prefix = "tessel::io::parse_safetensors: '" + std::string(source) + "': ";
  const std::uint64_t after_length = detail::check_header_length(bytes.size(), prefix);
  const std::uint64_t n = detail::load_le64(bytes.data());
  detail::check_header_fits(n, after_length, prefix);
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<std::size_t>(n));
  detail::safetensors_layout layout = detail::parse_safetensors_header(header, after_length - n, prefix);
  safetensors_file file;
  file.source = std::string(source);
  file.metadata = std::move(layout.metadata);
  const std::byte* buffer = bytes.data() + 8 + n;
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    safetensors_entry& e = layout.entries[i];
    std::uint64_t size = 0;
    detail::byte_size(*find_safetensors_dtype(e.dtype), e.shape, size);
    e.bytes.assign(buffer + layout.begins[i], buffer + layout.begins[i] + size);
    detail::check_bool_bytes(e, prefix);
    file.tensors.push_back(std::move(e));
  }
  return file;
}

safetensors_file read_safetensors(const std::filesystem::path& path) {
  input_file in(path, "tessel::io::read_safetensors");
  const std::string& prefix = in.prefix();
  const std::uint64_t after_length = detail::check_header_length(in.size(), prefix);
  std::byte length[8];
  in.read_exact(length, "header length");
  const std::uint64_t n = detail::load_le64(length);
  detail::check_header_fits(n, after_length, prefix);
  std::string header(static_cast<std::size_t>(n), '\0');
  in.read_exact(std::as_writable_bytes(std::span(header.data(), header.size())), "header");
  detail::safetensors_layout layout = detail::parse_safetensors_header(header, after_length - n, prefix);
  safetensors_file file;
  file.source = path.string();
  file.metadata = std::move(layout.metadata);
  // Contiguous and in offset order: the data is read front to back.
  for (safetensors_entry& e : layout.entries) {
    std::uint64_t size = 0;
    detail::byte_size(*find_safetensors_dtype(e.dtype), e.shape, size);
    e.bytes.resize(static_cast<std::size_t>(size));
    in.read_exact(e.bytes, "data of tensor '" + e.name + "'");
    detail::check_bool_bytes(e, prefix);
    file.tensors.push_back(std::move(e));
  }
  return file;
}

std::vector<std::byte> serialize_safetensors(const safetensors_file& file) {
  const std::string header = detail::safetensors_header(file, "tessel::io::serialize_safetensors");
  std::vector<std::byte> out;
  detail::vector_sink sink{out};
  detail::write_safetensors_to(sink, header, file);
  return out;
}

void write_safetensors(const std::filesystem::path& path, const safetensors_file& file) {
  const std::string header = detail::safetensors_header(file, "tessel::io::write_safetensors: " + quoted(path));
  write_file_atomically(path, [&](output_file& out) { detail::write_safetensors_to(out, header, file); });
}

}  // namespace tessel::io
