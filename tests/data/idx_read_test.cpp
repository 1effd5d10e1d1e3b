// IDX files of every element type and rank 0..4, raw and gzip, read at run time and with static shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "idx_test_util.hpp"
#include "tessel/data/idx.hpp"

namespace {

using idx_test::gzip;
using idx_test::idx_file;
using idx_test::idx_header;
using idx_test::temp_dir;
using idx_test::throws_format_error;
using idx_test::write_bytes;
namespace td = tessel::data;

const std::vector<std::vector<std::uint32_t>> ranks_0_to_4 = {{}, {5}, {2, 3}, {2, 1, 3}, {2, 3, 1, 2}};

template <class T>
std::vector<T> sample_values(std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_floating_point_v<T>)
      v[i] = static_cast<T>(static_cast<double>(i) * 0.75 - 3.5);
    else
      v[i] = static_cast<T>(static_cast<std::int64_t>(i * 37) - 50);  // negative values for the signed types
  }
  if constexpr (std::is_floating_point_v<T>)
    if (n > 1) v[1] = -std::numeric_limits<T>::infinity();
  if (n > 0) v[n - 1] = std::numeric_limits<T>::max();
  return v;
}

template <class T>
void check_round_trip(const temp_dir& dir) {
  for (const auto& dims : ranks_0_to_4) {
    std::size_t n = 1;
    for (const auto d : dims) n *= d;
    const auto values = sample_values<T>(n);
    const auto raw = idx_file(dims, values);
    write_bytes(dir / "a.idx", raw);
    write_bytes(dir / "a.idx.gz", gzip(raw));
    for (const char* name : {"a.idx", "a.idx.gz"}) {
      SCOPED_TRACE(std::string(name) + " " + tessel::data::idx_type_name(tessel::data::idx_type_of<T>()) + " rank " +
                   std::to_string(dims.size()));
      const td::idx_array a = td::read_idx(dir / name);
      EXPECT_EQ(a.type, td::idx_type_of<T>());
      EXPECT_EQ(a.dims, std::vector<std::size_t>(dims.begin(), dims.end()));
      ASSERT_EQ(a.size(), n);
      const auto got = a.data<T>();
      EXPECT_EQ(std::memcmp(got.data(), values.data(), n * sizeof(T)), 0);
    }
    const td::idx_array m = td::parse_idx(raw);
    EXPECT_EQ(std::memcmp(m.data<T>().data(), values.data(), n * sizeof(T)), 0);
  }
}

TEST(Idx, RoundTripEveryTypeAndRank) {
  temp_dir dir;
  check_round_trip<std::uint8_t>(dir);
  check_round_trip<std::int8_t>(dir);
  check_round_trip<std::int16_t>(dir);
  check_round_trip<std::int32_t>(dir);
  check_round_trip<float>(dir);
  check_round_trip<double>(dir);
}

TEST(Idx, BigEndianOnDisk) {
  // 0x0102 as s16 and 1.0f as f32, written by hand.
  const std::vector<std::byte> s16{std::byte{0}, std::byte{0}, std::byte{0x0B}, std::byte{1}, std::byte{0}, std::byte{0},
                                   std::byte{0}, std::byte{1}, std::byte{0x01}, std::byte{0x02}};
  EXPECT_EQ(td::parse_idx(s16).data<std::int16_t>()[0], 0x0102);
  const std::vector<std::byte> f32{std::byte{0},    std::byte{0}, std::byte{0x0D}, std::byte{1}, std::byte{0}, std::byte{0},
                                   std::byte{0},    std::byte{1}, std::byte{0x3F}, std::byte{0x80}, std::byte{0},
                                   std::byte{0}};
  EXPECT_EQ(td::parse_idx(f32).data<float>()[0], 1.0f);
}

TEST(Idx, ZeroSizedDims) {
  const auto a = td::parse_idx(idx_header(0x08, {0, 28}));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.dims, (std::vector<std::size_t>{0, 28}));
}

TEST(Idx, DataOfWrongTypeThrows) {
  const auto a = td::parse_idx(idx_file<std::uint8_t>({2}, {1, 2}));
  EXPECT_THROW((void)a.data<float>(), std::invalid_argument);
}

TEST(Idx, TypedReadWidensAndConverts) {
  temp_dir dir;
  write_bytes(dir / "u8.gz", gzip(idx_file<std::uint8_t>({2, 3}, {0, 1, 2, 200, 254, 255})));
  const auto u = td::read_idx<std::uint8_t, tessel::shape<2, 3>>(dir / "u8.gz");
  static_assert(std::is_same_v<decltype(u), const tessel::tensor<std::uint32_t, tessel::shape<2, 3>>>);
  EXPECT_EQ(u(1, 2), 255u);
  EXPECT_EQ(u(1, 0), 200u);
  const auto f = td::read_idx<std::uint8_t, tessel::shape<2, 3>, float>(dir / "u8.gz");
  EXPECT_EQ(f(1, 1), 254.0f);
  const auto b = td::read_idx<std::uint8_t, tessel::shape<2, 3>, tessel::bfloat16>(dir / "u8.gz");
  EXPECT_EQ(static_cast<float>(b(1, 0)), 200.0f);

  write_bytes(dir / "s16", idx_file<std::int16_t>({4}, {-32768, -1, 0, 32767}));
  const auto s = td::read_idx<std::int16_t, tessel::shape<4>>(dir / "s16");
  static_assert(std::is_same_v<decltype(s)::value_type, std::int32_t>);
  EXPECT_EQ(s[0], -32768);
  EXPECT_EQ(s[3], 32767);

  write_bytes(dir / "f64", idx_file<double>({}, {0.1}));
  const auto d = td::read_idx<double, tessel::shape<>>(dir / "f64");
  EXPECT_EQ(d[0], 0.1f);

  write_bytes(dir / "r4", idx_file<std::int32_t>({1, 2, 1, 2}, {-7, 8, 9, 10}));
  const auto r4 = td::read_idx<std::int32_t, tessel::shape<1, 2, 1, 2>>(dir / "r4");
  EXPECT_EQ(r4(0, 1, 0, 1), 10);
  EXPECT_EQ(r4(0, 0, 0, 0), -7);
}

TEST(Idx, TypedReadNamesWhatDiffers) {
  temp_dir dir;
  write_bytes(dir / "s32", idx_file<std::int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx<std::uint8_t, tessel::shape<2, 3>>(dir / "s32"); },
                                  {"s32'", "expected u8[2,3], found s32[2,3]", "element type is s32 (0x0C)"}));
  write_bytes(dir / "u8", idx_file<std::uint8_t>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx<std::uint8_t, tessel::shape<2, 3>>(dir / "u8"); },
                                  {"expected u8[2,3], found u8[2,4]", "dim 1 is 4, expected 3"}));
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx<std::uint8_t, tessel::shape<8>>(dir / "u8"); },
                                  {"expected u8[8], found u8[2,4]", "rank is 2, expected 1"}));
}

TEST(Idx, MissingFileOrDirectory) {
  temp_dir dir;
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx(dir / "nope.gz"); }, {"nope.gz", "cannot open"}));
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx(dir.path()); }, {"not a regular file"}));
}

TEST(Idx, WrongMagicAndUnsupportedType) {
  auto bytes = idx_file<std::uint8_t>({2}, {1, 2});
  bytes[0] = std::byte{1};
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(bytes, "m"); }, {"'m'", "not an IDX file", "found 0x01 0x00 0x08 0x01"}));
  bytes[0] = std::byte{0};
  bytes[2] = std::byte{0x07};
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(bytes); }, {"unsupported element type 0x07", "0x08 u8"}));
  bytes[2] = std::byte{0x0A};
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(bytes); }, {"unsupported element type 0x0A"}));
}

TEST(Idx, TruncatedAndTrailing) {
  const auto good = idx_file<std::int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto cut = good;
  cut.resize(good.size() - 3);
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(cut); }, {"truncated", "[2,3] of s32 (0x0C) need 24 bytes of data, found 21"}));
  cut.resize(6);
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(cut); }, {"truncated: rank 2 needs 8 bytes of dims, found 2"}));
  cut.resize(3);
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(cut); }, {"truncated", "magic", "found 3 bytes"}));
  auto longer = good;
  longer.push_back(std::byte{0});
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(longer); }, {"trailing data", "need 24 bytes"}));
  temp_dir dir;
  write_bytes(dir / "t.gz", gzip(longer));
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx(dir / "t.gz"); }, {"t.gz", "trailing data"}));
}

TEST(Idx, CorruptedGzip) {
  temp_dir dir;
  std::vector<std::uint8_t> values(300);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint8_t>(i * i);
  const auto gz = gzip(idx_file<std::uint8_t>({300}, values));
  auto bad = gz;
  bad[bad.size() - 6] ^= std::byte{0x10};  // inside the CRC32 of the trailer
  write_bytes(dir / "crc.gz", bad);
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx(dir / "crc.gz"); }, {"crc.gz", "gzip stream"}));
  auto cut = gz;
  cut.resize(gz.size() - 4);  // no ISIZE
  write_bytes(dir / "cut.gz", cut);
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx(dir / "cut.gz"); }, {"cut.gz", "gzip stream"}));
  auto middle = gz;
  middle.resize(gz.size() / 2);
  write_bytes(dir / "half.gz", middle);
  EXPECT_TRUE(throws_format_error([&] { (void)td::read_idx(dir / "half.gz"); }, {"half.gz"}));
}

TEST(Idx, AbsurdDimsAreRefusedBeforeAllocating) {
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(idx_header(0x0C, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF})); },
                                  {"dims [4294967295,4294967295,4294967295] of s32 (0x0C)", "limit"}));
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(idx_header(0x08, {65536, 65536, 2})); },
                                  {"more than 4294967296 bytes"}));
  // Within the limit, a lying header costs at most about twice what the file holds.
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(idx_header(0x08, {65536, 65536})); }, {"truncated", "found 0"}));
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(idx_file<std::uint8_t>({4}, {1, 2, 3, 4}), "x", 3); },
                                  {"more than 3 bytes"}));
  EXPECT_EQ(td::parse_idx(idx_file<std::uint8_t>({4}, {1, 2, 3, 4}), "x", 4).size(), 4u);
  EXPECT_TRUE(throws_format_error([&] { (void)td::parse_idx(idx_file<double>({}, {1.0}), "x", 7); }, {"more than the limit of 7"}));
}

}  // namespace
