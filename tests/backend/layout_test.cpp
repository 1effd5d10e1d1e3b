// slice, pad and concatenate through jit against index-by-index references, in every storage width,
// fused with elementwise producers and consumers.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::jit;
using tessel::pad_axis;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

TEST(Slice, StartsLimitsStrides) {
  const auto x = random_tensor<float, shape<5, 7, 3>>(1);
  const auto [a, b] = jit([](auto v) {
    return std::make_tuple(tessel::slice<std::array{1, 2, 0}, std::array{4, 7, 3}>(v),
                           tessel::slice<std::array{0, 1, 1}, std::array{5, 7, 3}, std::array{2, 3, 2}>(v));
  })(x);
  static_assert(std::is_same_v<decltype(a), const tensor<float, shape<3, 5, 3>>>);
  static_assert(std::is_same_v<decltype(b), const tensor<float, shape<3, 2, 1>>>);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 5; ++j)
      for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(a(i, j, k), x(i + 1, j + 2, k));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) EXPECT_EQ(b(i, j, 0), x(2 * i, 1 + 3 * j, 1));
}

TEST(Slice, InDimAndFusedWithElementwise) {
  const auto x = random_tensor<float, shape<4, 6>>(2);
  const auto y = jit([](auto v) { return tessel::slice_in_dim<-1, 1, 6, 2>(v * 2.0f) + 1.0f; })(x);
  static_assert(std::is_same_v<decltype(y), const tensor<float, shape<4, 3>>>);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(y(i, j), x(i, 1 + 2 * j) * 2.0f + 1.0f);
}

TEST(Slice, OtherStorageWidths) {
  tensor<std::int32_t, shape<6>> i;
  tensor<tessel::bfloat16, shape<6>> h;
  for (std::size_t k = 0; k < 6; ++k) {
    i[k] = static_cast<std::int32_t>(k * 10);
    h[k] = tessel::bfloat16(static_cast<float>(k) + 0.5f);
  }
  const auto [si, sh, sp] = jit([](auto a, auto b) {
    return std::make_tuple(tessel::slice_in_dim<0, 2, 6, 3>(a), tessel::slice_in_dim<0, 1, 3>(b),
                           tessel::slice_in_dim<0, 3, 6>(a > 20));
  })(i, h);
  EXPECT_EQ(si[0], 20);
  EXPECT_EQ(si[1], 50);
  EXPECT_EQ(static_cast<float>(sh[0]), 1.5f);
  EXPECT_EQ(static_cast<float>(sh[1]), 2.5f);
  EXPECT_TRUE(sp[0] && sp[1] && sp[2]);
}

TEST(Pad, LowHighInteriorAndNegative) {
  const auto x = random_tensor<float, shape<3, 4>>(3);
  const auto [a, b] = jit([](auto v) {
    return std::make_tuple(tessel::pad<std::array{pad_axis{1, 2, 1}, pad_axis{0, 1, 0}}>(v, -7.0f),
                           tessel::pad<std::array{pad_axis{-1, 1, 0}, pad_axis{2, -3, 2}}>(v, 0.5f));
  })(x);
  // a: rows 1 + 3 + 2 (interior) + 2 = 8, cols 4 + 1 = 5.
  static_assert(std::is_same_v<decltype(a), const tensor<float, shape<8, 5>>>);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 5; ++j) {
      const bool from_x = i >= 1 && (i - 1) % 2 == 0 && (i - 1) / 2 < 3 && j < 4;
      EXPECT_EQ(a(i, j), from_x ? x((i - 1) / 2, j) : -7.0f) << i << "," << j;
    }
  // b: rows -1 + 3 + 1 = 3 (row 0 cropped), cols 2 + 4 + 6 - 3 = 9.
  static_assert(std::is_same_v<decltype(b), const tensor<float, shape<3, 9>>>);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 9; ++j) {
      const std::size_t r = i + 1;
      const bool from_x = r < 3 && j >= 2 && (j - 2) % 3 == 0 && (j - 2) / 3 < 4;
      EXPECT_EQ(b(i, j), from_x ? x(r, (j - 2) / 3) : 0.5f) << i << "," << j;
    }
}

TEST(Pad, RunTimePaddingValueAndBf16) {
  tensor<tessel::bfloat16, shape<2>> h;
  h[0] = tessel::bfloat16(1.0f);
  h[1] = tessel::bfloat16(2.0f);
  const tensor<tessel::bfloat16, shape<>> fill{tessel::bfloat16(-3.0f)};
  const auto p = jit([](auto v, auto f) { return tessel::pad<std::array{pad_axis{1, 1, 1}}>(v, f); })(h, fill);
  const float want[] = {-3, 1, -3, 2, -3};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(static_cast<float>(p[i]), want[i]);
}

TEST(Concatenate, TwoThreeAndMany) {
  const auto a = random_tensor<float, shape<2, 3>>(4);
  const auto b = random_tensor<float, shape<1, 3>>(5);
  const auto c = random_tensor<float, shape<2, 2>>(6);
  const auto [rows, cols, many] = jit([](auto x, auto y, auto z) {
    return std::make_tuple(tessel::concatenate<0>(x, y), tessel::concatenate<-1>(x, z, x * 2.0f),
                           tessel::concatenate<0>(y, y, x, y, x));
  })(a, b, c);
  static_assert(std::is_same_v<decltype(rows), const tensor<float, shape<3, 3>>>);
  static_assert(std::is_same_v<decltype(cols), const tensor<float, shape<2, 8>>>);
  static_assert(std::is_same_v<decltype(many), const tensor<float, shape<7, 3>>>);
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(rows(0, j), a(0, j));
    EXPECT_EQ(rows(1, j), a(1, j));
    EXPECT_EQ(rows(2, j), b(0, j));
  }
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(cols(i, j), a(i, j));
    for (std::size_t j = 0; j < 2; ++j) EXPECT_EQ(cols(i, 3 + j), c(i, j));
    for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(cols(i, 5 + j), a(i, j) * 2.0f);
  }
  const float* order[] = {&b(0, 0), &b(0, 0), &a(0, 0), &a(1, 0), &b(0, 0), &a(0, 0), &a(1, 0)};
  for (std::size_t i = 0; i < 7; ++i)
    for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(many(i, j), order[i][j]) << i;
}

TEST(Layout, SliceOfPadIsTheOperand) {
  const auto x = random_tensor<float, shape<3, 5>>(7);
  const auto y = jit([](auto v) {
    auto p = tessel::pad<std::array{pad_axis{2, 1, 1}, pad_axis{1, 0, 0}}>(v, 9.0f);
    return tessel::slice<std::array{2, 1}, std::array{7, 6}, std::array{2, 1}>(p);
  })(x);
  for (std::size_t i = 0; i < 15; ++i) EXPECT_EQ(y[i], x[i]);
}
}  // namespace
