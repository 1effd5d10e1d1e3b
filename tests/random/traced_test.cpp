// Random numbers drawn inside jitted programs: bit-exact with the host functions (and so with JAX), fused
// into their consumers, and dropout with a key argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "tessel/nn/layers.hpp"
#include "tessel/random.hpp"
#include "tessel/jit.hpp"
#include "tessel/transform/scan.hpp"

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

// fold_in of a traced scalar gives random::fold_in's words (JAX's), for u32 data and s32 data taken
// modulo 2^32; over data 0..n-1 the keys are split<n>'s (SHARDING.md T19, JAX's partitionable threefry).
TEST(TracedRandom, FoldInMatchesTheHost) {
  const random::key base = random::key_from_seed(72);
  const auto words = jit([](auto key, auto data) { return random::fold_in(key, data); });
  for (std::uint32_t data : {0u, 1u, 7u, 0x80000000u, 0xFFFFFFFFu}) {
    tensor<tessel::uint32, shape<>> d;
    d[0] = data;
    const auto got = words(random::key_data(base), d);
    const random::key want = random::fold_in(base, data);
    EXPECT_EQ(got.k0[0], want.words[0]) << data;
    EXPECT_EQ(got.k1[0], want.words[1]) << data;
  }
  tensor<std::int32_t, shape<>> minus_one;
  minus_one[0] = -1;
  const auto wrapped = words(random::key_data(base), minus_one);
  EXPECT_EQ(wrapped.k0[0], random::fold_in(base, 0xFFFFFFFFu).words[0]);
  EXPECT_EQ(wrapped.k1[0], random::fold_in(base, 0xFFFFFFFFu).words[1]);
  const auto split = random::split<3>(base);
  for (std::int32_t i = 0; i < 3; ++i) {
    tensor<std::int32_t, shape<>> d;
    d[0] = i;
    const auto got = words(random::key_data(base), d);
    EXPECT_EQ(got.k0[0], split[static_cast<std::size_t>(i)].words[0]) << i;
    EXPECT_EQ(got.k1[0], split[static_cast<std::size_t>(i)].words[1]) << i;
  }
}

// A fresh key per step inside a scan (fold_in of the step count): each step's draw is the host's draw from
// fold_in(base, step).
TEST(TracedRandom, FoldInOfAScanStep) {
  const auto draws = jit([](auto key) {
    auto step = [](auto carry, auto) {
      auto& [k, t] = carry;
      auto u = random::uniform<shape<4>>(random::fold_in(k, t));
      return std::make_tuple(std::make_tuple(k, t + 1), u);
    };
    auto t0 = tessel::convert_element_type<std::int32_t>(key.k0) * 0;
    // six steps; the xs are only a length
    auto [last, us] = tessel::scan(step, std::make_tuple(key, t0), tessel::broadcast_to<shape<6>>(key.k0));
    return us;
  });
  const random::key base = random::key_from_seed(5);
  const auto us = draws(random::key_data(base));
  for (std::uint32_t t = 0; t < 6; ++t) {
    const auto want = random::uniform<shape<4>>(random::fold_in(base, t));
    for (std::size_t i = 0; i < 4; ++i) ASSERT_EQ(us(t, i), want[i]) << "step " << t << " element " << i;
  }
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

namespace {
// categorical: frequencies of many draws against softmax(logits); the same key draws the same indices;
// each draw is the argmax of logits + gumbel computed on the host from the same uniform bits.
TEST(TracedRandom, CategoricalFollowsTheSoftmax) {
  constexpr std::size_t draws = 20000;
  const tensor<float, shape<4>> logits{0.0f, 1.0f, -1.0f, 2.0f};
  const auto f = jit([](auto key, auto l) {
    return random::categorical<1>(key, tessel::broadcast_in_dim<shape<draws, 4>, 1>(l));
  });
  const random::key k = random::key_from_seed(5);
  const auto got = f(random::key_data(k), logits);
  static_assert(std::is_same_v<decltype(got), const tensor<std::int32_t, shape<draws>>>);
  double z = 0;
  for (std::size_t c = 0; c < 4; ++c) z += std::exp(static_cast<double>(logits[c]));
  std::size_t count[4] = {};
  for (std::size_t i = 0; i < draws; ++i) ++count[static_cast<std::size_t>(got[i])];
  for (std::size_t c = 0; c < 4; ++c)  // 0.015 is more than 4 standard deviations of a frequency here
    EXPECT_NEAR(static_cast<double>(count[c]) / draws, std::exp(static_cast<double>(logits[c])) / z, 0.015) << "class " << c;
  // A pure function of the key.
  const auto again = f(random::key_data(k), logits);
  const auto other = f(random::key_data(random::fold_in(k, 1)), logits);
  std::size_t same = 0, differ = 0;
  for (std::size_t i = 0; i < draws; ++i) {
    same += got[i] == again[i];
    differ += got[i] != other[i];
  }
  EXPECT_EQ(same, draws);
  EXPECT_GT(differ, draws / 4);
  // The Gumbel-max definition, on the host: u from the same bits, max(u, tiny), -log(-log(u)).
  const auto u = random::uniform<shape<draws, 4>>(k);
  std::size_t agree = 0;
  for (std::size_t i = 0; i < draws; ++i) {
    std::size_t best = 0;
    double best_value = -1e300;
    for (std::size_t c = 0; c < 4; ++c) {
      const double v = std::max(static_cast<double>(u[i * 4 + c]), 1.1754943508222875e-38);
      const double g = logits[c] - std::log(-std::log(v));
      if (g > best_value) {
        best = c;
        best_value = g;
      }
    }
    agree += static_cast<std::size_t>(got[i]) == best;
  }
  EXPECT_GE(agree, draws - 5) << "draws that differ from the host's Gumbel-max (near-ties only)";
}
}  // namespace
