// Damaged and hostile safetensors files: every truncation, every single-bit flip of the length and the
// header, oversized header lengths, and hand-made headers that break each rule of the format. Each must
// be a format_error; where a flip leaves a valid file (a letter of a name), the result must be exactly
// what the damaged file says and the data must be unchanged.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tessel/io/safetensors.hpp"
#include "test_files.hpp"

namespace {

namespace io = tessel::io;
using checkpoint_test::bytes_of;
using checkpoint_test::sample;
using checkpoint_test::temp_dir;
using checkpoint_test::throws_with;
using checkpoint_test::write_bytes;
using tessel::shape;

io::safetensors_file small() {
  io::safetensors_file f;
  f.put("w", sample<float, shape<2, 3>>());
  f.put("b", sample<tessel::bfloat16, shape<3>>());
  f.put("m", sample<bool, shape<2>>());
  f.put("n", sample<std::int32_t, shape<>>());
  f.metadata["format"] = "pt";
  return f;
}

TEST(SafetensorsFuzz, EveryTruncationFails) {
  temp_dir dir;
  const auto good = io::serialize_safetensors(small());
  for (std::size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_THROW((void)io::parse_safetensors(std::span(good).first(n)), io::format_error);
    write_bytes(dir / "t.safetensors", std::span(good).first(n));
    EXPECT_THROW((void)io::read_safetensors(dir / "t.safetensors"), io::format_error);
  }
  write_bytes(dir / "t.safetensors", good);
  EXPECT_EQ(io::read_safetensors(dir / "t.safetensors").tensors.size(), 4u);
}

TEST(SafetensorsFuzz, EveryBitFlipOfTheHeaderFailsOrOnlyRenames) {
  temp_dir dir;
  const auto original = small();
  const auto good = io::serialize_safetensors(original);
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, good.data(), 8);
  std::size_t accepted = 0;
  for (std::size_t bit = 0; bit < (8 + header_length) * 8; ++bit) {
    SCOPED_TRACE(bit);
    auto bad = good;
    bad[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    io::safetensors_file f;
    try {
      f = io::parse_safetensors(bad);
    } catch (const io::format_error&) {
      write_bytes(dir / "f.safetensors", bad);
      EXPECT_THROW((void)io::read_safetensors(dir / "f.safetensors"), io::format_error);
      continue;
    }
    ++accepted;
    // Only a name or a metadata text can change: the file must say exactly what was parsed...
    EXPECT_EQ(io::serialize_safetensors(f), bad);
    // ...and every tensor keeps its dtype, shape and data.
    ASSERT_EQ(f.tensors.size(), original.tensors.size());
    for (std::size_t i = 0; i < f.tensors.size(); ++i) {
      EXPECT_EQ(f.tensors[i].dtype, original.tensors[i].dtype);
      EXPECT_EQ(f.tensors[i].shape, original.tensors[i].shape);
      EXPECT_EQ(f.tensors[i].bytes, original.tensors[i].bytes);
    }
  }
  EXPECT_GT(accepted, 0u);  // e.g. "w" -> "v": proves the loop reaches the names
}

TEST(SafetensorsFuzz, OversizedHeaderLengthsFail) {
  temp_dir dir;
  auto good = io::serialize_safetensors(small());
  for (const std::uint64_t n : {std::uint64_t{100'000'001}, std::uint64_t{1} << 32, std::uint64_t{1} << 63,
                                ~std::uint64_t{0}, static_cast<std::uint64_t>(good.size()), std::uint64_t{good.size() - 7}}) {
    SCOPED_TRACE(n);
    auto bad = good;
    std::memcpy(bad.data(), &n, 8);
    EXPECT_THROW((void)io::parse_safetensors(bad), io::format_error);
    write_bytes(dir / "f.safetensors", bad);
    EXPECT_THROW((void)io::read_safetensors(dir / "f.safetensors"), io::format_error);
  }
  auto bad = good;
  const std::uint64_t n = 100'000'001;
  std::memcpy(bad.data(), &n, 8);
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::parse_safetensors(bad, "big"); },
                                            {"'big'", "header length 100000001 is more than the limit of 100000000"}));
}

std::vector<std::byte> file_of(const std::string& header, std::size_t data_bytes, char fill = '\x01') {
  std::string len(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) len[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return bytes_of(len + header + std::string(data_bytes, fill));
}

TEST(SafetensorsFuzz, HeadersThatBreakARule) {
  const auto t = [](const std::string& name, const std::string& body) { return "\"" + name + "\":{" + body + "}"; };
  const std::string a8 = t("a", R"("dtype":"U8","shape":[8],"data_offsets":[0,8])");
  const std::pair<std::string, const char*> cases[] = {
      {"{" + a8 + "," + t("b", R"("dtype":"U8","shape":[4],"data_offsets":[4,8])") + "}", "inside tensor 'a'"},
      {"{" + t("a", R"("dtype":"U8","shape":[4],"data_offsets":[4,8])") + "}", "leaving bytes 0 to 4"},
      {"{" + t("a", R"("dtype":"U8","shape":[4],"data_offsets":[0,4])") + "}", "cover 4 bytes, but the data buffer after the header holds 8"},
      {"{" + t("a", R"("dtype":"U8","shape":[16],"data_offsets":[0,16])") + "}", "holds 8 (truncated file)"},
      {"{" + t("a", R"("dtype":"U8","shape":[0],"data_offsets":[8,0])") + "}", "end before they begin"},
      {"{" + t("a", R"("dtype":"F32","shape":[8],"data_offsets":[0,8])") + "}", "needs 32 bytes"},
      {"{" + t("a", R"("dtype":"F17","shape":[8],"data_offsets":[0,8])") + "}", "unsupported dtype \"F17\""},
      {"{" + t("a", R"("dtype":"U8","shape":[8],"data_offsets":[0,8],"extra":1)") + "}", "unknown field \"extra\""},
      {"{" + t("a", R"("dtype":"U8","shape":[8])") + "}", "missing field"},
      {"{" + t("a", R"("dtype":8,"shape":[8],"data_offsets":[0,8])") + "}", "dtype must be a string"},
      {"{" + t("a", R"("dtype":"U8","shape":8,"data_offsets":[0,8])") + "}", "shape must be an array"},
      {"{" + t("a", R"("dtype":"U8","shape":[-8],"data_offsets":[0,8])") + "}", "shape holds -8"},
      {"{" + t("a", R"("dtype":"U8","shape":[8.0],"data_offsets":[0,8])") + "}", "shape holds 8.0"},
      {"{" + t("a", R"("dtype":"U8","shape":[8],"data_offsets":[0,8,8])") + "}", "data_offsets must be [begin, end]"},
      {"{" + t("a", R"("dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8])") + "}", "more than 2^64 bytes"},
      {"{" + t("a", R"("dtype":"U8","shape":[[8]],"data_offsets":[0,8])") + "}", "nesting deeper than 3"},
      {"{" + a8 + "," + a8 + "}", "duplicate key \"a\""},
      {"{" + a8 + R"(,"__metadata__":{"k":1}})", "value of \"k\" must be a string"},
      {"{" + a8 + R"(,"__metadata__":"k"})", "\"__metadata__\" must be an object"},
      {"{" + a8 + R"(,"b":[]})", "tensor 'b': expected an object"},
      {" {" + a8 + "}", "must be a JSON object starting with '{'"},
      {"[" + a8 + "]", "must be a JSON object starting with '{'"},
      {"", "found an empty header"},
      {"{" + a8 + "} x", "unexpected text after"},
      {"{" + a8 + std::string("}\0", 2), "unexpected text after"},
      {"{\"\xFF\":{}}", "invalid UTF-8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.first);
    EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::parse_safetensors(file_of(c.first, 8), "h"); }, {"'h'", c.second}));
  }
  // The same rules pass when kept: the control case.
  EXPECT_EQ(io::parse_safetensors(file_of("{" + a8 + "}   ", 8)).tensors.at(0).bytes.size(), 8u);
  EXPECT_TRUE(throws_with<io::format_error>(
      [&] { (void)io::parse_safetensors(file_of("{" + t("p", R"("dtype":"BOOL","shape":[8],"data_offsets":[0,8])") + "}", 8, '\x02')); },
      {"tensor 'p': BOOL element 0 is byte 2"}));
}

}  // namespace
