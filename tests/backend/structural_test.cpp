// Reductions, layout primitives and derived ops through jit against plain double references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel::testing::all_close;
using tessel::testing::random_tensor;

using x_shape = shape<5, 6, 7>;

double at(const tensor<float, x_shape>& x, std::size_t i, std::size_t j, std::size_t k) {
  return static_cast<double>(x(i, j, k));
}

TEST(Reduce, SumOverEveryAxisSet) {
  const auto x = random_tensor<float, x_shape>(21);
  // Trailing axes (row kernels), leading axes (column kernels), a middle axis (the generic kernel), all.
  const auto [s2, s12, s0, s01, s1, all] = jit([](auto v) {
    return std::make_tuple(tessel::sum<2>(v), tessel::sum<1, 2>(v), tessel::sum<0>(v), tessel::sum<0, 1>(v),
                           tessel::sum<1>(v), tessel::sum(v));
  })(x);
  tensor<float, shape<5, 6>> r2;
  tensor<float, shape<5>> r12;
  tensor<float, shape<6, 7>> r0;
  tensor<float, shape<7>> r01;
  tensor<float, shape<5, 7>> r1;
  double total = 0;
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 6; ++j)
      for (std::size_t k = 0; k < 7; ++k) {
        const double v = at(x, i, j, k);
        r2(i, j) += static_cast<float>(v);
        r12(i) += static_cast<float>(v);
        r0(j, k) += static_cast<float>(v);
        r01(k) += static_cast<float>(v);
        r1(i, k) += static_cast<float>(v);
        total += v;
      }
  const tessel::tolerance tol{.rtol = 1e-5, .atol = 1e-5};
  EXPECT_TRUE(all_close(s2, r2, tol));
  EXPECT_TRUE(all_close(s12, r12, tol));
  EXPECT_TRUE(all_close(s0, r0, tol));
  EXPECT_TRUE(all_close(s01, r01, tol));
  EXPECT_TRUE(all_close(s1, r1, tol));
  EXPECT_NEAR(all[0], total, 1e-4);
}

TEST(Reduce, MaxMinAndIntegers) {
  const auto x = random_tensor<float, x_shape>(22, -100, 100);
  const auto [mx, mn] = jit([](auto v) { return std::make_tuple(tessel::max<2>(v), tessel::min<0>(v)); })(x);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 6; ++j) {
      float m = -std::numeric_limits<float>::infinity();
      for (std::size_t k = 0; k < 7; ++k) m = std::max(m, x(i, j, k));
      EXPECT_EQ(mx(i, j), m);
    }
  for (std::size_t j = 0; j < 6; ++j)
    for (std::size_t k = 0; k < 7; ++k) {
      float m = std::numeric_limits<float>::infinity();
      for (std::size_t i = 0; i < 5; ++i) m = std::min(m, x(i, j, k));
      EXPECT_EQ(mn(j, k), m);
    }
  tensor<std::int32_t, shape<2, 3>> k{1, -5, 3, 7, 7, -2};
  const auto [ks, km] = jit([](auto v) { return std::make_tuple(tessel::sum<1>(v), tessel::max<0>(v)); })(k);
  EXPECT_EQ(ks, (tensor<std::int32_t, shape<2>>{-1, 12}));
  EXPECT_EQ(km, (tensor<std::int32_t, shape<3>>{7, 7, 3}));
}

TEST(Reduce, ArgmaxTakesTheFirstMaximumAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  tensor<float, shape<3, 4>> x{1, 5, 5, 2, 3, nan, 9, nan, -1, -1, -1, -1};
  const auto [rows, cols] = jit([](auto v) { return std::make_tuple(tessel::argmax<1>(v), tessel::argmax<0>(v)); })(x);
  EXPECT_EQ(rows, (tensor<std::int32_t, shape<3>>{1, 1, 0}));
  EXPECT_EQ(cols, (tensor<std::int32_t, shape<4>>{1, 1, 1, 1}));
}

TEST(Layout, TransposeAndReshape) {
  const auto x = random_tensor<float, x_shape>(23);
  const auto [t, r] = jit([](auto v) {
    return std::make_tuple(tessel::transpose<2, 0, 1>(v), tessel::reshape<shape<30, 7>>(v) * 2.0f);
  })(x);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(t)>, tensor<float, shape<7, 5, 6>>>);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 6; ++j)
      for (std::size_t k = 0; k < 7; ++k) {
        EXPECT_EQ(t(k, i, j), x(i, j, k));
        EXPECT_EQ(r(i * 6 + j, k), 2 * x(i, j, k));
      }
}

// Where the operand's last axis becomes the result's second to last, rows are copied in 16 x 16 tiles
// (prim/transpose.hpp): whole tiles, tiles cut by the sizes (37 x 19), by the end of a batch element, in
// bf16, with the adjacent axis inside the rank, and over many work items (300 x 70).
TEST(Layout, TransposesByTiles) {
  const auto a = random_tensor<float, shape<37, 19>>(41);
  const auto b = random_tensor<float, shape<3, 21, 18>>(42);
  const auto c = random_tensor<float, shape<2, 5, 3, 20>>(43);
  const auto big = random_tensor<float, shape<300, 70>>(44);
  tensor<tessel::bfloat16, shape<33, 17>> h;
  for (std::size_t k = 0; k < h.size; ++k) h[k] = tessel::bfloat16(static_cast<float>(k) * 0.25f - 40.0f);
  const auto [ta, tb, tc, tbig, th] = jit([](auto a, auto b, auto c, auto big, auto h) {
    return std::make_tuple(tessel::transpose<1, 0>(a), tessel::transpose<0, 2, 1>(b), tessel::transpose<0, 2, 3, 1>(c),
                           tessel::transpose<1, 0>(big), tessel::transpose<1, 0>(h));
  })(a, b, c, big, h);
  for (std::size_t i = 0; i < 37; ++i)
    for (std::size_t j = 0; j < 19; ++j) ASSERT_EQ(ta(j, i), a(i, j)) << i << ", " << j;
  for (std::size_t n = 0; n < 3; ++n)
    for (std::size_t i = 0; i < 21; ++i)
      for (std::size_t j = 0; j < 18; ++j) ASSERT_EQ(tb(n, j, i), b(n, i, j)) << n << ", " << i << ", " << j;
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t i = 0; i < 5; ++i)
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t k = 0; k < 20; ++k) ASSERT_EQ(tc(n, j, k, i), c(n, i, j, k)) << n << ", " << i << ", " << j << ", " << k;
  for (std::size_t i = 0; i < 300; ++i)
    for (std::size_t j = 0; j < 70; ++j) ASSERT_EQ(tbig(j, i), big(i, j)) << i << ", " << j;
  for (std::size_t i = 0; i < 33; ++i)
    for (std::size_t j = 0; j < 17; ++j) ASSERT_EQ(static_cast<float>(th(j, i)), static_cast<float>(h(i, j))) << i << ", " << j;
}

TEST(Layout, BroadcastInDimAndIota) {
  tensor<float, shape<3>> b{1, 2, 3};
  const auto [rows, cols, io] = jit([](auto v) {
    return std::make_tuple(tessel::broadcast_in_dim<shape<3, 2>, 0>(v), tessel::broadcast_in_dim<shape<2, 3>, 1>(v),
                           tessel::broadcasted_iota<std::int32_t, shape<2, 3>, 0>(v));
  })(b);
  EXPECT_EQ(rows, (tensor<float, shape<3, 2>>{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(cols, (tensor<float, shape<2, 3>>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(io, (tensor<std::int32_t, shape<2, 3>>{0, 0, 0, 1, 1, 1}));
}

TEST(Derived, SoftmaxLogSoftmaxLogsumexpMeanVar) {
  const auto x = random_tensor<float, shape<9, 33>>(24, -20, 20);
  const auto [sm, lsm, lse, mu, va] = jit([](auto v) {
    return std::make_tuple(tessel::softmax(v), tessel::log_softmax(v), tessel::logsumexp<1>(v), tessel::mean<0>(v),
                           tessel::var<1>(v));
  })(x);
  for (std::size_t i = 0; i < 9; ++i) {
    double m = -1e300, s = 0, mean_row = 0, sq = 0;
    for (std::size_t j = 0; j < 33; ++j) m = std::max(m, static_cast<double>(x(i, j)));
    for (std::size_t j = 0; j < 33; ++j) s += std::exp(x(i, j) - m);
    for (std::size_t j = 0; j < 33; ++j) mean_row += x(i, j) / 33.0;
    for (std::size_t j = 0; j < 33; ++j) sq += (x(i, j) - mean_row) * (x(i, j) - mean_row) / 33.0;
    EXPECT_NEAR(lse(i), m + std::log(s), 1e-4);
    EXPECT_NEAR(va(i), sq, 1e-3 * sq);
    for (std::size_t j = 0; j < 33; ++j) {
      EXPECT_NEAR(sm(i, j), std::exp(x(i, j) - m) / s, 1e-6);
      EXPECT_NEAR(lsm(i, j), x(i, j) - m - std::log(s), 1e-4);
    }
  }
  for (std::size_t j = 0; j < 33; ++j) {
    double c = 0;
    for (std::size_t i = 0; i < 9; ++i) c += x(i, j) / 9.0;
    EXPECT_NEAR(mu(j), c, 1e-4);
  }
}

// Short rows are evaluated many per pass (the executor's row kernel): rows split across passes and
// threads at arbitrary counts must give every row its own result.
template <std::size_t Rows, std::size_t Inner>
void check_short_rows(std::uint32_t seed) {
  const auto x = random_tensor<float, shape<Rows, Inner>>(seed, -8, 8);
  const auto [sm, lsm, lse, centered] = jit([](auto v) {
    return std::make_tuple(tessel::softmax(v), tessel::log_softmax(v), tessel::logsumexp<1>(v),
                           v - tessel::broadcast_to<shape<Rows, Inner>>(tessel::reshape<shape<Rows, 1>>(tessel::mean<1>(v))));
  })(x);
  for (std::size_t i = 0; i < Rows; ++i) {
    double m = -1e300, s = 0, mean_row = 0;
    for (std::size_t j = 0; j < Inner; ++j) m = std::max(m, static_cast<double>(x(i, j)));
    for (std::size_t j = 0; j < Inner; ++j) s += std::exp(x(i, j) - m);
    for (std::size_t j = 0; j < Inner; ++j) mean_row += x(i, j) / static_cast<double>(Inner);
    ASSERT_NEAR(lse(i), m + std::log(s), 1e-4) << "row " << i;
    for (std::size_t j = 0; j < Inner; ++j) {
      ASSERT_NEAR(sm(i, j), std::exp(x(i, j) - m) / s, 1e-6) << "row " << i;
      ASSERT_NEAR(lsm(i, j), x(i, j) - m - std::log(s), 1e-4) << "row " << i;
      ASSERT_NEAR(centered(i, j), x(i, j) - mean_row, 1e-4) << "row " << i;
    }
  }
}

TEST(Derived, ShortRowsManyPerPass) {
  check_short_rows<5000, 10>(31);  // 102 rows a pass, two threads
  check_short_rows<1001, 3>(32);   // 341 rows a pass, a partial last pass
  check_short_rows<7, 1>(33);
  check_short_rows<3, 1500>(34);   // longer than a tile: one row a pass
}

TEST(Derived, LogsumexpOfMinusInfinityRows) {
  const float inf = std::numeric_limits<float>::infinity();
  tensor<float, shape<2, 2>> x{-inf, -inf, 1000, 1000};
  const auto y = jit([](auto v) { return tessel::logsumexp<1>(v); })(x);
  EXPECT_EQ(y[0], -inf);
  EXPECT_NEAR(y[1], 1000 + std::log(2.0), 1e-3);  // no overflow
}

TEST(Derived, OneHotReluGelu) {
  tensor<std::int32_t, shape<4>> labels{2, 0, 9, -1};
  const auto oh = jit([](auto l) { return tessel::one_hot<3>(l); })(labels);
  EXPECT_EQ(oh, (tensor<float, shape<4, 3>>{0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
  tensor<float, shape<4>> x{-2, -0.5f, 0.5f, 3};
  const auto [r, g, ge] = jit([](auto v) { return std::make_tuple(tessel::relu(v), tessel::gelu(v), tessel::gelu<false>(v)); })(x);
  EXPECT_EQ(r, (tensor<float, shape<4>>{0, 0, 0.5f, 3}));
  for (std::size_t i = 0; i < 4; ++i) {
    const double v = x[i];
    EXPECT_NEAR(g[i], 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::acos(-1.0)) * (v + 0.044715 * v * v * v))), 1e-6);
    EXPECT_NEAR(ge[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
  }
}
}  // namespace
