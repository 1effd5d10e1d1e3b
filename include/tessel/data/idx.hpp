#pragma once
// IDX files (the format of MNIST and Fashion-MNIST), raw or gzip-compressed, and the Fashion-MNIST set.
//
//   bytes 0-1   0x00 0x00
//   byte 2      element type: 0x08 u8, 0x09 s8, 0x0B s16, 0x0C s32, 0x0D f32, 0x0E f64
//   byte 3      rank
//   then        rank big-endian u32 dims, then the row-major big-endian elements, and nothing more
//
// Files are read through zlib's gz* API, which reads gzip and raw files alike. A file is accepted only
// whole: wrong magic, unknown type, fewer or more bytes than the dims describe, a damaged gzip stream
// (zlib checks its CRC) and dims whose data would exceed `max_bytes` (checked before allocating) are
// format_errors naming the file, what was expected and what was found. Bytes after the end of a gzip
// stream that do not start another gzip stream are ignored (zlib's rule).
//
//   auto any = tessel::data::read_idx("t10k-labels-idx1-ubyte.gz");        // idx_array: dims {10000}, u8
//   auto labels = tessel::data::read_idx<std::uint8_t, tessel::shape<10000>>("t10k-labels-idx1-ubyte.gz");
//   // labels: tensor<std::uint32_t, shape<10000>> (u8 widens to u32; pass a third argument for another dtype)

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/io/atomic_file.hpp"

namespace tessel::data {

// The error of every reader in tessel::data (the same type as tessel::io::format_error).
using format_error = io::format_error;

enum class idx_type : std::uint8_t { u8 = 0x08, s8 = 0x09, s16 = 0x0B, s32 = 0x0C, f32 = 0x0D, f64 = 0x0E };

// The C++ types of IDX elements.
template <class T>
concept IdxElement = std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t> ||
                     std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, float> ||
                     std::is_same_v<T, double>;

template <IdxElement T>
constexpr idx_type idx_type_of() {
  if constexpr (std::is_same_v<T, std::uint8_t>) return idx_type::u8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return idx_type::s8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return idx_type::s16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return idx_type::s32;
  else if constexpr (std::is_same_v<T, float>) return idx_type::f32;
  else return idx_type::f64;
}

// Element size in bytes; 0 for a byte that is not a known type.
constexpr std::size_t idx_type_size(std::uint8_t code) noexcept {
  switch (code) {
    case 0x08: case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C: case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
  }
}

// "u8", "s8", "s16", "s32", "f32", "f64"
constexpr std::string_view idx_type_short_name(idx_type t) noexcept {
  switch (t) {
    case idx_type::u8: return "u8";
    case idx_type::s8: return "s8";
    case idx_type::s16: return "s16";
    case idx_type::s32: return "s32";
    case idx_type::f32: return "f32";
    case idx_type::f64: return "f64";
  }
  return "?";
}

// "u8 (0x08)"
std::string idx_type_name(idx_type t);

// The dtype a typed read widens T to by default: u8 -> u32, s8/s16/s32 -> s32, f32/f64 -> f32 (f64 rounds).
template <IdxElement T>
using idx_default_dtype_t =
    std::conditional_t<std::is_same_v<T, std::uint8_t>, std::uint32_t,
                       std::conditional_t<std::is_integral_v<T>, std::int32_t, float>>;

// Readers refuse headers whose data would be larger, before allocating anything.
inline constexpr std::uint64_t idx_default_max_bytes = std::uint64_t{4} << 30;

// A file read without a static shape: element type, dims, and the elements in native byte order.
struct idx_array {
  idx_type type = idx_type::u8;
  std::vector<std::size_t> dims;
  std::variant<std::vector<std::uint8_t>, std::vector<std::int8_t>, std::vector<std::int16_t>,
               std::vector<std::int32_t>, std::vector<float>, std::vector<double>>
      values;

  // The number of elements (the product of dims).
  std::size_t size() const noexcept;

  // The elements as T. Throws std::invalid_argument if T is not the element type.
  template <IdxElement T>
  std::span<const T> data() const {
    if (const auto* v = std::get_if<std::vector<T>>(&values)) return *v;
    throw std::invalid_argument("tessel::data::idx_array::data<T>: the elements are " + idx_type_name(type) +
                                ", not " + idx_type_name(idx_type_of<T>()));
  }
};

namespace detail {
// The file's header and data, after checking that its element type is `type` and its dims are `dims`
// (a format_error naming the file, the expected type[dims] and what was found, before the data is read).
idx_array read_idx_expecting(const std::filesystem::path& path, std::uint64_t max_bytes, idx_type type,
                             std::span<const std::size_t> dims);
}  // namespace detail

// Reads an IDX file (gzip-compressed or raw) of any element type and shape.
// Throws format_error naming the file if it is missing or unreadable, has the wrong magic or an unknown
// element type, holds fewer or more bytes than its dims describe, has a damaged gzip stream, or claims
// more than `max_bytes` of data.
idx_array read_idx(const std::filesystem::path& path, std::uint64_t max_bytes = idx_default_max_bytes);

// Parses raw (not compressed) IDX bytes held in memory, as read_idx does; `name` appears in messages.
idx_array parse_idx(std::span<const std::byte> bytes, std::string_view name = "<memory>",
                    std::uint64_t max_bytes = idx_default_max_bytes);

// Reads an IDX file whose elements are FileT and whose dims are S, as a tensor<To, S>. The type and dims
// are checked before the data is read; a mismatch is a format_error that names the file, the expected
// u8[60000,28,28] and what was found. Elements convert as static_cast (to bf16 through float).
//   auto x = tessel::data::read_idx<std::uint8_t, tessel::shape<60000, 28, 28>, float>(path);
template <IdxElement FileT, Shape S, DType To = idx_default_dtype_t<FileT>>
tensor<To, S> read_idx(const std::filesystem::path& path, std::uint64_t max_bytes = idx_default_max_bytes) {
  const idx_array file = detail::read_idx_expecting(path, max_bytes, idx_type_of<FileT>(), S::dims);
  const std::span<const FileT> values = file.data<FileT>();
  tensor<To, S> t;
  for (std::size_t i = 0; i < S::size; ++i) {
    if constexpr (std::is_same_v<To, bfloat16>)
      t[i] = bfloat16(static_cast<float>(values[i]));
    else
      t[i] = static_cast<To>(values[i]);
  }
  return t;
}

// ---- Fashion-MNIST ------------------------------------------------------------------------------

inline constexpr std::string_view fashion_mnist_default_dir = "/usr/share/datasets/fashion-mnist";
inline constexpr std::size_t fashion_mnist_train_size = 60000;
inline constexpr std::size_t fashion_mnist_test_size = 10000;
inline constexpr std::size_t fashion_mnist_classes = 10;
inline constexpr std::array<std::string_view, 10> fashion_mnist_class_names = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

// $TESSEL_FASHION_MNIST_DIR if set and not empty, else fashion_mnist_default_dir (where Debian's
// dataset-fashion-mnist package puts the files).
std::filesystem::path fashion_mnist_dir();

// The four files, as u8 idx_arrays: images [N,28,28], labels [N] with values 0..9.
struct fashion_mnist {
  idx_array train_images, train_labels, test_images, test_labels;
};

// Reads train-{images-idx3,labels-idx1}-ubyte[.gz] and t10k-... from `dir` and checks that images are
// u8 [N,28,28], labels u8 [N] for the same N, and every label below 10. Throws format_error naming the
// file at fault, as read_idx does.
fashion_mnist load_fashion_mnist(const std::filesystem::path& dir = fashion_mnist_dir());

}  // namespace tessel::data

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/data/idx-inl.hpp"
#endif
