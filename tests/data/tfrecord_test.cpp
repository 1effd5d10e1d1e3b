// TFRecord files and tf.train.Examples (data/tfrecord.hpp), judged by TensorFlow: the fixtures in
// tests/data/tfrecord were written by TensorFlow 2.21 (make_fixtures.py there), raw and GZIP, with the order
// tf.data's interleave reads its shards in; then round trips, every kind of damage with its message, the
// split of files between processes, and the source through the pipeline's shuffle and saved positions.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "idx_test_util.hpp"
#include "tessel/data/dataset.hpp"
#include "tessel/data/tfrecord.hpp"

#ifndef TESSEL_TFRECORD_FIXTURES
#error "TESSEL_TFRECORD_FIXTURES: the folder of the TensorFlow-written fixtures (tests/data/CMakeLists.txt sets it)"
#endif

namespace {

namespace td = tessel::data;
namespace fs = std::filesystem;
using idx_test::temp_dir;
using idx_test::throws_format_error;

const fs::path fixtures = TESSEL_TFRECORD_FIXTURES;

std::vector<std::string> lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const fs::path& p, const std::string& bytes) {
  idx_test::write_bytes(p, std::as_bytes(std::span(bytes.data(), bytes.size())));
}

// The three examples make_fixtures.py writes.
void expect_fixture_examples(const std::vector<std::string>& records) {
  ASSERT_EQ(records.size(), 3u);
  const td::example a = td::parse_example(records[0]);
  EXPECT_EQ(a.floats("image"), (std::vector<float>{0.0f, 0.5f, 1.0f, -2.25f}));
  EXPECT_EQ(a.int64s("label"), (std::vector<std::int64_t>{7}));
  EXPECT_EQ(a.bytes("name"), (std::vector<std::string>{"first"}));
  const td::example b = td::parse_example(records[1]);
  EXPECT_EQ(b.floats("image"), (std::vector<float>{3.5e-3f}));
  EXPECT_EQ(b.int64s("label"), (std::vector<std::int64_t>{-1, std::int64_t{1} << 40, -(std::int64_t{1} << 62)}));
  EXPECT_EQ(b.bytes("name"), (std::vector<std::string>{"", std::string("\xff\0bytes", 7)}));
  const td::example c = td::parse_example(records[2]);
  EXPECT_EQ(c.int64s("label"), (std::vector<std::int64_t>{0}));
  EXPECT_TRUE(c.floats("empty").empty());
  EXPECT_EQ(c.features.size(), 2u);
}

TEST(TfRecord, ReadsWhatTensorFlowWrote) { expect_fixture_examples(td::read_tfrecords(fixtures / "examples.tfrecord")); }

TEST(TfRecord, ReadsWhatTensorFlowWroteWithGzip) {
  expect_fixture_examples(td::read_tfrecords(fixtures / "examples.tfrecord.gz"));
}

TEST(TfRecord, WritesWhatTensorFlowWrites) {
  // The same records written by tessel are TensorFlow's file byte for byte; an example serialized by
  // tessel reads back as the same example (protobuf leaves the order of a map's entries open: TensorFlow
  // wrote these in another order than tessel's, which is by name).
  const std::vector<std::string> records = td::read_tfrecords(fixtures / "examples.tfrecord");
  temp_dir dir;
  td::write_tfrecords(dir / "again.tfrecord", records);
  EXPECT_EQ(bytes_of(dir / "again.tfrecord"), bytes_of(fixtures / "examples.tfrecord"));
  // GZIP: one gzip stream (zlib's bytes, not TensorFlow's), the same records read back.
  td::write_tfrecords(dir / "again.tfrecord.gz", records, {.gzip = true});
  const std::string gz = bytes_of(dir / "again.tfrecord.gz");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1fu);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8bu);
  EXPECT_EQ(td::read_tfrecords(dir / "again.tfrecord.gz"), records);
  for (const std::string& r : records) {
    const td::example e = td::parse_example(r);
    EXPECT_EQ(td::parse_example(td::serialize_example(e)).features, e.features);
  }
}

TEST(TfRecord, Crc32cKnownValues) {
  // RFC 3720, B.4: 32 bytes of zeros, of ones, and the bytes 0, 1, ..., 31.
  std::vector<std::byte> zeros(32, std::byte{0}), ones(32, std::byte{0xff}), up(32);
  for (std::size_t i = 0; i < 32; ++i) up[i] = static_cast<std::byte>(i);
  EXPECT_EQ(td::crc32c(zeros), 0x8a9136aau);
  EXPECT_EQ(td::crc32c(ones), 0x62a8ab43u);
  EXPECT_EQ(td::crc32c(up), 0x46dd794eu);
  const std::string text = "123456789";
  EXPECT_EQ(td::crc32c(std::as_bytes(std::span(text.data(), text.size()))), 0xe3069283u);
}

TEST(TfRecord, InterleavesAsTfData) {
  std::vector<fs::path> files;
  for (int f = 0; f < 5; ++f) files.push_back(fixtures / ("shard-" + std::to_string(f) + ".tfrecord"));
  for (const std::size_t cycle : {1, 2, 3, 5}) {
    const td::tfrecord_dataset d = td::from_tfrecord(files, {.cycle_length = cycle});
    std::vector<std::string> got;
    for (std::size_t i = 0; i < d.size(); ++i) got.push_back(d.get(0, i));
    EXPECT_EQ(got, lines(fixtures / ("interleave-c" + std::to_string(cycle) + ".txt"))) << "cycle_length " << cycle;
  }
}

TEST(TfRecord, EachProcessReadsItsOwnFiles) {
  std::vector<fs::path> files;
  for (int f = 0; f < 5; ++f) files.push_back(fixtures / ("shard-" + std::to_string(f) + ".tfrecord"));
  std::vector<std::string> all;
  for (std::size_t p = 0; p < 2; ++p) {
    const td::tfrecord_dataset d = td::from_tfrecord(files, {.cycle_length = 2, .process = p, .processes = 2});
    ASSERT_EQ(d.files().size(), p == 0 ? 3u : 2u);
    EXPECT_EQ(d.files()[0], files[p]);
    for (std::size_t i = 0; i < d.size(); ++i) {
      all.push_back(d.get(0, i));
      const auto [file, record] = d.where(i);
      EXPECT_EQ(all.back(), "f" + std::to_string(p + 2 * file) + "-r" + std::to_string(record));
    }
  }
  EXPECT_EQ(all.size(), 10u);  // every record once, between the two processes
  EXPECT_THROW(td::from_tfrecord(files, {.process = 2, .processes = 2}), std::invalid_argument);
  EXPECT_THROW(td::from_tfrecord({files[0]}, {.process = 0, .processes = 2}), std::invalid_argument);
  EXPECT_THROW(td::from_tfrecord(files, {.cycle_length = 0}), std::invalid_argument);
  EXPECT_THROW(td::from_tfrecord({}, {}), std::invalid_argument);
}

TEST(TfRecord, ShuffledAndResumedThroughThePipeline) {
  std::vector<fs::path> files;
  for (int f = 0; f < 5; ++f) files.push_back(fixtures / ("shard-" + std::to_string(f) + ".tfrecord"));
  auto make = [&] {
    return td::iterate(td::from_tfrecord(files, {.cycle_length = 2}) | td::shuffle(tessel::random::key_from_seed(3)));
  };
  auto whole = make();
  std::vector<std::string> first;
  while (auto r = whole.next()) first.push_back(*r);
  ASSERT_EQ(first.size(), 10u);
  EXPECT_NE(first, lines(fixtures / "interleave-c2.txt"));  // shuffled
  auto partial = make();
  for (int i = 0; i < 4; ++i) partial.next();
  const td::stream_position at = partial.position();
  auto resumed = make();
  resumed.restore(at);
  std::vector<std::string> rest;
  while (auto r = resumed.next()) rest.push_back(*r);
  EXPECT_EQ(rest, std::vector<std::string>(first.begin() + 4, first.end()));
}

TEST(TfRecord, DamageIsNamedWithTheRecordAndItsOffset) {
  const std::string good = bytes_of(fixtures / "examples.tfrecord");
  const std::size_t first = 12 + td::read_tfrecords(fixtures / "examples.tfrecord")[0].size() + 4;  // record 1's offset
  temp_dir dir;
  std::string bad = good;
  bad[first + 3] = static_cast<char>(bad[first + 3] ^ 1);  // record 1's length
  write(dir / "length", bad);
  EXPECT_TRUE(throws_format_error([&] { td::read_tfrecords(dir / "length"); },
                                  {"read_tfrecords", "length", "record 1 at byte " + std::to_string(first), "the length's CRC does not match"}));
  bad = good;
  bad[first + 12 + 5] = static_cast<char>(bad[first + 12 + 5] ^ 0x40);  // a byte of record 1's data
  write(dir / "data", bad);
  EXPECT_TRUE(throws_format_error([&] { td::read_tfrecords(dir / "data"); },
                                  {"record 1 at byte " + std::to_string(first), "the data's CRC does not match"}));
  write(dir / "cut", good.substr(0, good.size() - 2));
  EXPECT_TRUE(throws_format_error([&] { td::read_tfrecords(dir / "cut"); },
                                  {"record 2", "truncated: expected the data's 4-byte CRC, found 2 bytes"}));
  write(dir / "cut_header", good.substr(0, first + 5));
  EXPECT_TRUE(throws_format_error([&] { td::read_tfrecords(dir / "cut_header"); },
                                  {"record 1", "truncated: expected a 12-byte header", "found 5 bytes"}));
  write(dir / "text", "not a tfrecord file at all\n");
  EXPECT_TRUE(throws_format_error([&] { td::read_tfrecords(dir / "text"); },
                                  {"record 0 at byte 0", "not a TFRecord file, or damaged"}));
  EXPECT_TRUE(throws_format_error([&] { td::read_tfrecords(fixtures / "examples.tfrecord", {.max_record_bytes = 16}); },
                                  {"record 0", "over max_record_bytes (16)"}));
  EXPECT_TRUE(throws_format_error([&] { td::read_tfrecords(dir / "missing"); }, {"missing", "cannot open"}));
  std::string gz = bytes_of(fixtures / "examples.tfrecord.gz");
  gz[gz.size() / 2] = static_cast<char>(gz[gz.size() / 2] ^ 0x10);
  write(dir / "gz", gz);
  EXPECT_TRUE(throws_format_error([&] { td::read_tfrecords(dir / "gz"); }, {"gz"}));
  // The source names the file too, and keeps nothing of a damaged set.
  EXPECT_TRUE(throws_format_error([&] { td::from_tfrecord({fixtures / "examples.tfrecord", dir / "data"}); }, {"data", "record 1"}));
}

TEST(TfRecord, MalformedExamplesSayWhere) {
  EXPECT_TRUE(throws_format_error([] { td::parse_example(std::string("\x0a\x05\x0a\x03", 4)); },
                                  {"parse_example", "Example", "runs past the end"}));
  const td::example e = td::parse_example(td::read_tfrecords(fixtures / "examples.tfrecord")[0]);
  EXPECT_TRUE(throws_format_error([&] { (void)e.int64s("image"); }, {"'image' is a float_list, not an int64_list"}));
  EXPECT_TRUE(throws_format_error([&] { (void)e.floats("pixels"); }, {"no feature 'pixels'", "image, label, name"}));
  // Unknown fields are skipped, as protobuf does: a field 7 (varint) before the features.
  const std::string with_unknown = std::string("\x38\x2a", 2) + td::serialize_example(e);
  EXPECT_EQ(td::parse_example(with_unknown).floats("image"), e.floats("image"));
}

}  // namespace
