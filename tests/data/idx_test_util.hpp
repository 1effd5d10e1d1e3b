#pragma once
// Helpers for the IDX tests: a temporary directory, IDX files built byte by byte (independently of the
// reader), gzip in memory, and a check that a call fails with a format_error saying given things.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/data/idx.hpp"

namespace idx_test {

// A fresh directory for one test, removed with everything in it at the end.
class temp_dir {
 public:
  temp_dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("tessel-" + std::string(info ? info->name() : "test") + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline void put_be(std::vector<std::byte>& out, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = bytes; i-- > 0;) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

// Magic, dims and nothing else.
inline std::vector<std::byte> idx_header(std::uint8_t type, const std::vector<std::uint32_t>& dims) {
  std::vector<std::byte> out{std::byte{0}, std::byte{0}, std::byte{type}, static_cast<std::byte>(dims.size())};
  for (const std::uint32_t d : dims) put_be(out, d, 4);
  return out;
}

// A whole IDX file of `values` (big-endian), with the type code that matches T.
template <class T>
std::vector<std::byte> idx_file(const std::vector<std::uint32_t>& dims, const std::vector<T>& values) {
  auto out = idx_header(static_cast<std::uint8_t>(tessel::data::idx_type_of<T>()), dims);
  for (const T v : values) {
    std::uint64_t bits = 0;
    if constexpr (sizeof(T) == 1) bits = std::bit_cast<std::uint8_t>(v);
    else if constexpr (sizeof(T) == 2) bits = std::bit_cast<std::uint16_t>(v);
    else if constexpr (sizeof(T) == 4) bits = std::bit_cast<std::uint32_t>(v);
    else bits = std::bit_cast<std::uint64_t>(v);
    put_be(out, bits, sizeof(T));
  }
  return out;
}

// A gzip stream (RFC 1952) of `raw`, made with zlib's deflate rather than the gz* API the reader uses.
inline std::vector<std::byte> gzip(std::span<const std::byte> raw) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<std::byte> out(deflateBound(&z, static_cast<uLong>(raw.size())) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Passes if `f()` throws tessel::data::format_error whose message contains every one of `parts`.
template <class F>
::testing::AssertionResult throws_format_error(F&& f, std::initializer_list<std::string_view> parts) {
  try {
    f();
  } catch (const tessel::data::format_error& e) {
    const std::string message = e.what();
    for (const std::string_view part : parts)
      if (message.find(part) == std::string::npos)
        return ::testing::AssertionFailure() << "the message lacks \"" << part << "\": " << message;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace idx_test
