// Loop, row and column kernels work a tile (1024 elements) at a time; these shapes are several tiles long and
// their runs (an iota's equal values, a broadcast's copied or filled stretches, a reduction's rows)
// straddle the tile boundaries. Each result is checked element by element against a plain loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "tessel/jit.hpp"
#include "tessel/ops.hpp"

namespace {
using tessel::bfloat16;
using tessel::jit;
using tessel::shape;
using tensor_f = tessel::tensor<float, shape<3, 5, 700>>;

float value(std::size_t k) { return static_cast<float>(static_cast<int>(k * 7919 % 1009) - 504) / 64.0f; }

template <class T>
void fill(T& t) {
  for (std::size_t k = 0; k < T::size; ++k) t[k] = value(k);
}

TEST(Tiles, IotaAlongEachAxis) {  // strides 3500, 700 and 1 against tiles of 1024
  tensor_f x;
  fill(x);
  const auto [a0, a1, a2] = jit([](auto v) {
    using S = shape<3, 5, 700>;
    return std::make_tuple(tessel::broadcasted_iota<std::int32_t, S, 0>(v), tessel::broadcasted_iota<std::int32_t, S, 1>(v),
                           tessel::convert_element_type<float>(tessel::broadcasted_iota<std::int32_t, S, 2>(v)) + v);
  })(x);
  for (std::size_t k = 0; k < tensor_f::size; ++k) {
    ASSERT_EQ(a0[k], static_cast<std::int32_t>(k / 3500)) << k;
    ASSERT_EQ(a1[k], static_cast<std::int32_t>(k / 700 % 5)) << k;
    ASSERT_EQ(a2[k], static_cast<float>(k % 700) + x[k]) << k;
  }
}

TEST(Tiles, BroadcastRunsCopiedFilledAndWidened) {
  tessel::tensor<float, shape<3, 1, 40, 40>> bias;  // spread over 5 heads: runs of 1600
  tessel::tensor<float, shape<3, 5, 40, 40>> scores;
  tessel::tensor<bool, shape<3, 40>> mask;           // over queries: runs of 40 copied
  tessel::tensor<float, shape<3, 40>> rows;          // over a new trailing axis: runs of 50 filled
  tessel::tensor<bfloat16, shape<3, 1, 40, 40>> narrow;
  fill(bias), fill(scores), fill(rows);
  for (std::size_t k = 0; k < mask.size; ++k) mask[k] = k % 3 != 0;
  for (std::size_t k = 0; k < narrow.size; ++k) narrow[k] = bfloat16(value(k + 11));
  const auto [spread, masked, filled, widened] = jit([](auto b, auto s, auto m, auto r, auto n) {
    using S = shape<3, 5, 40, 40>;
    return std::make_tuple(s + b, tessel::convert_element_type<float>(tessel::broadcast_in_dim<shape<3, 1, 40, 40>, 0, 3>(m)),
                           tessel::broadcast_in_dim<shape<3, 40, 50>, 0, 1>(r) * 2.0f,
                           tessel::convert_element_type<float>(tessel::broadcast_in_dim<S, 0, 1, 2, 3>(n)) + s);
  })(bias, scores, mask, rows, narrow);
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t h = 0; h < 5; ++h)
      for (std::size_t ij = 0; ij < 1600; ++ij) {
        const std::size_t k = (b * 5 + h) * 1600 + ij;
        ASSERT_EQ(spread[k], scores[k] + bias[b * 1600 + ij]) << k;
        ASSERT_EQ(widened[k], static_cast<float>(narrow[b * 1600 + ij]) + scores[k]) << k;
      }
  for (std::size_t k = 0; k < masked.size; ++k) ASSERT_EQ(masked[k], mask[k / 1600 * 40 + k % 40] ? 1.0f : 0.0f) << k;
  for (std::size_t k = 0; k < filled.size; ++k) ASSERT_EQ(filled[k], rows[k / 50] * 2.0f) << k;
}

// A row kernel's tiles take 25 rows of 40: some lie within one head, where the bias is read in place, and
// some straddle two heads, where it is gathered.
TEST(Tiles, BroadcastInARowKernelReadInPlaceOrGathered) {
  tessel::tensor<float, shape<3, 1, 40, 40>> bias;
  tessel::tensor<float, shape<3, 5, 40, 40>> scores;
  fill(bias), fill(scores);
  const auto y = jit([](auto b, auto s) { return tessel::softmax(s + b); })(bias, scores);
  for (std::size_t row = 0; row < 3 * 5 * 40; ++row) {
    const std::size_t b = row / 200, i = row % 40;
    double z[40], most = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < 40; ++j) {
      z[j] = static_cast<double>(scores[row * 40 + j] + bias[(b * 40 + i) * 40 + j]);
      most = std::max(most, z[j]);
    }
    for (double& v : z) sum += v = std::exp(v - most);
    for (std::size_t j = 0; j < 40; ++j) ASSERT_NEAR(y[row * 40 + j], z[j] / sum, 1e-6) << row << ", " << j;
  }
}

TEST(Tiles, ReductionsToFewOutputs) {
  tessel::tensor<float, shape<3000, 3>> tall;  // 3 outputs over 3000 rows
  tessel::tensor<float, shape<300, 700>> wide;  // to one value
  tessel::tensor<std::int32_t, shape<300, 700>> counts;
  fill(tall), fill(wide);
  for (std::size_t k = 0; k < counts.size; ++k) counts[k] = static_cast<std::int32_t>(k % 13) - 6;
  const auto [columns, squares, largest, total] = jit([](auto t, auto w, auto c) {
    return std::make_tuple(tessel::sum<0>(t + 0.5f), tessel::sum(w * w), tessel::max(w), tessel::sum(c));
  })(tall, wide, counts);
  // Several outputs add their rows in order: the same float sums as this loop, bit for bit.
  for (std::size_t j = 0; j < 3; ++j) {
    float acc = 0.0f;
    for (std::size_t r = 0; r < 3000; ++r) acc += tall[r * 3 + j] + 0.5f;
    EXPECT_EQ(columns[j], acc) << j;
  }
  double squares_ref = 0;
  std::int64_t total_ref = 0;
  for (std::size_t k = 0; k < wide.size; ++k) squares_ref += static_cast<double>(wide[k]) * wide[k];
  for (std::size_t k = 0; k < counts.size; ++k) total_ref += counts[k];
  EXPECT_NEAR(squares.data()[0], squares_ref, 1e-5 * squares_ref);
  EXPECT_EQ(largest.data()[0], *std::max_element(wide.data(), wide.data() + wide.size));
  EXPECT_EQ(total.data()[0], total_ref);
}

// A kernel's members share a few tiles (run/implementation.hpp, assign_tile_slots): a tile passes to a
// later member once every reader of its value has run. Here early values are read again at the very end,
// past a chain of members that would take their tiles, directly and through a reshape (which reads its
// operand's tile in place), in a loop kernel and in a row kernel.
TEST(Tiles, ATileIsHandedOnOnlyAfterItsLastReader) {
  tensor_f x;
  fill(x);
  const auto [loop, reshaped, rows] = jit([](auto v) {
    const auto early = v * 3.0f;
    const auto chain = tessel::tanh((tessel::exp(-(v * v)) + 1.0f) * (v + 2.0f) - v) * 0.5f;
    const auto flat = tessel::reshape<shape<15, 700>>(v - 1.0f);
    const auto later = tessel::sqrt(tessel::abs(flat * flat + 2.0f)) * flat - 0.25f;
    const auto shifted = v - tessel::broadcast_in_dim<shape<3, 5, 700>, 0, 1>(tessel::max<2>(v));
    const auto p = tessel::exp(shifted) / tessel::broadcast_in_dim<shape<3, 5, 700>, 0, 1>(tessel::sum<2>(tessel::exp(shifted)));
    return std::make_tuple(chain + early, later + flat, p * shifted + v);
  })(x);
  for (std::size_t k = 0; k < tensor_f::size; ++k) {
    const float v = x[k], f = v - 1.0f;
    const float chain = std::tanh((std::exp(-(v * v)) + 1.0f) * (v + 2.0f) - v) * 0.5f;
    ASSERT_NEAR(loop[k], chain + v * 3.0f, 1e-5f * (1.0f + std::abs(v * 3.0f))) << k;
    ASSERT_NEAR(reshaped[k], std::sqrt(std::abs(f * f + 2.0f)) * f - 0.25f + f, 1e-5f * (1.0f + f * f)) << k;
  }
  for (std::size_t r = 0; r < 15; ++r) {
    const float* row = x.data() + r * 700;
    const float top = *std::max_element(row, row + 700);
    double total = 0;
    for (std::size_t j = 0; j < 700; ++j) total += std::exp(static_cast<double>(row[j] - top));
    for (std::size_t j = 0; j < 700; ++j) {
      const double shifted = row[j] - top, want = std::exp(shifted) / total * shifted + row[j];
      ASSERT_NEAR(rows[r * 700 + j], want, 1e-5 * (1.0 + std::abs(want))) << r << ", " << j;
    }
  }
}

// A broadcast whose readers take one-value operands (binary elementwise, select) is not spread into a
// tile (run/implementation.hpp, member_form): a literal or a one-element value is passed as one value,
// on either side of operations that do not commute; a row kernel's per-row value is passed row by row,
// and the tile holding it is handed on to the broadcast's last reader, here past a chain of members that
// would take it. Rows of 700 (one per pass) and of 128 (eight per pass, the last pass seven).
template <std::size_t Inner>
void check_one_value_operands() {
  using S = shape<3, 5, Inner>;
  tessel::tensor<float, S> x;
  tessel::tensor<std::int32_t, S> k;
  tessel::tensor<float, shape<>> s;
  tessel::tensor<bfloat16, shape<>> h;
  fill(x);
  for (std::size_t i = 0; i < S::size; ++i) k[i] = static_cast<std::int32_t>(i % 11) - 5;
  s[0] = 1.5f;
  h[0] = bfloat16(-0.75f);
  const auto [left, right, picked, ints, rows] = jit([](auto v, auto ks, auto sv, auto hv) {
    const auto top = tessel::broadcast_in_dim<S, 0, 1>(tessel::max<2>(v));
    const auto shifted = v - top;
    const auto chain = tessel::tanh(shifted * 2.0f + 1.0f) * shifted;
    return std::make_tuple(2.0f - v / sv, sv / (v * v + 1.0f) - tessel::convert_element_type<float>(hv) * v,
                           tessel::select(v > 0.5f, v, 0.0f) + tessel::select(v > 0.0f, -1.0f, v * 3.0f),
                           (ks - 3) * 2 + tessel::select(ks > 0, ks, 7), chain * top + shifted);
  })(x, k, s, h);
  for (std::size_t i = 0; i < S::size; ++i) {
    const float v = x[i];
    ASSERT_FLOAT_EQ(left[i], 2.0f - v / 1.5f) << i;
    ASSERT_FLOAT_EQ(right[i], 1.5f / (v * v + 1.0f) - -0.75f * v) << i;
    ASSERT_FLOAT_EQ(picked[i], (v > 0.5f ? v : 0.0f) + (v > 0.0f ? -1.0f : v * 3.0f)) << i;
    ASSERT_EQ(ints[i], (k[i] - 3) * 2 + (k[i] > 0 ? k[i] : 7)) << i;
  }
  for (std::size_t r = 0; r < 15; ++r) {
    const float* row = x.data() + r * Inner;
    const float top = *std::max_element(row, row + Inner);
    for (std::size_t j = 0; j < Inner; ++j) {
      const float shifted = row[j] - top, want = std::tanh(shifted * 2.0f + 1.0f) * shifted * top + shifted;
      ASSERT_NEAR(rows[r * Inner + j], want, 1e-5f * (1.0f + std::abs(want))) << r << ", " << j;
    }
  }
}

TEST(Tiles, OneValueOperandsAreReadAsOneValue) {
  check_one_value_operands<700>();
  check_one_value_operands<128>();
}

}  // namespace
