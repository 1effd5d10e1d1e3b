// bucket_by_length: routing by length, padding and masks, the end of an epoch, overlong sequences,
// and restoring a position whose buckets hold sequences.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "tessel/data/pipeline.hpp"

namespace {

namespace td = tessel::data;
using tessel::int32;
using tessel::shape;
using tessel::tensor;

using seq = std::vector<int32>;

// Sequence i has length lengths[i] and elements 100 * i + 1, 100 * i + 2, ...
std::vector<seq> sequences(const std::vector<std::size_t>& lengths) {
  std::vector<seq> out;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    seq s;
    for (std::size_t j = 0; j < lengths[i]; ++j) s.push_back(static_cast<int32>(100 * i + j + 1));
    out.push_back(s);
  }
  return out;
}

// A batch as text: "L4 B2 count 2: [1 2 3 _] [101 _ _ _]" (_ for a masked-out element), checking that
// padding is zero, the mask matches lengths and row_mask matches count.
template <class Batch>
std::string describe(const Batch& b) {
  std::string out = "L" + std::to_string(Batch::length) + " B" + std::to_string(Batch::batch_size) + " count " +
                    std::to_string(b.count) + ":";
  for (std::size_t r = 0; r < Batch::batch_size; ++r) {
    EXPECT_EQ(b.row_mask[r], r < b.count);
    if (r >= b.count) {
      EXPECT_EQ(b.lengths[r], 0);
    }
    out += " [";
    for (std::size_t j = 0; j < Batch::length; ++j) {
      const bool real = j < static_cast<std::size_t>(b.lengths[r]);
      EXPECT_EQ(b.mask(r, j), real);
      if (!real) {
        EXPECT_EQ(b.tokens(r, j), 0);
      }
      if (j) out += ' ';
      out += real ? std::to_string(b.tokens(r, j)) : std::string("_");
    }
    out += "]";
  }
  return out;
}

template <class S>
std::vector<std::string> epoch_text(S& s) {
  std::vector<std::string> out;
  while (auto b = s.next()) out.push_back(std::visit([](const auto& x) { return describe(x); }, *b));
  return out;
}

TEST(Bucket, RoutesPadsAndMasks) {
  auto s = td::from_vector(sequences({3, 5, 1, 8, 6, 2, 7})) | td::bucket_by_length<td::bucket<4, 2>, td::bucket<8, 3>>();
  static_assert(std::is_same_v<decltype(s)::value_type,
                               std::variant<td::sequence_batch<int32, 2, 4>, td::sequence_batch<int32, 3, 8>>>);
  const std::vector<std::string> expected = {
      "L4 B2 count 2: [1 2 3 _] [201 _ _ _]",
      "L8 B3 count 3: [101 102 103 104 105 _ _ _] [301 302 303 304 305 306 307 308] [401 402 403 404 405 406 _ _]",
      // the end of the epoch: the incomplete buckets, shortest first
      "L4 B2 count 1: [501 502 _ _] [_ _ _ _]",
      "L8 B3 count 1: [601 602 603 604 605 606 607 _] [_ _ _ _ _ _ _ _] [_ _ _ _ _ _ _ _]",
  };
  EXPECT_EQ(epoch_text(s), expected);
  EXPECT_EQ(epoch_text(s), expected);  // and again in epoch 1
}

TEST(Bucket, DropRemainderDropsIncompleteBuckets) {
  auto s = td::from_vector(sequences({3, 5, 1, 8, 6, 2, 7})) |
           td::bucket_by_length<td::bucket<4, 2>, td::bucket<8, 3>>({.rem = td::drop_remainder});
  EXPECT_EQ(epoch_text(s).size(), 2u);
}

TEST(Bucket, TooLongIsAnErrorOrTruncated) {
  auto strict = td::from_vector(sequences({2, 9})) | td::bucket_by_length<td::bucket<4, 2>, td::bucket<8, 3>>();
  try {
    (void)strict.next();
    ADD_FAILURE() << "no exception";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("index 1 of epoch 0 has length 9, longer than the largest bucket (8)"), std::string::npos)
        << e.what();
  }
  auto truncating = td::from_vector(sequences({9})) |
                    td::bucket_by_length<td::bucket<4, 2>, td::bucket<8, 3>>({.overlong = td::too_long::truncate});
  EXPECT_EQ(epoch_text(truncating), (std::vector<std::string>{
                                        "L8 B3 count 1: [1 2 3 4 5 6 7 8] [_ _ _ _ _ _ _ _] [_ _ _ _ _ _ _ _]"}));
}

TEST(Bucket, EveryExampleOnceAcrossShardedProcesses) {
  std::vector<std::size_t> lengths;
  for (std::size_t i = 0; i < 50; ++i) lengths.push_back(1 + (i * 7) % 8);
  const auto data = sequences(lengths);
  for (const std::size_t count : {1u, 2u, 3u}) {
    std::multiset<int32> firsts;
    for (std::size_t p = 0; p < count; ++p) {
      auto s = td::from_vector(data) | td::shuffle(tessel::random::key_from_seed(3)) | td::shard(p, count) |
               td::bucket_by_length<td::bucket<4, 2>, td::bucket<8, 3>>();
      while (auto b = s.next())
        std::visit([&](const auto& x) {
          for (std::size_t r = 0; r < x.count; ++r) firsts.insert(x.tokens(r, 0));
        }, *b);
    }
    std::multiset<int32> expected;
    for (std::size_t i = 0; i < data.size(); ++i) expected.insert(static_cast<int32>(100 * i + 1));
    EXPECT_EQ(firsts, expected) << count << " processes";
  }
}

TEST(Bucket, ResumeWithSequencesHeldInBuckets) {
  std::vector<std::size_t> lengths;
  for (std::size_t i = 0; i < 31; ++i) lengths.push_back(1 + (i * 5) % 8);
  const auto data = sequences(lengths);
  const auto make = [&] {
    return td::from_vector(data) | td::shuffle(tessel::random::key_from_seed(11)) |
           td::bucket_by_length<td::bucket<4, 2>, td::bucket<8, 3>>();
  };
  bool saw_pending = false, saw_flush = false;
  for (std::size_t before = 0; before < 16; ++before) {
    auto original = make();
    for (std::size_t i = 0; i < before; ++i) (void)original.next();
    const td::stream_position p = original.position();
    saw_pending = saw_pending || !p.pending.empty();
    saw_flush = saw_flush || (p.index == data.size() && !p.pending.empty());
    auto resumed = make();
    resumed.restore(td::stream_position::from_json(p.to_json()));
    EXPECT_EQ(resumed.position(), p);
    for (std::size_t i = 0; i < 20; ++i) {
      auto a = original.next(), b = resumed.next();
      ASSERT_EQ(a.has_value(), b.has_value()) << "after " << p.to_json() << ", call " << i;
      if (a) {
        ASSERT_EQ(std::visit([](const auto& x) { return describe(x); }, *a), std::visit([](const auto& x) { return describe(x); }, *b));
      }
    }
  }
  EXPECT_TRUE(saw_pending);
  EXPECT_TRUE(saw_flush);  // a position saved while incomplete buckets were being delivered
}

}  // namespace
