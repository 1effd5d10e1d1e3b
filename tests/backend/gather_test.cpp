// take and scatter_add through jit against hand-computed results on small arrays: index shapes of rank
// 0 to 2, negative and out-of-range indices in both modes, repeated indices accumulating, other dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "tessel/jit.hpp"
#include "tessel/ops.hpp"

namespace {
using tessel::index_mode;
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using I32 = std::int32_t;

tensor<float, shape<3, 4>> x34() {
  tensor<float, shape<3, 4>> x;
  for (std::size_t k = 0; k < 12; ++k) x[k] = static_cast<float>(10 * (k / 4) + k % 4);  // x(i, j) = 10 i + j
  return x;
}

TEST(Take, AlongEachAxisWithIndicesOfAnyRank) {
  const auto x = x34();
  const tensor<I32, shape<2, 2>> rows{2, 0, 1, 2};
  const tensor<I32, shape<3>> cols{3, 3, 0};
  const tensor<I32, shape<>> one{1};
  const auto [a, b, c] = jit([](auto v, auto r, auto k, auto s) {
    return std::make_tuple(tessel::take<0>(v, r), tessel::take<-1>(v, k), tessel::take<1>(v, s));
  })(x, rows, cols, one);
  static_assert(std::is_same_v<decltype(a), const tensor<float, shape<2, 2, 4>>>);
  static_assert(std::is_same_v<decltype(b), const tensor<float, shape<3, 3>>>);
  static_assert(std::is_same_v<decltype(c), const tensor<float, shape<3>>>);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(a(i, j, k), x(static_cast<std::size_t>(rows(i, j)), k));
  const float want_b[9] = {3, 3, 0, 13, 13, 10, 23, 23, 20};
  for (std::size_t k = 0; k < 9; ++k) EXPECT_EQ(b[k], want_b[k]);
  EXPECT_EQ(c[0], 1);
  EXPECT_EQ(c[1], 11);
  EXPECT_EQ(c[2], 21);
}

TEST(Take, OutOfRangeFillsAndNegativeCountsFromTheEnd) {
  const auto x = x34();
  const tensor<I32, shape<6>> idx{-1, -4, -5, 4, 100, 2};
  const auto [fill, clip] = jit([](auto v, auto k) {
    return std::make_tuple(tessel::take<1>(v, k), tessel::take<1, index_mode::clip>(v, k));
  })(x, idx);
  for (std::size_t i = 0; i < 3; ++i) {
    const float r = static_cast<float>(10 * i);
    // fill: -1 -> 3, -4 -> 0, -5, 4 and 100 are out of range: NaN.
    EXPECT_EQ(fill(i, 0), r + 3);
    EXPECT_EQ(fill(i, 1), r + 0);
    EXPECT_TRUE(std::isnan(fill(i, 2)));
    EXPECT_TRUE(std::isnan(fill(i, 3)));
    EXPECT_TRUE(std::isnan(fill(i, 4)));
    EXPECT_EQ(fill(i, 5), r + 2);
    // clip: negatives clamp to 0, large ones to 3.
    const float want_clip[6] = {0, 0, 0, 3, 3, 2};
    for (std::size_t j = 0; j < 6; ++j) EXPECT_EQ(clip(i, j), r + want_clip[j]);
  }
}

TEST(Take, FillValuesOfOtherDtypes) {
  const tensor<I32, shape<3>> s{7, 8, 9};
  const tensor<std::uint32_t, shape<3>> u{7, 8, 9};
  const tensor<bool, shape<3>> p{false, false, false};
  const tensor<tessel::bfloat16, shape<3>> h{tessel::bfloat16(1.5f), tessel::bfloat16(2.5f), tessel::bfloat16(3.5f)};
  const tensor<I32, shape<2>> idx{2, 3};
  const auto [ts, tu, tp, th] = jit([](auto a, auto b, auto c, auto d, auto k) {
    return std::make_tuple(tessel::take<0>(a, k), tessel::take<0>(b, k), tessel::take<0>(c, k), tessel::take<0>(d, k));
  })(s, u, p, h, idx);
  EXPECT_EQ(ts[0], 9);
  EXPECT_EQ(ts[1], std::numeric_limits<I32>::min());
  EXPECT_EQ(tu[0], 9u);
  EXPECT_EQ(tu[1], std::numeric_limits<std::uint32_t>::max());
  EXPECT_FALSE(tp[0]);
  EXPECT_TRUE(tp[1]);
  EXPECT_EQ(static_cast<float>(th[0]), 3.5f);
  EXPECT_TRUE(std::isnan(static_cast<float>(th[1])));
}

TEST(ScatterAdd, RepeatedIndicesAccumulate) {
  const auto x = x34();
  // Columns 1, 1, 3, -1 (= 3), 7 (dropped): column 1 gets two updates, column 3 two.
  const tensor<I32, shape<5>> idx{1, 1, 3, -1, 7};
  tensor<float, shape<3, 5>> u;
  for (std::size_t k = 0; k < 15; ++k) u[k] = static_cast<float>(k + 1) * 0.5f;
  const auto [y, c] = jit([](auto v, auto k, auto w) {
    return std::make_tuple(tessel::scatter_add<1>(v, k, w), tessel::scatter_add<1, index_mode::clip>(v, k, w));
  })(x, idx, u);
  static_assert(std::is_same_v<decltype(y), const tensor<float, shape<3, 4>>>);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(y(i, 0), x(i, 0));
    EXPECT_EQ(y(i, 1), x(i, 1) + u(i, 0) + u(i, 1));
    EXPECT_EQ(y(i, 2), x(i, 2));
    EXPECT_EQ(y(i, 3), x(i, 3) + u(i, 2) + u(i, 3));
    // clip: -1 goes to column 0, 7 to column 3.
    EXPECT_EQ(c(i, 0), x(i, 0) + u(i, 3));
    EXPECT_EQ(c(i, 1), x(i, 1) + u(i, 0) + u(i, 1));
    EXPECT_EQ(c(i, 3), x(i, 3) + u(i, 2) + u(i, 4));
  }
}

TEST(ScatterAdd, RowsByIndicesOfRankTwoAndIntegers) {
  // An embedding gradient: rows of a [4, 2] table, indices [2, 3] with repeats.
  const tensor<I32, shape<2, 3>> ids{0, 2, 0, 3, 0, 2};
  tensor<I32, shape<2, 3, 2>> g;
  for (std::size_t k = 0; k < 12; ++k) g[k] = static_cast<I32>(k);
  const tensor<I32, shape<4, 2>> zero;
  const auto t = jit([](auto z, auto k, auto w) { return tessel::scatter_add<0>(z, k, w); })(zero, ids, g);
  // Row 0 gets updates (0,0), (0,2), (1,1); row 2 gets (0,1), (1,2); row 3 gets (1,0); row 1 nothing.
  const I32 want[8] = {0 + 4 + 8, 1 + 5 + 9, 0, 0, 2 + 10, 3 + 11, 6, 7};
  for (std::size_t k = 0; k < 8; ++k) EXPECT_EQ(t[k], want[k]) << "element " << k;
}

TEST(ScatterAdd, IsTheTransposeOfTake) {
  // <take(x, i), y> = <x, scatter_add(0, i, y)> for in-range indices.
  const auto x = x34();
  const tensor<I32, shape<3>> idx{2, 0, 2};
  tensor<float, shape<3, 3>> y;
  for (std::size_t k = 0; k < 9; ++k) y[k] = static_cast<float>(k) - 4.0f;
  const auto [lhs, rhs] = jit([](auto v, auto k, auto w) {
    return std::make_tuple(tessel::sum(tessel::take<1>(v, k) * w), tessel::sum(v * tessel::scatter_add<1>(v * 0.0f, k, w)));
  })(x, idx, y);
  EXPECT_FLOAT_EQ(lhs[0], rhs[0]);
}
}  // namespace
