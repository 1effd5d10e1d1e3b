#pragma once
// NumPy .npy export of one tensor (format version 1.0), and a reader for the same subset.
//
//   "\x93NUMPY" 0x01 0x00, header length (2 bytes, little-endian), then the header
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   padded with spaces and ended by '\n'
//   so that the data starts at a multiple of 64 bytes; then the row-major little-endian data.
//
// dtypes: f32 '<f4', s32 '<i4', u32 '<u4', pred '|b1'. NumPy has no bfloat16, so bf16 is saved as '<u2',
// its raw 16 bits (in Python: `np.load(f).view(ml_dtypes.bfloat16)`, or
// `(a.astype(np.uint32) << 16).view(np.float32)`); reading '<u2' into a bf16 tensor takes the bits back.
// Saving bf16 as bits rather than refusing it keeps every tensor exportable; the cost is that the file
// does not say it holds bf16 (the caller knows).
//
//   tessel::io::write_npy("w.npy", w);                                    // atomic, see atomic_file.hpp
//   auto w2 = tessel::io::read_npy<float, tessel::shape<2, 3>>("w.npy");

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/io/atomic_file.hpp"

namespace tessel::io {

static_assert(std::endian::native == std::endian::little,
              "tessel/io/npy.hpp: tessel writes '<' (little-endian) .npy data byte for byte; a big-endian target "
              "would need byte swapping, which is not implemented");

// The descr tessel writes for T: "<f4", "<u2" (bf16 bits), "<i4", "<u4", "|b1".
template <DType T>
constexpr std::string_view npy_descr_of() {
  if constexpr (std::is_same_v<T, float>) {
    return "<f4";
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return "<u2";
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return "<i4";
  } else if constexpr (std::is_same_v<T, std::uint32_t>) {
    return "<u4";
  } else {
    static_assert(std::is_same_v<T, bool>);
    return "|b1";
  }
}

// The element size of a descr the reader accepts ('<f4' '<u2' '<i4' '<u4' '|b1' '|u1'), or 0.
std::size_t npy_item_size(std::string_view descr) noexcept;

// One array as read: its descr, its dims and its row-major little-endian bytes.
struct npy_array {
  std::string descr;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
};

namespace detail {

inline constexpr char npy_magic[] = "\x93NUMPY";

// "(2, 3)", "(3,)", "()": Python's tuple notation, as NumPy writes it.
template <class Int>
std::string npy_shape_text(std::span<const Int> dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

// The magic, version, length and padded header dict of a version 1.0 file of `descr` and `dims`.
// Throws std::invalid_argument if the header does not fit 65535 bytes.
std::string npy_preamble(std::string_view descr, std::span<const std::size_t> dims);

template <class T, class S>
tensor<T, S> npy_to_tensor(const npy_array& a, const std::string& prefix) {
  bool same_dims = a.shape.size() == S::rank;
  for (std::size_t i = 0; same_dims && i < S::rank; ++i) same_dims = a.shape[i] == S::dims[i];
  if (a.descr != npy_descr_of<T>() || !same_dims) {
    const std::string found = "'" + a.descr + "' " + npy_shape_text<std::uint64_t>(a.shape);
    throw format_error(prefix + "expected " + std::string(describe<tensor_type<T, S>>().view()) + " ('" +
                       std::string(npy_descr_of<T>()) + "' " + npy_shape_text<std::size_t>(S::dims) + "), found " + found);
  }
  tensor<T, S> t;
  if (!a.bytes.empty()) std::memcpy(t.data(), a.bytes.data(), a.bytes.size());
  return t;
}

}  // namespace detail

// The .npy bytes of `t` (version 1.0; bf16 as '<u2' bits).
template <class T, class S>
std::vector<std::byte> serialize_npy(const tensor<T, S>& t) {
  const std::string pre = detail::npy_preamble(npy_descr_of<T>(), S::dims);
  std::vector<std::byte> out(pre.size() + S::size * sizeof(T));
  std::memcpy(out.data(), pre.data(), pre.size());
  if (S::size != 0) std::memcpy(out.data() + pre.size(), t.data(), S::size * sizeof(T));
  return out;
}

// Writes `t` to `path` as .npy, atomically (write_file_atomically): on any error the previous file is
// left intact and std::system_error propagates.
template <class T, class S>
void write_npy(const std::filesystem::path& path, const tensor<T, S>& t) {
  const std::string pre = detail::npy_preamble(npy_descr_of<T>(), S::dims);
  write_file_atomically(path, [&](output_file& out) {
    out.write(pre);
    out.write(std::as_bytes(std::span<const T>(t.data(), S::size)));
  });
}

// Parses .npy bytes (versions 1.0 and 2.0; descr '<f4' '<u2' '<i4' '<u4' '|b1' '|u1'; C order only).
// Throws format_error naming `source` on anything else, on truncated data and on trailing bytes.
npy_array parse_npy(std::span<const std::byte> bytes, std::string_view source = "<memory>");

// Reads an .npy file as parse_npy does (the whole file is read: .npy has no internal lengths to lie about
// beyond the header's, which are checked against the file's size).
npy_array read_npy(const std::filesystem::path& path);

// Reads an .npy file into a tensor<T, S>; the file's descr must be npy_descr_of<T>() and its shape S.
// Throws format_error naming the file, the expected f32[2,3] and what was found.
template <class T, class S>
tensor<T, S> read_npy(const std::filesystem::path& path) {
  return detail::npy_to_tensor<T, S>(read_npy(path), "tessel::io::read_npy: " + quoted(path) + ": ");
}

}  // namespace tessel::io

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/npy-inl.hpp"
#endif
