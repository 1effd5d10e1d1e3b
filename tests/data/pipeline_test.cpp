// The input pipeline's datasets and batching: sources, map, shuffle (JAX's permutation), shard across
// simulated processes, batch with padding or dropping, and positions saved and restored.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "idx_test_util.hpp"
#include "tessel/data/pipeline.hpp"
#include "tessel/io/atomic_file.hpp"
#include "tessel/random/distributions.hpp"

namespace {

namespace td = tessel::data;
namespace tr = tessel::random;
using tessel::int32;
using tessel::shape;
using tessel::tensor;

// Indices are std::size_t, not a dtype: a pipeline maps them to examples before batching.
const auto as_int32 = [](std::size_t i) { return static_cast<int32>(i); };

// Every element of one epoch of a stream (consumes the end-of-epoch nullopt).
template <class S>
std::vector<typename S::value_type> one_epoch(S& s) {
  std::vector<typename S::value_type> out;
  while (auto x = s.next()) out.push_back(std::move(*x));
  return out;
}

template <class D>
std::vector<std::size_t> indices_of(D dataset) {
  auto s = td::iterate(std::move(dataset));
  return one_epoch(s);
}

TEST(Source, IndicesVectorAndSpan) {
  EXPECT_EQ(indices_of(td::from_indices(4)), (std::vector<std::size_t>{0, 1, 2, 3}));
  auto v = td::iterate(td::from_vector(std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(one_epoch(v), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(one_epoch(v), (std::vector<std::string>{"a", "b"}));  // epoch 1 after the nullopt
  const std::vector<float> xs{1.5f, 2.5f};
  auto s = td::iterate(td::from_span(std::span(xs)));
  EXPECT_EQ(one_epoch(s), xs);
  EXPECT_THROW(td::from_indices(3).get(0, 3), std::out_of_range);
}

TEST(Source, EmptyDatasetGivesEmptyEpochs) {
  auto s = td::iterate(td::from_indices(0));
  EXPECT_FALSE(s.next());
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.position().epoch, 2u);
}

TEST(Map, OnDatasetsAndStreams) {
  auto d = td::from_indices(3) | td::map([](std::size_t i) { return static_cast<int>(i * 10); });
  static_assert(td::Dataset<decltype(d)>);
  EXPECT_EQ(d.get(0, 2), 20);
  auto s = td::from_indices(3) | td::map(as_int32) | td::batch<2>() | td::map([](const auto& b) { return b.count; });
  static_assert(td::Stream<decltype(s)>);
  EXPECT_EQ(one_epoch(s), (std::vector<std::size_t>{2, 1}));
}

// permutation_of(k, n) at run time equals tessel::random::permutation<N>(k), itself bit-exact with
// jax.random.permutation, across the sizes that take 1 and 2 sorting rounds.
template <std::size_t N>
void expect_permutation_matches(tr::key k) {
  const auto expected = tr::permutation<N>(k);
  const auto actual = td::permutation_of(k, N);
  ASSERT_EQ(actual.size(), N);
  for (std::size_t i = 0; i < N; ++i) ASSERT_EQ(actual[i], static_cast<std::uint32_t>(expected[i])) << "N " << N << " at " << i;
}

TEST(Shuffle, PermutationMatchesJaxAlgorithm) {
  const tr::key k = tr::key_from_seed(42);
  expect_permutation_matches<1>(k);
  expect_permutation_matches<2>(k);
  expect_permutation_matches<10>(k);
  expect_permutation_matches<1625>(k);
  expect_permutation_matches<1626>(k);  // the first size with two rounds
  expect_permutation_matches<5000>(tr::fold_in(k, 3));
}

TEST(Shuffle, EpochOrderIsPermutationOfFoldedKey) {
  const tr::key k = tr::key_from_seed(7);
  auto s = td::iterate(td::from_indices(100) | td::shuffle(k));
  for (std::uint32_t epoch = 0; epoch < 3; ++epoch) {
    const auto order = one_epoch(s);
    const auto expected = tr::permutation<100>(tr::fold_in(k, epoch));
    ASSERT_EQ(order.size(), 100u);
    for (std::size_t i = 0; i < 100; ++i) EXPECT_EQ(order[i], static_cast<std::size_t>(expected[i]));
  }
}

TEST(Shuffle, DeterministicAndDifferentEachEpoch) {
  const tr::key k = tr::key_from_seed(1);
  auto a = td::iterate(td::from_indices(50) | td::shuffle(k));
  auto b = td::iterate(td::from_indices(50) | td::shuffle(k));
  const auto a0 = one_epoch(a), a1 = one_epoch(a);
  EXPECT_EQ(a0, one_epoch(b));
  EXPECT_EQ(a1, one_epoch(b));
  EXPECT_NE(a0, a1);
  auto sorted = a0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> all(50);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
}

// Each process's examples for `epochs` epochs, processes built independently as on separate hosts.
enum class order { none, shuffle_then_shard, shard_then_shuffle };

std::vector<std::vector<std::size_t>> per_process(std::size_t n, std::size_t count, order how, std::uint32_t epoch) {
  const tr::key k = tr::key_from_seed(1234);  // the same on every process
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t p = 0; p < count; ++p) {
    std::vector<std::size_t> seen;
    const auto take = [&](auto&& dataset) {
      auto s = td::iterate(std::move(dataset));
      for (std::uint32_t e = 0; e <= epoch; ++e) seen = one_epoch(s);
    };
    if (how == order::none) take(td::from_indices(n) | td::shard(p, count));
    if (how == order::shuffle_then_shard) take(td::from_indices(n) | td::shuffle(k) | td::shard(p, count));
    if (how == order::shard_then_shuffle) take(td::from_indices(n) | td::shard(p, count) | td::shuffle(k));
    out.push_back(std::move(seen));
  }
  return out;
}

TEST(Shard, EveryExampleToExactlyOneProcess) {
  for (const std::size_t n : {0u, 1u, 7u, 10u, 101u}) {
    for (const std::size_t count : {1u, 2u, 3u}) {
      for (const order how : {order::none, order::shuffle_then_shard, order::shard_then_shuffle}) {
        for (std::uint32_t epoch : {0u, 1u}) {
          std::multiset<std::size_t> all;
          std::size_t smallest = n, largest = 0;
          for (const auto& part : per_process(n, count, how, epoch)) {
            all.insert(part.begin(), part.end());
            smallest = std::min(smallest, part.size());
            largest = std::max(largest, part.size());
          }
          std::multiset<std::size_t> expected;
          for (std::size_t i = 0; i < n; ++i) expected.insert(i);
          EXPECT_EQ(all, expected) << "n " << n << ", " << count << " processes, order " << int(how) << ", epoch " << epoch;
          EXPECT_LE(largest - std::min(smallest, largest), 1u);
        }
      }
    }
  }
}

TEST(Shard, StridesLikeTfData) {
  EXPECT_EQ(indices_of(td::from_indices(10) | td::shard(1, 3)), (std::vector<std::size_t>{1, 4, 7}));
  EXPECT_EQ(indices_of(td::from_indices(10) | td::shard(0, 3)), (std::vector<std::size_t>{0, 3, 6, 9}));
  EXPECT_EQ(indices_of(td::from_indices(10) | td::shard(0, 3, td::shard_remainder::drop)), (std::vector<std::size_t>{0, 3, 6}));
  EXPECT_THROW(td::shard(3, 3), std::invalid_argument);
  EXPECT_THROW(td::shard(0, 0), std::invalid_argument);
}

TEST(Shard, ShuffleBeforeShardRepartitionsEachEpoch) {
  const auto e0 = per_process(60, 2, order::shuffle_then_shard, 0);
  const auto e1 = per_process(60, 2, order::shuffle_then_shard, 1);
  EXPECT_NE(std::set<std::size_t>(e0[0].begin(), e0[0].end()), std::set<std::size_t>(e1[0].begin(), e1[0].end()));
  const auto f0 = per_process(60, 2, order::shard_then_shuffle, 0);
  const auto f1 = per_process(60, 2, order::shard_then_shuffle, 1);
  EXPECT_EQ(std::set<std::size_t>(f0[0].begin(), f0[0].end()), std::set<std::size_t>(f1[0].begin(), f1[0].end()));
  EXPECT_NE(f0[0], f1[0]);
}

TEST(Batch, PadsTheLastBatchWithAMask) {
  auto s = td::from_indices(10) | td::map([](std::size_t i) { return static_cast<float>(i + 1); }) | td::batch<4>();
  auto b0 = s.next(), b1 = s.next(), b2 = s.next();
  ASSERT_TRUE(b0 && b1 && b2);
  EXPECT_EQ(b0->data, (tensor<float, shape<4>>{1, 2, 3, 4}));
  EXPECT_EQ(b0->count, 4u);
  EXPECT_EQ(b0->mask, (tensor<bool, shape<4>>{true, true, true, true}));
  EXPECT_EQ(b2->data, (tensor<float, shape<4>>{9, 10, 0, 0}));
  EXPECT_EQ(b2->mask, (tensor<bool, shape<4>>{true, true, false, false}));
  EXPECT_EQ(b2->count, 2u);
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.next()->data, (tensor<float, shape<4>>{1, 2, 3, 4}));  // epoch 1
}

TEST(Batch, DropRemainderCounts) {
  for (const std::size_t n : {0u, 3u, 4u, 11u, 12u, 13u}) {
    auto drop = td::from_indices(n) | td::map(as_int32) | td::batch<4>(td::drop_remainder);
    auto pad = td::from_indices(n) | td::map(as_int32) | td::batch<4>(td::pad_remainder);
    for (int epoch = 0; epoch < 2; ++epoch) {
      const auto dropped = one_epoch(drop);
      EXPECT_EQ(dropped.size(), n / 4) << n;
      for (const auto& b : dropped) EXPECT_EQ(b.count, 4u);
      EXPECT_EQ(one_epoch(pad).size(), (n + 3) / 4) << n;
    }
  }
}

TEST(Batch, StacksTensorsTuplesAndLabeled) {
  auto s = td::from_indices(3) | td::map([](std::size_t i) {
             const float x = static_cast<float>(i);
             return std::tuple(tensor<float, shape<2>>{x, -x}, static_cast<int32>(i), td::labeled<float, shape<1>>{{x}, 7});
           }) |
           td::batch<2>();
  auto b = s.next();
  ASSERT_TRUE(b);
  const auto& [x, y, l] = b->data;
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(x)>, tensor<float, shape<2, 2>>>);
  EXPECT_EQ(x, (tensor<float, shape<2, 2>>{0, 0, 1, -1}));
  EXPECT_EQ(y, (tensor<int32, shape<2>>{0, 1}));
  EXPECT_EQ(l.features, (tensor<float, shape<2, 1>>{0, 1}));
  EXPECT_EQ(l.labels, (tensor<int32, shape<2>>{7, 7}));
}

TEST(Position, JsonRoundTripAndErrors) {
  const td::stream_position p{3, 17, {2, 5, 16}};
  EXPECT_EQ(p.to_json(), R"({"epoch":3,"index":17,"pending":[2,5,16]})");
  EXPECT_EQ(td::stream_position::from_json(p.to_json()), p);
  EXPECT_THROW(td::stream_position::from_json(R"({"epoch":3,"index":1})"), tessel::io::format_error);
  EXPECT_THROW(td::stream_position::from_json(R"({"epoch":-1,"index":1,"pending":[]})"), tessel::io::format_error);
  EXPECT_THROW(td::stream_position::from_json(R"({"epoch":1,"index":4,"pending":[3,2]})"), tessel::io::format_error);
  EXPECT_THROW(td::stream_position::from_json(R"({"epoch":1,"index":4,"pending":[],"x":0})"), tessel::io::format_error);
}

// A fresh pipeline restored to a position saved mid-epoch (through JSON) continues exactly as the
// original does, across the epoch boundary.
template <class Make>
void expect_resumes(Make make, std::size_t before, std::size_t after) {
  auto original = make();
  for (std::size_t i = 0; i < before; ++i) (void)original.next();
  const std::string saved = original.position().to_json();
  auto resumed = make();
  resumed.restore(td::stream_position::from_json(saved));
  for (std::size_t i = 0; i < after; ++i) {
    auto a = original.next(), b = resumed.next();
    ASSERT_EQ(a.has_value(), b.has_value()) << "call " << i << " after " << saved;
    if (a) {
      ASSERT_TRUE(a->data == b->data && a->mask == b->mask && a->count == b->count) << "call " << i << " after " << saved;
    }
  }
}

TEST(Position, ResumeMidEpochGivesTheSameRemainingBatches) {
  const tr::key k = tr::key_from_seed(9);
  const auto make = [&] {
    return td::from_indices(23) | td::shard(1, 2) | td::shuffle(k) |
           td::map([](std::size_t i) { return static_cast<int32>(i * i); }) | td::batch<3>();
  };
  for (std::size_t before = 0; before < 10; ++before) expect_resumes(make, before, 12);
  const auto make_drop = [&] { return td::from_indices(23) | td::shuffle(k) | td::map(as_int32) | td::batch<5>(td::drop_remainder); };
  for (std::size_t before = 0; before < 8; ++before) expect_resumes(make_drop, before, 12);
}

TEST(Position, RestoreRejectsForeignPositions) {
  auto s = td::from_indices(5) | td::map(as_int32) | td::batch<2>();
  EXPECT_THROW(s.restore({0, 6, {}}), std::invalid_argument);
  EXPECT_THROW(s.restore({0, 3, {1}}), std::invalid_argument);
}

TEST(IdxSource, ImagesAndLabelsBecomeLabeledExamples) {
  idx_test::temp_dir dir;
  std::vector<std::uint8_t> pixels(3 * 2 * 2);
  std::iota(pixels.begin(), pixels.end(), 0);
  idx_test::write_bytes(dir / "images", idx_test::gzip(idx_test::idx_file<std::uint8_t>({3, 2, 2}, pixels)));
  idx_test::write_bytes(dir / "labels", idx_test::idx_file<std::uint8_t>({3}, {2, 0, 1}));
  auto d = td::from_idx<shape<2, 2>>(dir / "images", dir / "labels", {.scale = 0.5f, .classes = 3});
  ASSERT_EQ(d.size(), 3u);
  const auto x = d.get(0, 1);
  EXPECT_EQ(x.features, (tensor<float, shape<2, 2>>{2, 2.5f, 3, 3.5f}));
  EXPECT_EQ(x.label, 0);
  auto s = std::move(d) | td::batch<2>();
  const auto b = s.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->data.labels, (tensor<int32, shape<2>>{2, 0}));
  EXPECT_EQ(b->data.features(1, 1, 0), 3.0f);
}

TEST(IdxSource, ErrorsNameTheFileAndTheProblem) {
  idx_test::temp_dir dir;
  idx_test::write_bytes(dir / "images", idx_test::idx_file<std::uint8_t>({2, 2, 2}, std::vector<std::uint8_t>(8)));
  idx_test::write_bytes(dir / "labels", idx_test::idx_file<std::uint8_t>({2}, {1, 10}));
  idx_test::write_bytes(dir / "short", idx_test::idx_file<std::uint8_t>({3}, {1, 2, 3}));
  const auto whole = idx_test::idx_file<std::uint8_t>({2, 2, 2}, std::vector<std::uint8_t>(8));
  idx_test::write_bytes(dir / "truncated", std::span(whole).first(whole.size() - 1));
  EXPECT_TRUE(idx_test::throws_format_error([&] { (void)td::from_idx<shape<2, 2>>(dir / "images", dir / "labels", {.classes = 10}); },
                                            {"labels", "label 10 at index 1", "expected 0 to 9"}));
  EXPECT_TRUE(idx_test::throws_format_error([&] { (void)td::from_idx<shape<2, 3>>(dir / "images", dir / "labels"); },
                                            {"images", "expected images [N,2,3]", "[2,2,2]"}));
  EXPECT_TRUE(idx_test::throws_format_error([&] { (void)td::from_idx<shape<2, 2>>(dir / "images", dir / "short"); },
                                            {"short", "expected integer labels [2]"}));
  EXPECT_TRUE(idx_test::throws_format_error([&] { (void)td::from_idx<shape<2, 2>>(dir / "truncated", dir / "labels"); },
                                            {"truncated", "truncated"}));
}

}  // namespace
