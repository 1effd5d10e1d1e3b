// Random numbers drawn inside jitted programs: bit-exact with the host functions (and so with JAX), fused
// into their consumers, and dropout with a key argument.
#include <gtest/gtest.h>

#include "tessel/nn/layers.hpp"
#include "tessel/random.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::jit;
using tessel::shape;
using tessel::tensor;
namespace random = tessel::random;

TEST(TracedRandom, UniformMatchesTheHostBitForBit) {
  for (std::uint32_t seed : {0u, 1u, 42u}) {
    const random::key k = random::fold_in(random::key_from_seed(seed), 7);
    const auto got = jit([](auto key) { return random::uniform<shape<37, 129>>(key); })(random::key_data(k));
    const auto want = random::uniform<shape<37, 129>>(k);
    for (std::size_t i = 0; i < want.size; ++i) ASSERT_EQ(got[i], want[i]) << "seed " << seed << " element " << i;
  }
  // JAX's published value: uniform(key(0), (3,)).
  const auto three = jit([](auto key) { return random::uniform<shape<3>>(key); })(random::key_data(random::key_from_seed(0)));
  EXPECT_FLOAT_EQ(three[0], 0.947667f);
  EXPECT_FLOAT_EQ(three[1], 0.9785799f);
  EXPECT_FLOAT_EQ(three[2], 0.33229148f);
}

TEST(TracedRandom, BernoulliMatchesTheHost) {
  const random::key k = random::key_from_seed(3);
  const auto got = jit([](auto key) { return random::bernoulli<shape<1000>>(key, 0.3f); })(random::key_data(k));
  const auto want = random::bernoulli<shape<1000>>(k, 0.3f);
  std::size_t ones = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(got[i], want[i]) << i;
    ones += got[i];
  }
  EXPECT_NEAR(static_cast<double>(ones), 300.0, 60.0);
}

TEST(TracedRandom, KeyedDropoutIsOneLoopAndScalesTheKept) {
  const auto f = [](auto x, auto key) { return tessel::relu(tessel::nn::dropout<0.25>(x, key)); };
  tensor<float, shape<64, 64>> x;
  for (std::size_t i = 0; i < x.size; ++i) x[i] = 1.0f;
  constexpr auto& p = decltype(jit(f))::traced_for<decltype(x), random::key_words<>>::plan;
  static_assert(p.kernel_count == 1 && p.arena_bytes == 0, "the mask is drawn inside the loop");
  const random::key k = random::key_from_seed(11);
  const auto y = jit(f)(x, random::key_data(k));
  const auto keep = random::bernoulli<shape<64, 64>>(k, 0.75f);
  for (std::size_t i = 0; i < x.size; ++i) ASSERT_EQ(y[i], keep[i] ? 1.0f / 0.75f : 0.0f) << i;
}
}  // namespace
