// .npy export: round trips of every dtype and rank 0..4, the exact header NumPy's format asks for,
// files written by hand, and damaged files (every truncation, every bit flip of the preamble).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tessel/io/npy.hpp"
#include "test_files.hpp"

namespace {

namespace io = tessel::io;
using checkpoint_test::bytes_of;
using checkpoint_test::read_bytes;
using checkpoint_test::same_bits;
using checkpoint_test::sample;
using checkpoint_test::temp_dir;
using checkpoint_test::throws_with;
using checkpoint_test::write_bytes;
using tessel::shape;

template <class T, class S>
void round_trip(const temp_dir& dir) {
  const auto t = sample<T, S>();
  io::write_npy(dir / "a.npy", t);
  EXPECT_TRUE(same_bits(io::read_npy<T, S>(dir / "a.npy"), t));
  const auto bytes = io::serialize_npy(t);
  EXPECT_EQ(read_bytes(dir / "a.npy"), bytes);
  const io::npy_array a = io::parse_npy(bytes);
  EXPECT_EQ(a.descr, io::npy_descr_of<T>());
  EXPECT_EQ(a.shape, std::vector<std::uint64_t>(S::dims.begin(), S::dims.end()));
  EXPECT_EQ(a.bytes.size(), S::size * sizeof(T));
}

template <class T>
void round_trip_ranks(const temp_dir& dir) {
  round_trip<T, shape<>>(dir);
  round_trip<T, shape<3>>(dir);
  round_trip<T, shape<2, 3>>(dir);
  round_trip<T, shape<2, 1, 3>>(dir);
  round_trip<T, shape<2, 3, 1, 2>>(dir);
  round_trip<T, shape<0, 3>>(dir);
}

TEST(Npy, RoundTripEveryDtypeAndRank) {
  temp_dir dir;
  round_trip_ranks<float>(dir);
  round_trip_ranks<tessel::bfloat16>(dir);
  round_trip_ranks<std::int32_t>(dir);
  round_trip_ranks<std::uint32_t>(dir);
  round_trip_ranks<bool>(dir);
}

TEST(Npy, WritesVersion1WithDataAlignedTo64) {
  const auto bytes = io::serialize_npy(tessel::tensor<float, shape<2, 3>>{1, 2, 3, 4, 5, 6});
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string expected = std::string("\x93NUMPY\x01\x00", 8) + "\x76" + std::string(1, '\0') + dict;
  expected += std::string(128 - 1 - expected.size(), ' ') + "\n";
  ASSERT_EQ(expected.size(), 128u);
  const std::string got(reinterpret_cast<const char*>(bytes.data()), 128);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(bytes.size(), 128u + 24u);
  float first = 0;
  std::memcpy(&first, bytes.data() + 128, 4);
  EXPECT_EQ(first, 1.0f);
  const auto scalar = io::serialize_npy(tessel::tensor<bool, shape<>>{true});
  const std::string s(reinterpret_cast<const char*>(scalar.data()), scalar.size());
  EXPECT_NE(s.find("{'descr': '|b1', 'fortran_order': False, 'shape': (), }"), std::string::npos);
  EXPECT_EQ(scalar.size(), 129u);
  const auto vec = io::serialize_npy(tessel::tensor<tessel::bfloat16, shape<3>>{});
  EXPECT_NE(std::string(reinterpret_cast<const char*>(vec.data()), vec.size()).find("'descr': '<u2'"), std::string::npos);
  EXPECT_NE(std::string(reinterpret_cast<const char*>(vec.data()), vec.size()).find("'shape': (3,)"), std::string::npos);
}

std::vector<std::byte> npy_v1(const std::string& dict, const std::string& data) {
  std::string header = dict + "\n";
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return bytes_of(out + header + data);
}

TEST(Npy, ReadsHandWrittenFiles) {
  // Keys in another order, no trailing comma, no padding; and a version 2.0 file.
  const auto a = io::parse_npy(npy_v1("{'shape': (2,), 'fortran_order': False, 'descr': '<u4'}", std::string("\x07\0\0\0\x08\0\0\0", 8)));
  EXPECT_EQ(a.descr, "<u4");
  EXPECT_EQ(a.shape, (std::vector<std::uint64_t>{2}));
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  const std::string h = "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2), }\n";
  v2 += std::string(1, static_cast<char>(h.size())) + std::string(3, '\0') + h + "\x05\x06";
  const auto b = io::parse_npy(bytes_of(v2));
  EXPECT_EQ(b.descr, "|u1");
  EXPECT_EQ(b.bytes, (std::vector<std::byte>{std::byte{5}, std::byte{6}}));
}

TEST(Npy, RejectsWhatItCannotRead) {
  const std::string ok = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  const std::string eight(8, '\x01');
  const std::pair<std::vector<std::byte>, const char*> cases[] = {
      {npy_v1("{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }", eight), "fortran_order': True"},
      {npy_v1("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", eight), "unsupported descr '>i4'"},
      {npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", eight), "unsupported descr '<f8'"},
      {npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (2), }", eight), "(n,)"},
      {npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (02,), }", eight), "leading zero"},
      {npy_v1("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", eight), "repeated key 'descr'"},
      {npy_v1("{'descr': '<i4', 'shape': (2,), }", eight), "needs the keys"},
      {npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,), }", eight), "out of range"},
      {npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", eight), "more than 2^64"},
      {npy_v1(ok, std::string(7, '\x01')), "truncated: shape (2,) of '<i4' needs 8 bytes of data, found 7"},
      {npy_v1(ok, std::string(9, '\x01')), "trailing data"},
      {npy_v1(ok + "x", eight), "must end with spaces and a newline"},
      {npy_v1("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", "\x01\x02"), "bool element 1 is byte 2"},
      {bytes_of(std::string("\x93NUMPZ\x01\x00\x00\x00", 10)), "magic"},
      {bytes_of(std::string("\x93NUMPY\x03\x00\x00\x00", 10)), "version 3.0"},
      {bytes_of(std::string("\x93NUMPY\x01\x00\xff\x00{}", 12)), "the header length is 255 bytes, but only 2 follow"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.second);
    EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::parse_npy(c.first, "n"); }, {"'n'", c.second}));
  }
  temp_dir dir;
  io::write_npy(dir / "x.npy", tessel::tensor<std::int32_t, shape<2>>{1, 2});
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::read_npy<float, shape<2, 1>>(dir / "x.npy"); },
                                            {"x.npy", "expected f32[2,1] ('<f4' (2, 1)), found '<i4' (2,)"}));
}

TEST(Npy, EveryTruncationAndPreambleBitFlipFails) {
  temp_dir dir;
  const auto t = sample<float, shape<2, 3>>();
  const auto good = io::serialize_npy(t);
  for (std::size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_THROW((void)io::parse_npy(std::span(good).first(n)), io::format_error);
  }
  write_bytes(dir / "cut.npy", std::span(good).first(good.size() - 1));
  EXPECT_THROW((void)io::read_npy(dir / "cut.npy"), io::format_error);
  for (std::size_t bit = 0; bit < 128 * 8; ++bit) {
    SCOPED_TRACE(bit);
    auto bad = good;
    bad[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    try {
      const auto a = io::parse_npy(bad);
      EXPECT_EQ(a.descr, "<f4");  // reached only if nothing that matters changed
      EXPECT_EQ(a.shape, (std::vector<std::uint64_t>{2, 3}));
      EXPECT_EQ(a.bytes, std::vector<std::byte>(good.begin() + 128, good.end()));
    } catch (const io::format_error&) {
    }
  }
}

}  // namespace
