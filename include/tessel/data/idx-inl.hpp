// Definitions of tessel/data/idx.hpp's functions: compiled once, in the tessel library (src/tessel.cpp),
// or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before including
// tessel/tessel.hpp.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

#include "tessel/data/idx.hpp"

namespace tessel::data {

std::string idx_type_name(idx_type t) {
  static constexpr char hex[] = "0123456789ABCDEF";
  const auto code = static_cast<unsigned>(t);
  return std::string(idx_type_short_name(t)) + " (0x" + hex[code >> 4] + hex[code & 15] + ")";
}

std::size_t idx_array::size() const noexcept {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

namespace detail {

// Where the bytes come from: a gzip-or-raw file, or memory.
class idx_source {
 public:
  explicit idx_source(std::string prefix) : prefix_(std::move(prefix)) {}
  virtual ~idx_source() = default;
  idx_source(const idx_source&) = delete;
  idx_source& operator=(const idx_source&) = delete;

  // Reads up to n bytes; fewer only at the end. Throws format_error if the stream is damaged.
  virtual std::size_t read(void* out, std::size_t n) = 0;

  [[noreturn]] void fail(const std::string& what) const { throw format_error(prefix_ + what); }

 private:
  std::string prefix_;
};

class gz_source final : public idx_source {
 public:
  gz_source(const std::filesystem::path& path, std::string prefix) : idx_source(std::move(prefix)) {
    // zlib's messages for a missing file or a directory are vague: say it first.
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status))
      fail("cannot open: " + (ec ? ec.message() : std::string("No such file or directory")));
    if (!std::filesystem::is_regular_file(status)) fail("cannot open: not a regular file");
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) fail("cannot open: " + std::string(errno ? std::strerror(errno) : "out of memory"));
    gzbuffer(file_, 1u << 17);  // fewer system calls than the default 8 KiB
  }
  ~gz_source() override { gzclose(file_); }

  std::size_t read(void* out, std::size_t n) override {
    std::size_t done = 0;
    while (done < n) {
      const auto want = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));  // gzread takes an int's range
      const int got = gzread(file_, static_cast<char*>(out) + done, want);
      if (got < 0 || (got == 0 && error_code() != Z_OK)) damaged();
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    return done;
  }

 private:
  int error_code() {
    int code = Z_OK;
    gzerror(file_, &code);
    return code;
  }
  // zlib reports "unexpected end of file" (Z_BUF_ERROR) for a cut stream and "incorrect data check" for a
  // CRC mismatch; both arrive as a short read with an error set.
  [[noreturn]] void damaged() {
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    fail("corrupted or truncated gzip stream: " + std::string(message && *message ? message : "read error") +
         (code == Z_ERRNO ? " (" + std::string(std::strerror(errno)) + ")" : ""));
  }

  gzFile file_ = nullptr;
};

class memory_source final : public idx_source {
 public:
  memory_source(std::span<const std::byte> bytes, std::string prefix) : idx_source(std::move(prefix)), bytes_(bytes) {}
  std::size_t read(void* out, std::size_t n) override {
    const std::size_t k = std::min(n, bytes_.size() - pos_);
    if (k) std::memcpy(out, bytes_.data() + pos_, k);
    pos_ += k;
    return k;
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

struct idx_header {
  idx_type type = idx_type::u8;
  std::vector<std::size_t> dims;
  std::size_t count = 0;  // elements
  std::size_t bytes = 0;
};

idx_header read_idx_header(idx_source& src, std::uint64_t max_bytes) {
  unsigned char magic[4] = {};
  if (const std::size_t got = src.read(magic, 4); got < 4)
    src.fail("truncated: expected the 4-byte IDX magic 0x00 0x00 <type> <rank>, found " + std::to_string(got) + " bytes");
  if (magic[0] != 0 || magic[1] != 0) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string found;
    for (const unsigned char b : magic) found = found + (found.empty() ? "" : " ") + "0x" + hex[b >> 4] + hex[b & 15];
    src.fail("not an IDX file: expected the magic 0x00 0x00 <type> <rank>, found " + found +
             (magic[0] == 0x1f && magic[1] == 0x8b ? " (a gzip header zlib could not read)" : ""));
  }
  const std::size_t item = idx_type_size(magic[2]);
  if (item == 0)
    src.fail("unsupported element type 0x" + std::string(1, "0123456789ABCDEF"[magic[2] >> 4]) +
             "0123456789ABCDEF"[magic[2] & 15] +
             " (expected 0x08 u8, 0x09 s8, 0x0B s16, 0x0C s32, 0x0D f32 or 0x0E f64)");
  idx_header h;
  h.type = static_cast<idx_type>(magic[2]);
  const std::size_t rank = magic[3];
  std::vector<unsigned char> raw(rank * 4);
  if (const std::size_t got = src.read(raw.data(), raw.size()); got < raw.size())
    src.fail("truncated: rank " + std::to_string(rank) + " needs " + std::to_string(raw.size()) +
             " bytes of dims, found " + std::to_string(got));
  bool zero = false;
  for (std::size_t i = 0; i < rank; ++i) {
    const std::uint32_t d = std::uint32_t{raw[4 * i]} << 24 | std::uint32_t{raw[4 * i + 1]} << 16 |
                            std::uint32_t{raw[4 * i + 2]} << 8 | std::uint32_t{raw[4 * i + 3]};
    h.dims.push_back(d);
    zero = zero || d == 0;
  }
  // The product of up to 255 dims of 32 bits overflows easily: check each step against the limit.
  std::uint64_t count = 1;
  for (const std::size_t d : h.dims) {
    if (zero) {
      count = 0;
      break;
    }
    if (count > max_bytes / item / d)
      src.fail("dims " + io::dims_text(h.dims) + " of " + idx_type_name(h.type) + " describe more than " +
               std::to_string(max_bytes) + " bytes of data, the limit (max_bytes); a corrupted or hostile header?");
    count *= d;
  }
  if (count * item > max_bytes)  // rank 0: one element, which the loop above never compared
    src.fail("one " + idx_type_name(h.type) + " element is more than the limit of " + std::to_string(max_bytes) + " bytes");
  h.count = static_cast<std::size_t>(count);
  h.bytes = h.count * item;
  return h;
}

template <class T>
void from_big_endian(std::vector<T>& v) {
  if constexpr (sizeof(T) > 1 && std::endian::native == std::endian::little) {
    using bits = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
    for (T& x : v) {
      bits b;
      std::memcpy(&b, &x, sizeof b);
      bits r = 0;
      for (std::size_t i = 0; i < sizeof b; ++i) r = static_cast<bits>(r << 8 | ((b >> (8 * i)) & 0xFF));
      std::memcpy(&x, &r, sizeof r);
    }
  }
}

// The data after the header, as T, then a check that nothing follows it.
template <class T>
std::vector<T> read_idx_payload(idx_source& src, const idx_header& h) {
  std::vector<T> v;
  // Grow as the data arrives: a header that lies about its size costs at most twice what the file holds.
  constexpr std::size_t chunk = (std::size_t{16} << 20) / sizeof(T);
  std::size_t have = 0;
  while (have < h.count) {
    const std::size_t want = std::min(h.count, std::max(chunk, have * 2));
    v.resize(want);
    const std::size_t bytes = (want - have) * sizeof(T);
    const std::size_t got = src.read(reinterpret_cast<unsigned char*>(v.data()) + have * sizeof(T), bytes);
    if (got < bytes)
      src.fail("truncated: dims " + io::dims_text(h.dims) + " of " + idx_type_name(h.type) + " need " +
               std::to_string(h.bytes) + " bytes of data, found " + std::to_string(have * sizeof(T) + got));
    have = want;
  }
  unsigned char extra = 0;
  if (src.read(&extra, 1) != 0)
    src.fail("trailing data: dims " + io::dims_text(h.dims) + " of " + idx_type_name(h.type) + " need " +
             std::to_string(h.bytes) + " bytes of data, but more bytes follow");
  from_big_endian(v);
  return v;
}

idx_array read_idx_data(idx_source& src, idx_header h) {
  idx_array out;
  out.type = h.type;
  switch (h.type) {
    case idx_type::u8: out.values = read_idx_payload<std::uint8_t>(src, h); break;
    case idx_type::s8: out.values = read_idx_payload<std::int8_t>(src, h); break;
    case idx_type::s16: out.values = read_idx_payload<std::int16_t>(src, h); break;
    case idx_type::s32: out.values = read_idx_payload<std::int32_t>(src, h); break;
    case idx_type::f32: out.values = read_idx_payload<float>(src, h); break;
    case idx_type::f64: out.values = read_idx_payload<double>(src, h); break;
  }
  out.dims = std::move(h.dims);
  return out;
}

idx_array read_idx_from(idx_source& src, std::uint64_t max_bytes) { return read_idx_data(src, read_idx_header(src, max_bytes)); }

std::string idx_prefix(const std::filesystem::path& path) { return "tessel::data::read_idx: " + io::quoted(path) + ": "; }

idx_array read_idx_expecting(const std::filesystem::path& path, std::uint64_t max_bytes, idx_type type,
                             std::span<const std::size_t> dims) {
  gz_source src(path, idx_prefix(path));
  idx_header h = read_idx_header(src, max_bytes);
  const std::string expected = std::string(idx_type_short_name(type)) + io::dims_text(dims);
  const std::string found = std::string(idx_type_short_name(h.type)) + io::dims_text(h.dims);
  if (h.type != type)
    src.fail("expected " + expected + ", found " + found + ": the element type is " + idx_type_name(h.type) +
             ", expected " + idx_type_name(type));
  if (h.dims.size() != dims.size())
    src.fail("expected " + expected + ", found " + found + ": the rank is " + std::to_string(h.dims.size()) +
             ", expected " + std::to_string(dims.size()));
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (h.dims[i] != dims[i])
      src.fail("expected " + expected + ", found " + found + ": dim " + std::to_string(i) + " is " +
               std::to_string(h.dims[i]) + ", expected " + std::to_string(dims[i]));
  return read_idx_data(src, std::move(h));
}

std::filesystem::path fashion_mnist_file(const std::filesystem::path& dir, const std::string& name) {
  std::filesystem::path p = dir / (name + ".gz");
  std::error_code ec;
  if (std::filesystem::exists(p, ec)) return p;
  if (std::filesystem::exists(dir / name, ec)) return dir / name;
  throw format_error("tessel::data::load_fashion_mnist: " + io::quoted(dir) + " holds neither '" + name + ".gz' nor '" +
                     name + "'; install the package dataset-fashion-mnist or set TESSEL_FASHION_MNIST_DIR");
}

void check_fashion_mnist_pair(const std::filesystem::path& images_path, const idx_array& images,
                                     const std::filesystem::path& labels_path, const idx_array& labels) {
  const auto fail = [](const std::filesystem::path& p, const std::string& what) {
    throw format_error("tessel::data::load_fashion_mnist: " + io::quoted(p) + ": " + what);
  };
  if (images.type != idx_type::u8 || images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28)
    fail(images_path, "expected u8[N,28,28] images, found " + idx_type_name(images.type) + " " + io::dims_text(images.dims));
  if (labels.type != idx_type::u8 || labels.dims.size() != 1 || labels.dims[0] != images.dims[0])
    fail(labels_path, "expected u8[" + std::to_string(images.dims[0]) + "] labels (one per image), found " +
                          idx_type_name(labels.type) + " " + io::dims_text(labels.dims));
  const auto values = labels.data<std::uint8_t>();
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] >= fashion_mnist_classes)
      fail(labels_path, "label " + std::to_string(values[i]) + " at index " + std::to_string(i) +
                            " is not a class (expected 0 to 9)");
}
}  // namespace detail

idx_array read_idx(const std::filesystem::path& path, std::uint64_t max_bytes) {
  detail::gz_source src(path, detail::idx_prefix(path));
  return detail::read_idx_from(src, max_bytes);
}

idx_array parse_idx(std::span<const std::byte> bytes, std::string_view name, std::uint64_t max_bytes) {
  detail::memory_source src(bytes, "tessel::data::parse_idx: '" + std::string(name) + "': ");
  return detail::read_idx_from(src, max_bytes);
}

std::filesystem::path fashion_mnist_dir() {
  if (const char* env = std::getenv("TESSEL_FASHION_MNIST_DIR"); env && *env) return std::filesystem::path(env);
  return std::filesystem::path(fashion_mnist_default_dir);
}

fashion_mnist load_fashion_mnist(const std::filesystem::path& dir) {
  fashion_mnist out;
  const auto load = [&](idx_array& images, idx_array& labels, const std::string& prefix) {
    const auto images_path = detail::fashion_mnist_file(dir, prefix + "-images-idx3-ubyte");
    const auto labels_path = detail::fashion_mnist_file(dir, prefix + "-labels-idx1-ubyte");
    images = read_idx(images_path);
    labels = read_idx(labels_path);
    detail::check_fashion_mnist_pair(images_path, images, labels_path, labels);
  };
  load(out.train_images, out.train_labels, "train");
  load(out.test_images, out.test_labels, "t10k");
  return out;
}

}  // namespace tessel::data
