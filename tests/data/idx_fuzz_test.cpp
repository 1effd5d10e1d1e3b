// Damaged IDX files: every truncation, every single-bit flip of the header (raw) and of the whole gzip
// file. Each must be a format_error, or (where the damage hits bytes nothing checks, such as the gzip
// header's time stamp) a result identical to the original: never a crash, never wrong data.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "idx_test_util.hpp"
#include "tessel/data/idx.hpp"

namespace {

using idx_test::gzip;
using idx_test::idx_file;
using idx_test::idx_header;
using idx_test::temp_dir;
using idx_test::write_bytes;
namespace td = tessel::data;
using small_shape = tessel::shape<2, 3, 4>;

std::vector<std::uint8_t> small_values() {
  std::vector<std::uint8_t> v(24);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(7 * i + 1);
  return v;
}

std::vector<std::byte> small_file() { return idx_file<std::uint8_t>({2, 3, 4}, small_values()); }

// Reads `path` both ways; true if both fail with format_error, false if both succeed with the original
// values; any other outcome fails the test.
bool rejected(const std::filesystem::path& path) {
  bool runtime_rejected = false, typed_rejected = false;
  try {
    const auto a = td::read_idx(path, 1 << 20);
    EXPECT_EQ(a.type, td::idx_type::u8);
    EXPECT_EQ(a.dims, (std::vector<std::size_t>{2, 3, 4}));
    if (a.type == td::idx_type::u8) {
      const auto got = a.data<std::uint8_t>();
      EXPECT_EQ(std::vector<std::uint8_t>(got.begin(), got.end()), small_values());
    }
  } catch (const td::format_error&) {
    runtime_rejected = true;
  }
  try {
    const auto t = td::read_idx<std::uint8_t, small_shape>(path, 1 << 20);
    for (std::size_t i = 0; i < small_shape::size; ++i) EXPECT_EQ(t[i], small_values()[i]);
  } catch (const td::format_error&) {
    typed_rejected = true;
  }
  EXPECT_EQ(runtime_rejected, typed_rejected) << path;
  return runtime_rejected;
}

TEST(IdxFuzz, EveryTruncationOfARawFileFails) {
  temp_dir dir;
  const auto good = small_file();
  for (std::size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE(n);
    write_bytes(dir / "f", std::span(good).first(n));
    EXPECT_TRUE(rejected(dir / "f"));
    EXPECT_THROW((void)td::parse_idx(std::span(good).first(n)), td::format_error);
  }
  write_bytes(dir / "f", good);
  EXPECT_FALSE(rejected(dir / "f"));
}

TEST(IdxFuzz, EveryTruncationOfAGzipFileFails) {
  temp_dir dir;
  const auto gz = gzip(small_file());
  for (std::size_t n = 0; n < gz.size(); ++n) {
    SCOPED_TRACE(n);
    write_bytes(dir / "f.gz", std::span(gz).first(n));
    EXPECT_TRUE(rejected(dir / "f.gz"));
  }
  write_bytes(dir / "f.gz", gz);
  EXPECT_FALSE(rejected(dir / "f.gz"));
}

TEST(IdxFuzz, EveryBitFlipOfARawHeaderFails) {
  temp_dir dir;
  const auto good = small_file();
  const std::size_t header = 4 + 3 * 4;
  for (std::size_t bit = 0; bit < header * 8; ++bit) {
    SCOPED_TRACE(bit);
    auto bad = good;
    bad[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    write_bytes(dir / "f", bad);
    // A flip of 0x08 to 0x09 (s8) leaves a readable file of another type: the typed read must refuse it.
    EXPECT_THROW((void)(td::read_idx<std::uint8_t, small_shape>(dir / "f", 1 << 20)), td::format_error);
    try {
      const auto a = td::parse_idx(bad, "f", 1 << 20);
      EXPECT_TRUE(a.type != td::idx_type::u8 || a.dims != std::vector<std::size_t>({2, 3, 4}));
    } catch (const td::format_error&) {
    }
  }
}

TEST(IdxFuzz, EveryBitFlipOfAGzipFileFailsOrChangesNothing) {
  temp_dir dir;
  const auto gz = gzip(small_file());
  std::size_t accepted = 0;
  for (std::size_t bit = 0; bit < gz.size() * 8; ++bit) {
    SCOPED_TRACE(bit);
    auto bad = gz;
    bad[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    write_bytes(dir / "f.gz", bad);
    if (!rejected(dir / "f.gz")) ++accepted;
  }
  // Only bits zlib does not check may change silently: the time stamp (4 bytes), XFL and OS, the FTEXT
  // flag, and the padding bits after the last deflate block (at most 7); all else is covered by the
  // structure, the CRC32 and the length.
  EXPECT_LE(accepted, 6u * 8u + 1u + 7u);
}

TEST(IdxFuzz, OversizedDimsFailWithoutAllocating) {
  for (const std::uint32_t big : {0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu}) {
    for (const std::uint8_t type : {std::uint8_t{0x08}, std::uint8_t{0x0E}}) {
      auto bytes = idx_header(type, {big, big, big, big});
      bytes.resize(bytes.size() + 64);
      EXPECT_THROW((void)td::parse_idx(bytes), td::format_error);
      auto one = idx_header(type, {big});
      one.resize(one.size() + 64);
      EXPECT_THROW((void)td::parse_idx(one, "x", 1 << 20), td::format_error);
    }
  }
  // Rank 255 of dims 2: far beyond 2^64 elements.
  std::vector<std::uint32_t> dims(255, 2);
  EXPECT_THROW((void)td::parse_idx(idx_header(0x08, dims)), td::format_error);
}

}  // namespace
