// Row reductions (max, min, sum over the last axis) against the scalar rule, for rows shorter than a
// vector, one vector, four (the vectorised loop's block) and odd lengths past it: max and min exactly,
// with NaN propagated; sums within f32 accumulation's bound. And elementwise max and min propagating a NaN
// from either operand in their vectorised loops, as lax.max and lax.min do.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::bfloat16;
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

constexpr std::size_t rows = 3;

template <class T, std::size_t N>
void check_rows(std::uint32_t seed) {
  auto x = random_tensor<T, shape<rows, N>>(seed, -100.0, 100.0);
  const auto max = jit([](auto v) { return tessel::reduce_max<1>(v); })(x);
  const auto min = jit([](auto v) { return tessel::reduce_min<1>(v); })(x);
  const auto sum = jit([](auto v) { return tessel::sum<1>(v); })(x);
  for (std::size_t r = 0; r < rows; ++r) {
    float most = -std::numeric_limits<float>::infinity(), least = std::numeric_limits<float>::infinity();
    double total = 0, magnitude = 0;
    for (std::size_t i = 0; i < N; ++i) {
      const float v = static_cast<float>(x[r * N + i]);
      most = std::max(most, v);
      least = std::min(least, v);
      total += v;
      magnitude += std::abs(v);
    }
    ASSERT_EQ(static_cast<float>(max[r]), most) << "row " << r << " of length " << N;
    ASSERT_EQ(static_cast<float>(min[r]), least) << "row " << r << " of length " << N;
    // f32 accumulation of N terms, then (bf16) one rounding of the result.
    const double bound = 2.0 * N * std::ldexp(1.0, -24) * magnitude +
                         (std::is_same_v<T, bfloat16> ? std::ldexp(std::abs(total), -8) : 0.0);
    ASSERT_NEAR(static_cast<double>(static_cast<float>(sum[r])), total, bound) << "row " << r << " of length " << N;
  }
  if constexpr (!std::is_integral_v<T>) {  // a NaN anywhere in a row makes its max and min NaN
    x[1 * N + N / 2] = T(std::numeric_limits<float>::quiet_NaN());
    const auto max_nan = jit([](auto v) { return tessel::reduce_max<1>(v); })(x);
    const auto min_nan = jit([](auto v) { return tessel::reduce_min<1>(v); })(x);
    EXPECT_TRUE(std::isnan(static_cast<float>(max_nan[1]))) << N;
    EXPECT_TRUE(std::isnan(static_cast<float>(min_nan[1]))) << N;
    EXPECT_FALSE(std::isnan(static_cast<float>(max_nan[0]))) << N;
  }
}

TEST(RowReductions, TakeTheScalarRulesResult) {
  check_rows<float, 1>(1);
  check_rows<float, 7>(2);
  check_rows<float, 64>(3);
  check_rows<float, 127>(4);
  check_rows<float, 1000>(5);
  check_rows<float, 13 * 17>(6);
  check_rows<bfloat16, 127>(7);
  check_rows<bfloat16, 13 * 17>(8);
  check_rows<std::int32_t, 7>(9);
  check_rows<std::int32_t, 1000>(10);
}
template <std::size_t N>
void check_elementwise_nan() {
  auto x = random_tensor<float, shape<N>>(11, -1.0, 1.0);
  auto y = random_tensor<float, shape<N>>(12, -1.0, 1.0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < N; i += 3) x[i] = nan;  // NaN first, second or in both operands
  for (std::size_t i = 0; i < N; i += 2) y[i] = nan;
  const auto max = jit([](auto a, auto b) { return tessel::max(a, b); })(x, y);
  const auto min = jit([](auto a, auto b) { return tessel::min(a, b); })(x, y);
  for (std::size_t i = 0; i < N; ++i) {
    const bool either = std::isnan(x[i]) || std::isnan(y[i]);
    ASSERT_EQ(std::isnan(max[i]), either) << "max, element " << i << " of " << N;
    ASSERT_EQ(std::isnan(min[i]), either) << "min, element " << i << " of " << N;
    if (!either) {
      ASSERT_EQ(max[i], std::max(x[i], y[i]));
      ASSERT_EQ(min[i], std::min(x[i], y[i]));
    }
  }
}

// A scalar reduced over all its axes (none) is itself, as jnp.sum of a scalar: it did not compile (the
// oracle's random programs found it).
TEST(RowReductions, AScalarReducesToItself) {
  const tensor<float, shape<>> x{2.5f};
  const auto y = jit([](auto v) { return tessel::sum(v) * 2.0f + tessel::max(v) + tessel::min(v); })(x);
  EXPECT_EQ(y[0], 10.0f);
}

TEST(ElementwiseMaxMin, PropagateANaNFromEitherOperand) {
  check_elementwise_nan<7>();
  check_elementwise_nan<1000>();
  check_elementwise_nan<13 * 17>();
}
}  // namespace
