// Fortune files (data/text.hpp): parsing of small files written here, the reader's errors, the
// train/validation split, byte tokens, and chunks through bucket_by_length with no byte lost; then the
// real files of Debian's fortunes packages when they are installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "idx_test_util.hpp"
#include "tessel/data/bucket.hpp"
#include "tessel/data/source.hpp"
#include "tessel/data/text.hpp"

namespace {

namespace td = tessel::data;
using idx_test::temp_dir;
using idx_test::throws_format_error;

void write_text(const std::filesystem::path& p, std::string_view s) {
  idx_test::write_bytes(p, std::as_bytes(std::span(s.data(), s.size())));
}

std::vector<std::string> texts(const td::text_corpus& c) {
  std::vector<std::string> out;
  for (const auto& r : c.records) out.push_back(r.text);
  return out;
}

TEST(FortuneFile, SeparatorsTrailingPercentAndEmptyRecords) {
  temp_dir dir;
  write_text(dir / "f", "one\n%\ntwo\n\nlines\n%\n%\nthree\n%\n");
  const td::text_corpus c = td::read_fortunes(dir / "f");
  EXPECT_EQ(texts(c), (std::vector<std::string>{"one", "two\n\nlines", "three"}));
  EXPECT_EQ(c.empty_records, 1u);
  ASSERT_EQ(c.records.size(), 3u);
  EXPECT_EQ(c.records[0].line, 1u);
  EXPECT_EQ(c.records[1].line, 3u);
  EXPECT_EQ(c.records[2].line, 8u);
}

TEST(FortuneFile, NoFinalSeparatorNoFinalNewlineAndLeadingBlankLine) {
  temp_dir dir;
  write_text(dir / "a", "a\n%\nb");
  EXPECT_EQ(texts(td::read_fortunes(dir / "a")), (std::vector<std::string>{"a", "b"}));
  write_text(dir / "b", "\n x\n%\n  %  \n%");  // a blank first line is kept; "  %  " is text, not a separator
  EXPECT_EQ(texts(td::read_fortunes(dir / "b")), (std::vector<std::string>{"\n x", "  %  "}));
}

TEST(FortuneFile, CrLfLineEnds) {
  temp_dir dir;
  write_text(dir / "f", "a\r\nb\r\n%\r\nc\rd\r\n%\r\n");
  EXPECT_EQ(texts(td::read_fortunes(dir / "f")), (std::vector<std::string>{"a\nb", "c\rd"}));  // a lone CR is kept
}

TEST(FortuneFile, BadFilesAreErrorsNamingFileOffsetAndLine) {
  temp_dir dir;
  write_text(dir / "empty", "");
  EXPECT_TRUE(throws_format_error([&] { td::read_fortunes(dir / "empty"); }, {"tessel::data::read_fortunes", "'", "empty'", "the file is empty"}));
  write_text(dir / "nul", std::string("ab\ncd\0e\n", 8));
  EXPECT_TRUE(throws_format_error([&] { td::read_fortunes(dir / "nul"); }, {"nul'", "byte 5 (line 2): a NUL byte"}));
  write_text(dir / "latin1", "caf\xE9\n%\n");  // Latin-1 e-acute
  EXPECT_TRUE(throws_format_error([&] { td::read_fortunes(dir / "latin1"); }, {"byte 3 (line 1): invalid UTF-8 (byte 0xE9)", "iconv"}));
  write_text(dir / "overlong", "x\n%\n\xC0\xAF\n");  // an overlong '/'
  EXPECT_TRUE(throws_format_error([&] { td::read_fortunes(dir / "overlong"); }, {"byte 4 (line 3): invalid UTF-8 (byte 0xC0)"}));
  const td::text_corpus raw = td::read_fortunes(dir / "latin1", {.validate_utf8 = false});
  EXPECT_EQ(texts(raw), (std::vector<std::string>{"caf\xE9"}));
  write_text(dir / "utf8", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(texts(td::read_fortunes(dir / "utf8")), (std::vector<std::string>{"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"}));
  EXPECT_TRUE(throws_format_error([&] { td::read_fortunes(dir / "missing"); }, {"missing'", "cannot open"}));
  std::filesystem::create_directories(dir / "sub");
  write_text(dir / "sub" / "x.dat", "index");
  EXPECT_TRUE(throws_format_error([&] { td::read_fortunes(dir / "sub"); }, {"sub'", "holds no fortune files"}));
}

TEST(FortuneDirectory, ReadsRegularFilesInNameOrderSkippingIndexesAndLinks) {
  temp_dir dir;
  write_text(dir / "b", "b1\n%\nb2\n%\n");
  write_text(dir / "a", "a1\n%\n");
  write_text(dir / "a.dat", std::string("\0\0\0\2", 4));  // strfile's index: binary, not read
  std::filesystem::create_symlink("a", dir / "a.u8");
  const td::text_corpus c = td::read_fortunes(dir.path());
  EXPECT_EQ(texts(c), (std::vector<std::string>{"a1", "b1", "b2"}));
  ASSERT_EQ(c.files.size(), 2u);
  EXPECT_EQ(c.files[0].filename(), "a");
  EXPECT_EQ(c.records[2].file, 1u);
}

TEST(ByteTokens, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::vector<tessel::int32> t = td::byte_tokens(all);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(t[static_cast<std::size_t>(b)], b);
  EXPECT_EQ(td::text_of_tokens(t), all);
  const std::vector<tessel::int32> bad{65, 256};
  EXPECT_THROW(td::text_of_tokens(bad), std::out_of_range);
}

std::vector<td::text_record> synthetic_records(std::size_t n, std::size_t max_length, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<td::text_record> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t len = std::uniform_int_distribution<std::size_t>(1, max_length)(gen);
    for (std::size_t k = 0; k < len; ++k) out[i].text += static_cast<char>(std::uniform_int_distribution<int>(1, 255)(gen));
  }
  return out;
}

TEST(TextSplit, DeterministicDisjointAndCompleteAndDuplicatesStayTogether) {
  std::vector<td::text_record> records = synthetic_records(2000, 40, 1);
  records.push_back(records[7]);  // a duplicate: same side as record 7
  const td::text_split a = td::split_records(records, {.validation = 0.1, .seed = 3});
  const td::text_split b = td::split_records(records, {.validation = 0.1, .seed = 3});
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.validation, b.validation);
  std::vector<std::size_t> all = a.train;
  all.insert(all.end(), a.validation.begin(), a.validation.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), records.size());
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i);  // each record on exactly one side
  EXPECT_GT(a.validation.size(), 150u);
  EXPECT_LT(a.validation.size(), 250u);
  const bool seven = std::binary_search(a.validation.begin(), a.validation.end(), std::size_t{7});
  EXPECT_EQ(std::binary_search(a.validation.begin(), a.validation.end(), records.size() - 1), seven);
  EXPECT_NE(td::split_records(records, {.validation = 0.1, .seed = 4}).validation, a.validation);
  EXPECT_TRUE(td::split_records(records, {.validation = 0.0}).validation.empty());
  EXPECT_TRUE(td::split_records(records, {.validation = 1.0}).train.empty());
  EXPECT_THROW(td::split_records(records, {.validation = 1.5}), std::invalid_argument);
}

// Every byte of every record goes in and comes out of bucket_by_length, in order: the rows delivered
// are exactly the chunks (as a multiset), and each record is its chunks joined in piece order.
TEST(TextChunks, NoByteLostThroughBucketing) {
  const std::vector<td::text_record> records = synthetic_records(300, 50, 2);
  const td::chunked_text c = td::chunk_records(records, 16);
  std::size_t bytes_in = 0;
  for (const auto& r : records) bytes_in += r.text.size();
  std::vector<std::string> joined(records.size());
  for (std::size_t k = 0; k < c.chunks.size(); ++k) {
    EXPECT_LE(c.chunks[k].size(), 16u);
    if (k > 0 && c.record[k] == c.record[k - 1]) {
      EXPECT_EQ(c.piece[k], c.piece[k - 1] + 1);
    } else {
      EXPECT_EQ(c.piece[k], 0u);
    }
    joined[c.record[k]] += td::text_of_tokens(c.chunks[k]);
  }
  for (std::size_t r = 0; r < records.size(); ++r) EXPECT_EQ(joined[r], records[r].text) << "record " << r;

  std::map<std::vector<tessel::int32>, int> expected;
  for (const auto& chunk : c.chunks) ++expected[chunk];
  auto s = td::from_vector(c.chunks) | td::bucket_by_length<td::bucket<4, 3>, td::bucket<8, 5>, td::bucket<16, 4>>();
  std::size_t bytes_out = 0, rows = 0;
  while (auto b = s.next()) {
    std::visit(
        [&](const auto& batch) {
          constexpr std::size_t L = std::remove_cvref_t<decltype(batch)>::length;
          for (std::size_t r = 0; r < batch.count; ++r) {
            const auto n = static_cast<std::size_t>(batch.lengths[r]);
            std::vector<tessel::int32> row(batch.tokens.data() + r * L, batch.tokens.data() + r * L + n);
            for (std::size_t j = 0; j < L; ++j) {
              EXPECT_EQ(batch.mask[r * L + j], j < n);
              if (j >= n) {
                EXPECT_EQ(batch.tokens[r * L + j], 0);
              }
            }
            --expected[row];
            bytes_out += n;
            ++rows;
          }
        },
        *b);
  }
  EXPECT_EQ(bytes_out, bytes_in);
  EXPECT_EQ(rows, c.chunks.size());
  for (const auto& [chunk, count] : expected) EXPECT_EQ(count, 0) << "a chunk of " << chunk.size() << " bytes";
}

TEST(TextChunks, RejectsAZeroLengthAndABadIndex) {
  const std::vector<td::text_record> records = synthetic_records(3, 5, 3);
  EXPECT_THROW(td::chunk_records(records, 0), std::invalid_argument);
  const std::vector<std::size_t> which{0, 3};
  EXPECT_THROW(td::chunk_records(records, which, 4), std::out_of_range);
}

TEST(Words, LetterRunsLowerCasedWithInnerApostrophes) {
  EXPECT_EQ(td::words_of("Don't PANIC -- it's' 'a' b2c\tRock'n'roll!"), (std::vector<std::string>{"don't", "panic", "it's", "a", "b", "c", "rock'n'roll"}));
  EXPECT_TRUE(td::words_of(" 42 -- ").empty());
  EXPECT_EQ(td::words_of("caf\xc3\xa9s"), (std::vector<std::string>{"caf", "s"}));  // ASCII letters only
}

TEST(Words, VocabularyKeepsWordsSeenTwiceAndCountsTheKnownLettersOfASample) {
  const std::vector<td::text_record> records{{"The cat sat."}, {"the CAT ran; a dog sat"}, {"Zyzzyva"}, {"not this one: zyzzyva"}};
  const std::vector<std::size_t> train{0, 1, 2};
  const td::vocabulary v(records, train);
  EXPECT_EQ(v.size(), 3u);  // the, cat, sat: seen twice; ran, a, dog, zyzzyva once in the train records
  EXPECT_TRUE(v.contains("cat"));
  EXPECT_FALSE(v.contains("dog"));
  EXPECT_FALSE(v.contains("zyzzyva"));
  const auto c = v.known_letters("the cat doggy sat. The ca");  // "ca" is unfinished: the text ends in it
  EXPECT_EQ(c.known, 12u);  // the cat sat the
  EXPECT_EQ(c.total, 17u);  // and doggy
  EXPECT_DOUBLE_EQ(c.share(), 12.0 / 17.0);
  EXPECT_EQ(v.known_letters("the cat.").total, 6u);  // a finished last word counts
  EXPECT_EQ(v.known_letters("don't.").total, 4u);    // letters, not the apostrophe
  EXPECT_EQ(v.known_letters("").share(), 0.0);
  const std::vector<std::size_t> past{0, 4};
  EXPECT_THROW(td::vocabulary(records, past), std::out_of_range);
}

// Debian's fortunes + fortunes-min (or $TESSEL_FORTUNES_DIR): what a language model would train on.
TEST(FortunePackages, ReadsTheInstalledFiles) {
  const auto dir = td::fortunes_dir();
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << "no fortunes in " << dir << " (install fortunes and fortunes-min, or set TESSEL_FORTUNES_DIR)";
  const td::text_corpus c = td::read_fortunes(dir);
  std::vector<std::size_t> lengths;
  std::size_t bytes = 0;
  for (const auto& r : c.records) {
    lengths.push_back(r.text.size());
    bytes += r.text.size();
  }
  std::sort(lengths.begin(), lengths.end());
  ASSERT_FALSE(lengths.empty());
  const std::size_t median = lengths[lengths.size() / 2];
  const td::text_split split = td::split_records(c.records, {.validation = 0.05, .seed = 0});
  const td::chunked_text chunks = td::chunk_records(c.records, 512);
  constexpr std::size_t buckets[] = {64, 128, 256, 512};
  std::size_t per_bucket[4] = {}, padded[4] = {};
  for (const auto& ch : chunks.chunks) {
    std::size_t b = 0;
    while (ch.size() > buckets[b]) ++b;
    ++per_bucket[b];
    padded[b] += buckets[b] - ch.size();
  }
  std::cout << "fortunes: " << c.files.size() << " files, " << c.records.size() << " records (" << c.empty_records
            << " empty skipped), " << bytes << " bytes, median length " << median << ", longest " << lengths.back()
            << "; split 5%: " << split.train.size() << " train, " << split.validation.size() << " validation\n"
            << "chunks of at most 512: " << chunks.chunks.size() << "; per bucket (chunks, padding bytes):";
  for (std::size_t b = 0; b < 4; ++b) std::cout << " " << buckets[b] << ": " << per_bucket[b] << ", " << padded[b] << ";";
  std::cout << "\n";
  // Debian 12's fortunes 1:1.99.1-7.3 with fortunes-min: 43 files, 15217 records (strfile's *.dat agree).
  EXPECT_GT(c.records.size(), 10000u);
  EXPECT_GT(median, 50u);
  EXPECT_LT(median, 200u);
  EXPECT_EQ(split.train.size() + split.validation.size(), c.records.size());
}
}  // namespace
