// safetensors: round trips of every dtype and rank 0..4, files written by hand from the format's
// description, the exact bytes tessel writes, and the messages of get and of the writer's checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tessel/io/safetensors.hpp"
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

template <class T>
void put_all_ranks(io::safetensors_file& f, const std::string& prefix) {
  f.put(prefix + ".r0", sample<T, shape<>>());
  f.put(prefix + ".r1", sample<T, shape<3>>());
  f.put(prefix + ".r2", sample<T, shape<2, 3>>());
  f.put(prefix + ".r3", sample<T, shape<2, 1, 3>>());
  f.put(prefix + ".r4", sample<T, shape<2, 3, 1, 2>>());
  f.put(prefix + ".empty", sample<T, shape<0, 3>>());
}

template <class T>
void check_all_ranks(const io::safetensors_file& f, const std::string& prefix) {
  SCOPED_TRACE(prefix);
  EXPECT_TRUE(same_bits(io::get<T, shape<>>(f, prefix + ".r0"), sample<T, shape<>>()));
  EXPECT_TRUE(same_bits(io::get<T, shape<3>>(f, prefix + ".r1"), sample<T, shape<3>>()));
  EXPECT_TRUE(same_bits(io::get<T, shape<2, 3>>(f, prefix + ".r2"), sample<T, shape<2, 3>>()));
  EXPECT_TRUE(same_bits(io::get<T, shape<2, 1, 3>>(f, prefix + ".r3"), sample<T, shape<2, 1, 3>>()));
  EXPECT_TRUE(same_bits(io::get<T, shape<2, 3, 1, 2>>(f, prefix + ".r4"), sample<T, shape<2, 3, 1, 2>>()));
  EXPECT_TRUE(same_bits(io::get<T, shape<0, 3>>(f, prefix + ".empty"), sample<T, shape<0, 3>>()));
}

io::safetensors_file every_dtype() {
  io::safetensors_file f;
  put_all_ranks<float>(f, "f32");
  put_all_ranks<tessel::bfloat16>(f, "bf16");
  put_all_ranks<std::int32_t>(f, "s32");
  put_all_ranks<std::uint32_t>(f, "u32");
  put_all_ranks<bool>(f, "pred");
  f.metadata["format"] = "tessel";
  f.metadata["note"] = "\"quoted\" \xE2\x82\xAC\n";
  return f;
}

void check_every_dtype(const io::safetensors_file& f) {
  check_all_ranks<float>(f, "f32");
  check_all_ranks<tessel::bfloat16>(f, "bf16");
  check_all_ranks<std::int32_t>(f, "s32");
  check_all_ranks<std::uint32_t>(f, "u32");
  check_all_ranks<bool>(f, "pred");
  EXPECT_EQ(f.metadata.at("format"), "tessel");
  EXPECT_EQ(f.metadata.at("note"), "\"quoted\" \xE2\x82\xAC\n");
}

TEST(Safetensors, RoundTripEveryDtypeAndRankThroughAFile) {
  temp_dir dir;
  const auto f = every_dtype();
  io::write_safetensors(dir / "m.safetensors", f);
  const auto back = io::read_safetensors(dir / "m.safetensors");
  EXPECT_EQ(back.source, (dir / "m.safetensors").string());
  ASSERT_EQ(back.tensors.size(), f.tensors.size());
  check_every_dtype(back);
  EXPECT_EQ(read_bytes(dir / "m.safetensors"), io::serialize_safetensors(f));
  EXPECT_FALSE(std::filesystem::exists(io::atomic_temp_path(dir / "m.safetensors")));
}

TEST(Safetensors, RoundTripInMemory) {
  const auto bytes = io::serialize_safetensors(every_dtype());
  check_every_dtype(io::parse_safetensors(bytes));
  // Header padded with spaces so that the data starts at a multiple of 8.
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, LowLevelEntriesOfOtherDtypes) {
  io::safetensors_file f;
  f.tensors.push_back({"u8", "U8", {3}, {std::byte{0}, std::byte{128}, std::byte{255}}});
  f.tensors.push_back({"f64", "F64", {1}, std::vector<std::byte>(8, std::byte{0x40})});
  f.tensors.push_back({"scalar", "I64", {}, std::vector<std::byte>(8, std::byte{1})});
  const auto back = io::parse_safetensors(io::serialize_safetensors(f));
  ASSERT_EQ(back.tensors.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.tensors[i].name, f.tensors[i].name);
    EXPECT_EQ(back.tensors[i].dtype, f.tensors[i].dtype);
    EXPECT_EQ(back.tensors[i].shape, f.tensors[i].shape);
    EXPECT_EQ(back.tensors[i].bytes, f.tensors[i].bytes);
  }
  EXPECT_TRUE(back.metadata.empty());
}

// The format's own example (the reference implementation's test): a 60-byte header, not padded, with
// an I32 [2,2] tensor of zeros.
TEST(Safetensors, ReadsTheSpecExampleWrittenByHand) {
  const std::string header = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  ASSERT_EQ(header.size(), 0x3Cu);
  const std::string file = std::string("\x3C\0\0\0\0\0\0\0", 8) + header + std::string(16, '\0');
  const auto f = io::parse_safetensors(bytes_of(file));
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].name, "test");
  EXPECT_EQ(f.tensors[0].dtype, "I32");
  EXPECT_EQ(f.tensors[0].shape, (std::vector<std::uint64_t>{2, 2}));
  EXPECT_EQ(f.tensors[0].bytes, std::vector<std::byte>(16));
  const auto t = io::get<std::int32_t, shape<2, 2>>(f, "test");
  EXPECT_EQ(t, (tessel::tensor<std::int32_t, shape<2, 2>>{0, 0, 0, 0}));
}

// The README's layout: metadata, two tensors listed out of data order, JSON whitespace, space padding,
// little-endian data.
TEST(Safetensors, ReadsAHandWrittenFileWithMetadata) {
  std::string header = "{\n  \"weight\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]},\n"
                       "  \"__metadata__\": {\"format\": \"pt\"},\n"
                       "  \"bias\": {\"dtype\": \"BF16\", \"shape\": [], \"data_offsets\": [0, 4]}\n}";
  // BF16 [] takes 2 bytes, not 4: first check that the reader notices, then write it right.
  const auto file_of = [](std::string h, const std::string& data) {
    h.append((8 - h.size() % 8) % 8, ' ');
    std::string len(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) len[i] = static_cast<char>((h.size() >> (8 * i)) & 0xFF);
    return bytes_of(len + h + data);
  };
  const std::string f32_data("\x00\x00\x80\x3F\x00\x00\x00\xC0", 8);  // 1.0f, -2.0f
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::parse_safetensors(file_of(header, "\x80\x3F\0\0" + f32_data)); },
                                            {"tensor 'bias'", "needs 2 bytes", "[0,4] hold 4"}));
  header.replace(header.find("[0, 4]"), 6, "[0, 2]");
  header.replace(header.find("[4, 12]"), 7, "[2, 10]");
  const auto f = io::parse_safetensors(file_of(header, std::string("\x80\x3F", 2) + f32_data));
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "bias");  // data order
  EXPECT_EQ(static_cast<float>(io::get<tessel::bfloat16, shape<>>(f, "bias")[0]), 1.0f);
  const auto w = io::get<float, shape<2>>(f, "weight");
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_EQ(w[1], -2.0f);
}

TEST(Safetensors, WritesTheExactLayout) {
  io::safetensors_file f;
  f.put("a", tessel::tensor<float, shape<2>>{1.0f, -2.0f});
  f.metadata["k"] = "v";
  const std::string header = R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string expected(8, '\0');
  expected[0] = static_cast<char>(padded.size());
  expected += padded + std::string("\x00\x00\x80\x3F\x00\x00\x00\xC0", 8);
  EXPECT_EQ(io::serialize_safetensors(f), bytes_of(expected));
}

TEST(Safetensors, GetNamesTheTensorAndBothTypes) {
  io::safetensors_file f;
  f.source = "model.safetensors";
  f.put("layer1.w", sample<tessel::bfloat16, shape<3, 2>>());
  f.put("layer1.b", sample<float, shape<2>>());
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::get<float, shape<2, 3>>(f, "layer1.w"); },
                                            {"tessel::io::get: 'model.safetensors': tensor 'layer1.w'",
                                             "expected f32[2,3], found bf16[3,2] (BF16 [3,2])"}));
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::get<tessel::bfloat16, shape<6>>(f, "layer1.w"); },
                                            {"expected bf16[6], found bf16[3,2]"}));
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::get<float, shape<>>(f, "layer1.b"); },
                                            {"expected f32[], found f32[2]"}));
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::get<float, shape<2>>(f, "layer2.w"); },
                                            {"no tensor named 'layer2.w'", "holds 2 tensors: 'layer1.w', 'layer1.b'"}));
  f.tensors.push_back({"u8", "U8", {2}, {std::byte{1}, std::byte{2}}});
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::get<std::uint32_t, shape<2>>(f, "u8"); },
                                            {"expected u32[2], found u8[2] (U8 [2])"}));
}

TEST(Safetensors, WriterRefusesWhatReadersWouldReject) {
  const auto refused = [](io::safetensors_file f, std::string_view what) {
    EXPECT_TRUE(throws_with<std::invalid_argument>([&] { (void)io::serialize_safetensors(f); }, {what})) << what;
  };
  refused({{{"a", "F32", {2}, std::vector<std::byte>(7)}}, {}, ""}, "tensor 'a': shape [2] of F32 does not match its 7 bytes");
  refused({{{"a", "F17", {2}, {}}}, {}, ""}, "unsupported dtype \"F17\"");
  refused({{{"__metadata__", "U8", {}, {std::byte{0}}}}, {}, ""}, "reserved");
  refused({{{"a\xFF", "U8", {}, {std::byte{0}}}}, {}, ""}, "not valid UTF-8");
  refused({{{"a", "U8", {}, {std::byte{0}}}, {"a", "U8", {}, {std::byte{1}}}}, {}, ""}, "two tensors are named 'a'");
  refused({{{"p", "BOOL", {1}, {std::byte{2}}}}, {}, ""}, "BOOL element 0 is byte 2");
  refused({{}, {{"k", "\xC3"}}, ""}, "not valid UTF-8");
  io::safetensors_file f;
  f.put("x", sample<float, shape<1>>());
  EXPECT_THROW(f.put("x", sample<float, shape<1>>()), std::invalid_argument);
}

TEST(Safetensors, MissingFile) {
  temp_dir dir;
  EXPECT_TRUE(throws_with<io::format_error>([&] { (void)io::read_safetensors(dir / "none.safetensors"); },
                                            {"tessel::io::read_safetensors", "none.safetensors", "cannot open"}));
}

TEST(Safetensors, FailedWritesLeaveTheOldFile) {
  temp_dir dir;
  const auto path = dir / "m.safetensors";
  io::safetensors_file old;
  old.put("w", sample<float, shape<2, 2>>());
  io::write_safetensors(path, old);
  const auto before = read_bytes(path);

  io::safetensors_file bad;
  bad.tensors.push_back({"w", "F32", {3}, std::vector<std::byte>(4)});
  EXPECT_THROW(io::write_safetensors(path, bad), std::invalid_argument);
  EXPECT_EQ(read_bytes(path), before);

  // Something in the way of the temporary file.
  std::filesystem::create_directory(io::atomic_temp_path(path));
  EXPECT_THROW(io::write_safetensors(path, every_dtype()), std::system_error);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_TRUE(std::filesystem::is_directory(io::atomic_temp_path(path)));  // not ours to remove
}

}  // namespace
