// Elementwise primitives through jit against double references: f32 and bf16, odd sizes (so SIMD bodies
// and scalar tails both run), NumPy broadcasting, literals, and the integer semantics XLA defines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>

#include "reference.hpp"
#include "unary_table.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::bfloat16;
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
using tessel::testing::within_ulp;

template <class Op, class Ref>
void check_unary(Op op, Ref ref, double lo, double hi, double max_ulp) {
  const auto x = random_tensor<float, shape<3, 67>>(7, lo, hi);
  const auto y = jit(op)(x);
  EXPECT_TRUE(within_ulp(y, [&](std::size_t i) { return ref(static_cast<double>(x[i])); }, max_ulp, 1e-30));
  // bf16 in, bf16 out: computed in f32 and rounded once, so within one bf16 rounding of the reference.
  const auto xb = x.astype<bfloat16>();
  const auto yb = jit(op)(xb);
  for (std::size_t i = 0; i < xb.size; ++i) {
    const double r = ref(static_cast<double>(static_cast<float>(xb[i])));
    EXPECT_NEAR(static_cast<float>(yb[i]), r, std::abs(r) * (1.0 / 128) + 1e-30) << "bf16 element " << i;
  }
}

// Every row of the unary table, on its near range, within the bound of the path jit takes by default
// (xsimd or Highway; the wider of the two bounds).
#define TESSEL_ELEMENTWISE_UNARY(op, ref, lo, hi, log_spaced, scalar_ulp, xsimd_ulp, hwy_ulp, near_lo, near_hi, smooth) \
  TEST(ElementwiseUnary, op) {                                                                                          \
    check_unary([](auto x) { return tessel::op(x); }, ref, near_lo, near_hi, std::max<double>(xsimd_ulp, hwy_ulp));     \
  }
TESSEL_UNARY_TABLE(TESSEL_ELEMENTWISE_UNARY)

TEST(Elementwise, NegationOperator) {
  check_unary([](auto x) { return -x; }, [](double v) { return -v; }, -5, 5, 0);
}

// cbrt's table row checks it on positive arguments (where its gradient is checked too); its negatives here.
TEST(Elementwise, CbrtOfNegatives) {
  check_unary([](auto x) { return tessel::cbrt(x); }, [](double v) { return std::cbrt(v); }, -30, -0.1, 2);
}

TEST(Elementwise, ErfInvInvertsErf) {
  const auto x = random_tensor<float, shape<101>>(3, -0.95, 0.95);
  const auto y = jit([](auto v) { return tessel::erf(tessel::erf_inv(v)); })(x);
  EXPECT_TRUE(tessel::testing::all_close(y, x, {.rtol = 1e-5, .atol = 1e-6}));
}

// out[i] from a broadcast of a [4,1,5] and a [3,5] operand: the flat index of each operand.
std::size_t lhs_index(std::size_t i) { return (i / 15) * 5 + i % 5; }
std::size_t rhs_index(std::size_t i) { return i % 15; }

template <class Op, class Ref>
void check_binary(Op op, Ref ref, double lo, double hi) {
  const auto a = random_tensor<float, shape<4, 1, 5>>(11, lo, hi);
  const auto b = random_tensor<float, shape<3, 5>>(12, lo, hi);
  const auto y = jit(op)(a, b);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>, tensor<float, shape<4, 3, 5>>>);
  EXPECT_TRUE(within_ulp(y, [&](std::size_t i) {
    return static_cast<double>(static_cast<float>(ref(static_cast<double>(a[lhs_index(i)]), static_cast<double>(b[rhs_index(i)]))));
  }, 1));
}

TEST(Elementwise, BinaryBroadcasts) {
  check_binary([](auto a, auto b) { return a + b; }, [](double x, double y) { return x + y; }, -5, 5);
  check_binary([](auto a, auto b) { return a - b; }, [](double x, double y) { return x - y; }, -5, 5);
  check_binary([](auto a, auto b) { return a * b; }, [](double x, double y) { return x * y; }, -5, 5);
  check_binary([](auto a, auto b) { return a / b; }, [](double x, double y) { return x / y; }, 0.5, 5);
  check_binary([](auto a, auto b) { return tessel::max(a, b); }, [](double x, double y) { return std::max(x, y); }, -5, 5);
  check_binary([](auto a, auto b) { return tessel::min(a, b); }, [](double x, double y) { return std::min(x, y); }, -5, 5);
  check_binary([](auto a, auto b) { return tessel::pow(a, b); }, [](double x, double y) { return std::pow(x, y); }, 0.1, 3);
}

// A broadcast operand read into a fused loop's tiles, f32 and bf16, in each of the executor's ways: a bias
// over rows (the operand is the result's trailing dims), runs of the operand's last axis (an axis of 1
// before it), and one value per row (its leading dims); 37 channels leave runs that cross tiles.
template <class T>
void check_broadcast_reads() {
  const auto x = random_tensor<float, shape<5, 9, 37>>(41, -4.0, 4.0).template astype<T>();
  const auto bias = random_tensor<float, shape<37>>(42, -4.0, 4.0).template astype<T>();
  const auto per_image = random_tensor<float, shape<5, 1, 37>>(43, -4.0, 4.0).template astype<T>();
  const auto per_row = random_tensor<float, shape<5, 9, 1>>(44, -4.0, 4.0).template astype<T>();
  const auto [a, b, c] = jit([](auto x, auto bias, auto per_image, auto per_row) {
    return std::make_tuple(x + bias, x * per_image, x - per_row);
  })(x, bias, per_image, per_row);
  for (std::size_t n = 0; n < 5; ++n)
    for (std::size_t r = 0; r < 9; ++r)
      for (std::size_t k = 0; k < 37; ++k) {
        const std::size_t i = (n * 9 + r) * 37 + k;
        const float v = static_cast<float>(x[i]);
        ASSERT_EQ(a[i], T(v + static_cast<float>(bias[k]))) << "bias, element " << i;
        ASSERT_EQ(b[i], T(v * static_cast<float>(per_image[n * 37 + k]))) << "per image, element " << i;
        ASSERT_EQ(c[i], T(v - static_cast<float>(per_row[n * 9 + r]))) << "per row, element " << i;
      }
}

TEST(Elementwise, BroadcastOperandsReadAsTheScalarRule) {
  check_broadcast_reads<float>();
  check_broadcast_reads<bfloat16>();
}

TEST(Elementwise, MaxAndMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  tensor<float, shape<4>> a{nan, 1, 2, nan}, b{1, nan, 3, nan};
  const auto mx = jit([](auto x, auto y) { return tessel::max(x, y); })(a, b);
  const auto mn = jit([](auto x, auto y) { return tessel::min(x, y); })(a, b);
  for (std::size_t i : {0u, 1u, 3u}) EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << i;
  EXPECT_EQ(mx[2], 3.0f);
  EXPECT_EQ(mn[2], 2.0f);
}

TEST(Elementwise, ComparisonsGivePred) {
  tensor<float, shape<5>> a{1, 2, 3, std::numeric_limits<float>::quiet_NaN(), -1};
  const auto [lt, le, gt, ge, eq, ne] = jit([](auto x) {
    return std::make_tuple(x < 2.0f, x <= 2.0f, x > 2.0f, x >= 2.0f, x == 2.0f, x != 2.0f);
  })(a);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(lt)>, tensor<bool, shape<5>>>);
  EXPECT_EQ(lt, (tensor<bool, shape<5>>{true, false, false, false, true}));
  EXPECT_EQ(le, (tensor<bool, shape<5>>{true, true, false, false, true}));
  EXPECT_EQ(gt, (tensor<bool, shape<5>>{false, false, true, false, false}));
  EXPECT_EQ(ge, (tensor<bool, shape<5>>{false, true, true, false, false}));
  EXPECT_EQ(eq, (tensor<bool, shape<5>>{false, true, false, false, false}));
  EXPECT_EQ(ne, (tensor<bool, shape<5>>{true, false, true, true, true}));
}

TEST(Elementwise, IntegersFollowXla) {
  constexpr std::int32_t lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
  tensor<std::int32_t, shape<6>> a{7, -7, 5, lo, hi, lo}, b{2, 2, 0, -1, 1, 1};
  const auto [q, s, p, m, ab] = jit([](auto x, auto y) { return std::make_tuple(x / y, x + y, x * y, -x, tessel::abs(x)); })(a, b);
  EXPECT_EQ(q, (tensor<std::int32_t, shape<6>>{3, -3, -1, lo, hi, lo}));  // toward zero; x/0 = -1; MIN/-1 = MIN
  EXPECT_EQ(s, (tensor<std::int32_t, shape<6>>{9, -5, 5, hi, lo, lo + 1}));  // wraps
  EXPECT_EQ(p, (tensor<std::int32_t, shape<6>>{14, -14, 0, lo, hi, lo}));
  EXPECT_EQ(m, (tensor<std::int32_t, shape<6>>{-7, 7, -5, lo, -hi, lo}));
  EXPECT_EQ(ab, (tensor<std::int32_t, shape<6>>{7, 7, 5, lo, hi, lo}));
  tensor<std::uint32_t, shape<3>> u{5, 0, 1}, v{0, 1, 2};
  const auto uq = jit([](auto x, auto y) { return std::make_tuple(x / y, x - y); })(u, v);
  EXPECT_EQ(std::get<0>(uq), (tensor<std::uint32_t, shape<3>>{0xffffffffu, 0, 0}));
  EXPECT_EQ(std::get<1>(uq), (tensor<std::uint32_t, shape<3>>{5, 0xffffffffu, 0xffffffffu}));
}

TEST(Elementwise, SelectAndConvert) {
  tensor<float, shape<2, 3>> x{-1.5f, 2.5f, std::numeric_limits<float>::quiet_NaN(), 3e9f, -3e9f, 0.5f};
  const auto [r, i, p, u] = jit([](auto v) {
    return std::make_tuple(tessel::select(v > 0.0f, v, 0.0f), tessel::convert_element_type<std::int32_t>(v),
                           tessel::convert_element_type<bool>(v), tessel::convert_element_type<std::uint32_t>(v));
  })(x);
  EXPECT_EQ(r[0], 0.0f);
  EXPECT_EQ(r[1], 2.5f);
  EXPECT_EQ(i, (tensor<std::int32_t, shape<2, 3>>{-1, 2, 0, std::numeric_limits<std::int32_t>::max(),
                                                  std::numeric_limits<std::int32_t>::min(), 0}));
  EXPECT_EQ(p, (tensor<bool, shape<2, 3>>{true, true, true, true, true, true}));
  EXPECT_EQ(u[3], 3000000000u);
  EXPECT_EQ(u[4], 0u);
  tensor<float, shape<1>> tie{1.00390625f};
  const auto rounded = jit([](auto v) { return tessel::convert_element_type<float>(tessel::convert_element_type<bfloat16>(v)); })(tie);
  EXPECT_EQ(rounded[0], 1.0f);  // the explicit cast rounds even inside a fused loop
}

// check<T, N>() for the tile dtypes at sizes that leave no SIMD body (1), only a tail (7) or both (127,
// 1000, 13 * 17).
template <class Check>
void for_dtypes_and_odd_sizes(Check check) {
  check.template operator()<float, 1>();
  check.template operator()<float, 7>();
  check.template operator()<float, 127>();
  check.template operator()<float, 1000>();
  check.template operator()<float, 13 * 17>();
  check.template operator()<bfloat16, 7>();
  check.template operator()<bfloat16, 1000>();
  check.template operator()<bfloat16, 13 * 17>();
  check.template operator()<std::int32_t, 127>();
  check.template operator()<std::int32_t, 13 * 17>();
}

// select's loop (vectorized over the predicate's bytes) against the scalar rule, for every dtype it takes
// (for_dtypes_and_odd_sizes).
template <class T, std::size_t N>
void check_select() {
  const auto x = random_tensor<float, shape<N>>(31, -1.0, 1.0);
  const auto a = random_tensor<float, shape<N>>(32, -100.0, 100.0).template astype<T>();
  const auto b = random_tensor<float, shape<N>>(35, -100.0, 100.0).template astype<T>();
  const auto r = jit([](auto p, auto a, auto b) { return tessel::select(p > 0.0f, a, b); })(x, a, b);
  for (std::size_t i = 0; i < N; ++i) ASSERT_EQ(r[i], x[i] > 0.0f ? a[i] : b[i]) << "element " << i << " of " << N;
}
template <std::size_t N>
void check_select_pred() {
  const auto x = random_tensor<float, shape<N>>(33, -1.0, 1.0);
  const auto y = random_tensor<float, shape<N>>(34, -1.0, 1.0);
  const auto r = jit([](auto x, auto y) { return tessel::select(x > y, x > 0.0f, y > 0.0f); })(x, y);
  for (std::size_t i = 0; i < N; ++i) ASSERT_EQ(r[i], x[i] > y[i] ? x[i] > 0.0f : y[i] > 0.0f) << "element " << i << " of " << N;
}

TEST(Elementwise, SelectTakesTheScalarRulesChoice) {
  for_dtypes_and_odd_sizes([]<class T, std::size_t N>() { check_select<T, N>(); });
  check_select_pred<7>();
  check_select_pred<13 * 17>();
}

// A one-value operand on either side of each binary rule and in either branch of select (a scalar argument
// or a literal, passed as one value rather than spread into a tile: run/implementation.hpp, member_form)
// against the scalar rule, for f32, bf16 and s32 (for_dtypes_and_odd_sizes).
template <class T, std::size_t N>
void check_one_value_sides() {
  using C = std::conditional_t<std::is_integral_v<T>, T, float>;  // what a tile computes in
  const bool ints = std::is_integral_v<T>;
  const auto x = random_tensor<float, shape<N>>(51, ints ? 1.0 : 0.5, ints ? 9.0 : 4.0).template astype<T>();
  tensor<T, shape<>> s;
  s[0] = T(ints ? 3.0f : 1.75f);
  const auto [sums, differences, products, quotients, extremes, picked] = jit([](auto v, auto k) {
    return std::make_tuple(std::make_tuple(v + k, k + v), std::make_tuple(v - k, k - v, v - 2, 2 - v),
                           std::make_tuple(v * k, k * v), std::make_tuple(v / k, k / v),
                           std::make_tuple(tessel::max(v, k), tessel::max(k, v), tessel::min(v, k), tessel::min(k, v), v > k, k > v),
                           std::make_tuple(tessel::select(v > k, v, 2), tessel::select(v > k, 2, v)));
  })(x, s);
  const C k = static_cast<C>(s[0]), two = 2;
  auto as_t = [](C c) { return T(c); };
  for (std::size_t i = 0; i < N; ++i) {
    const C v = static_cast<C>(x[i]);
    SCOPED_TRACE(::testing::Message() << "element " << i << " of " << N);
    ASSERT_EQ(std::get<0>(sums)[i], as_t(v + k));
    ASSERT_EQ(std::get<1>(sums)[i], as_t(k + v));
    ASSERT_EQ(std::get<0>(differences)[i], as_t(v - k));
    ASSERT_EQ(std::get<1>(differences)[i], as_t(k - v));
    ASSERT_EQ(std::get<2>(differences)[i], as_t(v - two));
    ASSERT_EQ(std::get<3>(differences)[i], as_t(two - v));
    ASSERT_EQ(std::get<0>(products)[i], as_t(v * k));
    ASSERT_EQ(std::get<1>(products)[i], as_t(k * v));
    ASSERT_EQ(std::get<0>(quotients)[i], as_t(v / k));
    ASSERT_EQ(std::get<1>(quotients)[i], as_t(k / v));
    ASSERT_EQ(std::get<0>(extremes)[i], as_t(std::max(v, k)));
    ASSERT_EQ(std::get<1>(extremes)[i], as_t(std::max(k, v)));
    ASSERT_EQ(std::get<2>(extremes)[i], as_t(std::min(v, k)));
    ASSERT_EQ(std::get<3>(extremes)[i], as_t(std::min(k, v)));
    ASSERT_EQ(std::get<4>(extremes)[i], v > k);
    ASSERT_EQ(std::get<5>(extremes)[i], k > v);
    ASSERT_EQ(std::get<0>(picked)[i], as_t(v > k ? v : two));
    ASSERT_EQ(std::get<1>(picked)[i], as_t(v > k ? two : v));
  }
}

TEST(Elementwise, OneValueOperandsTakeTheScalarRulesResult) {
  for_dtypes_and_odd_sizes([]<class T, std::size_t N>() { check_one_value_sides<T, N>(); });
}

TEST(Elementwise, LiteralsAreTypedByTheTensor) {
  tensor<std::int32_t, shape<3>> k{1, 2, 3};
  const auto y = jit([](auto v) { return v * 2 + 1; })(k);
  EXPECT_EQ(y, (tensor<std::int32_t, shape<3>>{3, 5, 7}));
  tensor<bfloat16, shape<2>> h{bfloat16(1.0f), bfloat16(2.0f)};
  const auto z = jit([](auto v) { return v * 0.5f; })(h);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(z)>, tensor<bfloat16, shape<2>>>);
  EXPECT_EQ(static_cast<float>(z[1]), 1.0f);
}

TEST(Elementwise, ScalarArgumentsAreParameters) {
  tensor<float, shape<3>> x{1, 2, 3};
  const auto f = [](auto v, auto a) { return v * a; };
  EXPECT_EQ(jit(f)(x, 2.0f), (tensor<float, shape<3>>{2, 4, 6}));
  EXPECT_EQ(jit(f)(x, -1.0), (tensor<float, shape<3>>{-1, -2, -3}));  // a double argument is taken as f32
}
}  // namespace
