#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>

#include "tessel/random/key.hpp"
#include "tessel/kernels/threefry.hpp"

namespace {
namespace tr = tessel::random;
using tessel::shape;
using tr::key;

// JAX tests/random_test.py::test_prng_seeds_and_keys (default x32 and jax_enable_x64 columns).
TEST(KeyFromSeed, MatchesJaxSeedTable) {
  EXPECT_EQ(tr::key_from_seed(0), key(0, 0));
  EXPECT_EQ(tr::key_from_seed(std::int32_t{1}), key(0, 1));
  EXPECT_EQ(tr::key_from_seed(std::uint32_t{2}), key(0, 2));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{3}), key(0, 3));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{-1}), key(0, 4294967295u));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{-1}, tr::seed_mode::x64), key(4294967295u, 4294967295u));
  EXPECT_EQ(tr::key_from_seed(std::int32_t{-2}), key(0, 4294967294u));
  EXPECT_EQ(tr::key_from_seed(std::int32_t{-2}, tr::seed_mode::x64), key(0, 4294967294u));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{-3}), key(0, 4294967293u));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{-3}, tr::seed_mode::x64), key(4294967295u, 4294967293u));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{2147483647} + 100), key(0, 2147483747u));
  EXPECT_EQ(tr::key_from_seed(std::uint32_t{2147483647u + 101u}), key(0, 2147483748u));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{-2147483648} - 100), key(0, 2147483548u));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{-2147483648} - 100, tr::seed_mode::x64), key(4294967295u, 2147483548u));
  EXPECT_EQ(tr::key_from_seed(std::int64_t{-2147483648} - 101, tr::seed_mode::x64), key(4294967295u, 2147483547u));
  static_assert(tr::key_from_seed(std::uint64_t{0x0000000500000007u}, tr::seed_mode::x64) == key(5, 7));
}

// jax/_src/random/stateful_rng.py, StatefulPRNG.key docstring (doctested): stateful_rng(0).key() is
// fold_in(key(0), 0) then fold_in(key(0), 1) -> [1797259609 2579123966], [928981903 3453687069].
// In the partitionable mode split(key(0)) holds the same two keys.
TEST(Split, MatchesJaxSplitOfKeyZero) {
  const auto [a, b] = tr::split(tr::key_from_seed(0));
  EXPECT_EQ(a, key(1797259609u, 2579123966u));
  EXPECT_EQ(b, key(928981903u, 3453687069u));
}

// JAX tests/random_test.py::testPRNGValues: fold_in(key(0), 4) -> [2285895361, 433833334]. fold_in is
// the same in both threefry modes (threefry_2x32(key, [0, data])), so this value holds today.
TEST(FoldIn, MatchesJaxPublishedValue) {
  EXPECT_EQ(tr::fold_in(tr::key_from_seed(0), 4), key(2285895361u, 433833334u));
  EXPECT_EQ(tr::fold_in(tr::key_from_seed(0), 0), key(1797259609u, 2579123966u));
}

// JAX tests/random_test.py::test_threefry_split_fold_in_symmetry (partitionable mode only).
TEST(Split, KeyIEqualsFoldInI) {
  for (key k : {tr::key_from_seed(72), tr::key_from_seed(0), key(0xdeadbeefu, 0x12345678u)}) {
    const auto keys = tr::split<5>(k);
    for (std::uint32_t i = 0; i < 5; ++i) {
      EXPECT_EQ(keys[i], tr::fold_in(k, i)) << k << " key " << i;
      EXPECT_EQ(keys[i], tr::split_at(k, i));
    }
  }
  static_assert(tr::split<3>(key(1, 2))[2] == tr::fold_in(key(1, 2), 2), "split is constexpr");
}

TEST(Split, KeysAreDistinctAndDependOnTheParent) {
  const auto keys = tr::split<4>(tr::key_from_seed(7));
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]);
  EXPECT_NE(tr::split<4>(tr::key_from_seed(8))[0], keys[0]);
}

// jax.random.bits for shape () hashes counter (0, 0) and xors the two words: with key(0) that is the
// first Random123 vector, 0x6b200159 ^ 0x99ba4efe. The partitionable mode counts a flat index i as
// (hi32(i), lo32(i)), so element i of any shape is bits32_at(k, i).
TEST(Bits, ScalarIsXorOfTheCounterZeroBlock) {
  const auto b = tr::bits<shape<>>(tr::key_from_seed(0));
  EXPECT_EQ(b[0], 0x6b200159u ^ 0x99ba4efeu);
}

TEST(Bits, ElementIHashesCounterI) {
  const key k = tr::key_from_seed(1701);
  const auto b = tr::bits<shape<2, 3>>(k);
  for (std::uint32_t i = 0; i < 6; ++i) {
    const auto y = tr::threefry2x32(k.words, {0u, i});
    EXPECT_EQ(b[i], y[0] ^ y[1]);
  }
  const auto y = tr::threefry2x32(k.words, {1u, 5u});  // index 2^32 + 5 uses the high word
  EXPECT_EQ(tr::bits32_at(k, (std::uint64_t{1} << 32) + 5), y[0] ^ y[1]);
  EXPECT_EQ(tr::bits<shape<6>>(k), b.reshape<shape<6>>());  // the shape does not change the stream
}

TEST(StepKey, FoldsInStepThenDevice) {
  const key base = tr::key_from_seed(42);
  EXPECT_EQ(tr::step_key(base, 10, 3), tr::fold_in(tr::fold_in(base, 10), 3));
  EXPECT_NE(tr::step_key(base, 10, 3), tr::step_key(base, 10, 4));
  EXPECT_NE(tr::step_key(base, 10, 3), tr::step_key(base, 11, 3));
  EXPECT_NE(tr::step_key(base, 3, 10), tr::step_key(base, 10, 3));
}

TEST(Key, PrintsAndCompares) {
  std::ostringstream os;
  os << tr::key_from_seed(std::int64_t{-1});
  EXPECT_EQ(os.str(), "key<fry>{0, 4294967295}");
  EXPECT_EQ(key(1, 2).data(), (tr::word_pair{1, 2}));
  EXPECT_NE(key(1, 2), key(2, 1));
}
}  // namespace
