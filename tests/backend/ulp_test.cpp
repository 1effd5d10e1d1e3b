// Every approximated function against a double reference over its documented range, on both the
// SIMD path (xsimd batches) and the scalar path (the tails of every tile): the bound in each header.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference.hpp"
#include "tessel/lax.hpp"

namespace {
using tessel::testing::ulp_error;

struct sweep {
  double worst_simd = 0, worst_scalar = 0, worst_disagreement = 0;
};

template <class Rule>
sweep measure(double (*ref)(double), double lo, double hi, bool log_spaced = false) {
  const std::size_t n = 1 << 18;
  std::vector<float> x(n), simd(n), scalar(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double t = (static_cast<double>(i) + 0.5) / n;
    x[i] = static_cast<float>(log_spaced ? std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * t) : lo + (hi - lo) * t);
  }
  tessel::prim::map_unary<Rule, float, float>(x.data(), simd.data(), n);
  for (std::size_t i = 0; i < n; ++i) scalar[i] = Rule::apply(x[i]);
  sweep s;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = ref(x[i]);
    s.worst_simd = std::max(s.worst_simd, ulp_error(simd[i], r));
    s.worst_scalar = std::max(s.worst_scalar, ulp_error(scalar[i], r));
    s.worst_disagreement = std::max(s.worst_disagreement, ulp_error(simd[i], scalar[i]));
  }
  return s;
}

#define TESSEL_ULP_CASE(op, ref, lo, hi, bound, ...)                                                   \
  TEST(Ulp, op) {                                                                                     \
    const sweep s = measure<tessel::prim::op##_rule>(ref, lo, hi __VA_OPT__(, ) __VA_ARGS__);         \
    EXPECT_LE(s.worst_simd, bound) << "SIMD path";                                                    \
    EXPECT_LE(s.worst_scalar, bound) << "scalar path";                                                \
    EXPECT_LE(s.worst_disagreement, 2 * (bound) + 1) << "the two paths disagree";                     \
    RecordProperty("max_ulp_simd", std::to_string(s.worst_simd));                                     \
  }

TESSEL_ULP_CASE(exp, [](double v) { return std::exp(v); }, -87, 88, 2)
TESSEL_ULP_CASE(log, [](double v) { return std::log(v); }, 1e-30, 1e30, 1, true)
TESSEL_ULP_CASE(log1p, [](double v) { return std::log1p(v); }, -0.99, 10, 1)
TESSEL_ULP_CASE(expm1, [](double v) { return std::expm1(v); }, -10, 10, 2)
TESSEL_ULP_CASE(tanh, [](double v) { return std::tanh(v); }, -10, 10, 3)
TESSEL_ULP_CASE(logistic, [](double v) { return 1 / (1 + std::exp(-v)); }, -20, 20, 3)
TESSEL_ULP_CASE(sqrt, [](double v) { return std::sqrt(v); }, 0, 1e6, 0.5)
TESSEL_ULP_CASE(rsqrt, [](double v) { return 1 / std::sqrt(v); }, 1e-6, 1e6, 2, true)
TESSEL_ULP_CASE(sin, [](double v) { return std::sin(v); }, -100, 100, 2.5)
TESSEL_ULP_CASE(cos, [](double v) { return std::cos(v); }, -100, 100, 2.5)
TESSEL_ULP_CASE(erf, [](double v) { return std::erf(v); }, -5, 5, 3)

// erf_inv against erf inverted in double by Newton's method (the bound documented in prim/erf_inv.hpp).
double erf_inv_reference(double y) {
  double x = 0;
  for (int i = 0; i < 100; ++i) x -= (std::erf(x) - y) / (2 / std::sqrt(std::acos(-1.0)) * std::exp(-x * x));
  return x;
}
TESSEL_ULP_CASE(erf_inv, erf_inv_reference, -0.9, 0.9, 4)

TEST(Ulp, SpecialValues) {
  using tessel::math::erf_inv;
  EXPECT_TRUE(std::isinf(erf_inv(1.0f)) && erf_inv(1.0f) > 0);
  EXPECT_TRUE(std::isinf(erf_inv(-1.0f)) && erf_inv(-1.0f) < 0);
  EXPECT_TRUE(std::isnan(erf_inv(1.5f)));
  EXPECT_EQ(tessel::prim::logistic_rule::apply(-200.0f), 0.0f);
  EXPECT_EQ(tessel::prim::logistic_rule::apply(200.0f), 1.0f);
  EXPECT_TRUE(std::isinf(tessel::prim::log_rule::apply(0.0f)));
}
}  // namespace
