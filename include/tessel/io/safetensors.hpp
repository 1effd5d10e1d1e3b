#pragma once
// safetensors (huggingface/safetensors): read and write checkpoints in the format's exact layout.
//
//   8 bytes      N, the header length, unsigned little-endian
//   N bytes      UTF-8 JSON: {"__metadata__": {"k": "v"},
//                             "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
//   the rest     the data buffer; offsets are relative to its start, row-major, little-endian
//
// Reading is strict, as the format's own reader is, because checkpoints come from elsewhere: N at most
// 100'000'000, the header a JSON object starting with '{' (json.hpp: no duplicate keys, nesting at most 3
// deep), known dtypes, every shape's byte size equal to its offsets' span, the tensors contiguous,
// non-overlapping and covering the buffer exactly, BOOL bytes 0 or 1. Any violation is a format_error
// naming the file and the tensor. Writing pads the header with spaces to a multiple of 8 bytes (so the
// buffer is 8-byte aligned) and is atomic (atomic_file.hpp).
//
//   tessel::io::safetensors_file f;
//   f.put("layer1.w", w);                                    // w: tensor<float, shape<2, 3>>
//   f.metadata["format"] = "tessel";
//   tessel::io::write_safetensors("model.safetensors", f);
//   auto back = tessel::io::read_safetensors("model.safetensors");
//   auto w2 = tessel::io::get<float, tessel::shape<2, 3>>(back, "layer1.w");

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/io/atomic_file.hpp"

namespace tessel::io {

static_assert(std::endian::native == std::endian::little,
              "tessel/io/safetensors.hpp: safetensors data is little-endian and tessel copies it byte for byte; "
              "a big-endian target would need byte swapping, which is not implemented");

// Readers refuse longer headers (the limit of the format's reference reader): a hostile length must not
// make us allocate or parse gigabytes.
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

// A safetensors dtype: its name in the header, its element size, and tessel's name for it where there is one.
struct safetensors_dtype {
  std::string_view name;
  std::size_t size;
  std::string_view tessel_name;
};

// The byte-sized dtypes of the format. The low-level API reads and writes any of them; get/put know
// F32, BF16, I32, U32 and BOOL (tessel's dtypes).
inline constexpr safetensors_dtype safetensors_dtypes[] = {
    {"F32", 4, "f32"}, {"BF16", 2, "bf16"}, {"I32", 4, "s32"}, {"U32", 4, "u32"}, {"BOOL", 1, "pred"},
    {"U8", 1, "u8"},   {"I8", 1, "s8"},     {"I16", 2, "s16"}, {"U16", 2, "u16"}, {"F16", 2, "f16"},
    {"I64", 8, "s64"}, {"U64", 8, "u64"},   {"F64", 8, "f64"}, {"F8_E5M2", 1, "f8e5m2"}, {"F8_E4M3", 1, "f8e4m3fn"},
};

// The table entry named `name`, or null.
const safetensors_dtype* find_safetensors_dtype(std::string_view name) noexcept;

// "F32" for float, "BF16", "I32", "U32", "BOOL".
template <DType T>
constexpr std::string_view safetensors_dtype_of() {
  if constexpr (std::is_same_v<T, float>) {
    return "F32";
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return "BF16";
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return "I32";
  } else if constexpr (std::is_same_v<T, std::uint32_t>) {
    return "U32";
  } else {
    static_assert(std::is_same_v<T, bool>);
    return "BOOL";
  }
}

// One tensor: its name, dtype name ("F32"), dims and row-major little-endian bytes.
struct safetensors_entry {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
};

// A whole file. Read files list their tensors in the order of their data; written files store them in
// this order.
struct safetensors_file {
  std::vector<safetensors_entry> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__": text to text; not written when empty
  std::string source = "<memory>";              // where it was read from, for messages

  // The tensor named `name`, or null.
  const safetensors_entry* find(std::string_view name) const noexcept;

  // Appends a copy of `t` as tensor `name`. Throws std::invalid_argument if the name is taken.
  template <class T, class S>
  void put(std::string name, const tensor<T, S>& t) {
    static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 2 || sizeof(T) == 1));
    if (find(name))
      throw std::invalid_argument("tessel::io::safetensors_file::put: a tensor named '" + name + "' exists already");
    safetensors_entry e{std::move(name), std::string(safetensors_dtype_of<T>()), {}, {}};
    e.shape.assign(S::dims.begin(), S::dims.end());
    e.bytes.resize(S::size * sizeof(T));
    if (S::size != 0) std::memcpy(e.bytes.data(), t.data(), e.bytes.size());
    tensors.push_back(std::move(e));
  }
};

namespace detail {

template <class A, class B>
bool same_dims(const A& a, const B& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// Throws format_error naming the tensor if `e` is BOOL and holds a byte other than 0 and 1.
void check_bool_bytes(const safetensors_entry& e, const std::string& prefix);

}  // namespace detail

// Parses a whole safetensors file held in memory. `source` names it in messages.
// Throws format_error on anything the format forbids (see the top of this header).
safetensors_file parse_safetensors(std::span<const std::byte> bytes, std::string_view source = "<memory>");

// Reads a safetensors file. Memory used is bounded by the file's size: every length in the header is
// checked against it before anything is allocated. Throws format_error naming the file on a missing,
// unreadable, truncated or malformed file.
safetensors_file read_safetensors(const std::filesystem::path& path);

// The bytes of `file` in safetensors layout. Throws std::invalid_argument if the file cannot be written
// as it is: a tensor's bytes do not match its dtype and shape, an unknown dtype, duplicate or invalid
// UTF-8 names, the name "__metadata__", BOOL bytes other than 0 and 1.
std::vector<std::byte> serialize_safetensors(const safetensors_file& file);

// Writes `file` to `path` atomically (write_file_atomically): on any error the previous file at `path`
// is left intact. Throws std::invalid_argument as serialize_safetensors does (before touching the disk),
// and std::system_error on the operating system's errors.
void write_safetensors(const std::filesystem::path& path, const safetensors_file& file);

// The tensor `name` of `file` as a tensor<T, S>. Throws format_error naming the file and the tensor if
// there is no such tensor, or if its dtype or shape differ:
//   "tessel::io::get: 'model.safetensors': tensor 'layer1.w': expected f32[2,3], found bf16[3,2] (BF16 [3,2])"
template <class T, class S>
tensor<T, S> get(const safetensors_file& file, std::string_view name) {
  const std::string prefix = "tessel::io::get: '" + file.source + "': ";
  const safetensors_entry* e = file.find(name);
  if (!e) {
    std::string names;
    for (std::size_t i = 0; i < file.tensors.size() && i < 8; ++i) {
      names += i ? ", '" : "'";
      names += file.tensors[i].name;
      names += '\'';
    }
    if (file.tensors.size() > 8) names += ", ...";
    throw format_error(prefix + "no tensor named '" + std::string(name) + "'; the file holds " +
                       std::to_string(file.tensors.size()) + " tensors" + (names.empty() ? "" : ": " + names));
  }
  if (e->dtype != safetensors_dtype_of<T>() || !detail::same_dims(e->shape, S::dims)) {
    const safetensors_dtype* info = find_safetensors_dtype(e->dtype);
    const std::string found_dims = dims_text(e->shape);
    throw format_error(prefix + "tensor '" + e->name + "': expected " +
                       std::string(describe<tensor_type<T, S>>().view()) + ", found " +
                       std::string(info ? info->tessel_name : std::string_view(e->dtype)) + found_dims + " (" + e->dtype +
                       " " + found_dims + ")");
  }
  tensor<T, S> t;
  if (!e->bytes.empty()) {
    if constexpr (std::is_same_v<T, bool>) detail::check_bool_bytes(*e, prefix);
    std::memcpy(t.data(), e->bytes.data(), e->bytes.size());
  }
  return t;
}

}  // namespace tessel::io

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/safetensors-inl.hpp"
#endif
