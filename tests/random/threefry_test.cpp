#include <gtest/gtest.h>

#include "tessel/kernels/threefry.hpp"

namespace {
using tessel::kernels::threefry2x32;
using tessel::kernels::word_pair;

// Random123 known-answer vectors for threefry2x32_20 (kat_vectors; also JAX's
// tests/random_test.py::testThreefry2x32 and tests/random_impl_test.py).
constexpr word_pair kat_zero = threefry2x32({0u, 0u}, {0u, 0u});
constexpr word_pair kat_ones = threefry2x32({0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
constexpr word_pair kat_pi = threefry2x32({0x13198a2eu, 0x03707344u}, {0x243f6a88u, 0x85a308d3u});

static_assert(kat_zero == word_pair{0x6b200159u, 0x99ba4efeu}, "threefry2x32 is usable in constant expressions");

TEST(Threefry2x32, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(kat_zero, (word_pair{0x6b200159u, 0x99ba4efeu}));
  EXPECT_EQ(kat_ones, (word_pair{0x1cb996fcu, 0xbb002be7u}));
  EXPECT_EQ(kat_pi, (word_pair{0xc4923a9cu, 0x483df7a0u}));
}

TEST(Threefry2x32, RunTimeEqualsCompileTime) {
  volatile std::uint32_t k0 = 0x13198a2eu;  // volatile: force a run-time evaluation
  EXPECT_EQ(threefry2x32({k0, 0x03707344u}, {0x243f6a88u, 0x85a308d3u}), kat_pi);
}

TEST(Threefry2x32, EveryCounterBitChangesTheBlock) {
  for (unsigned bit = 0; bit < 64; ++bit) {
    word_pair counter{bit >= 32 ? 1u << (bit - 32) : 0u, bit < 32 ? 1u << bit : 0u};
    EXPECT_NE(threefry2x32({0u, 0u}, counter), kat_zero) << "counter bit " << bit;
  }
}
}  // namespace
