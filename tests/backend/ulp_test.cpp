// Every approximated function against a double reference over its documented range, on each of its three
// paths: scalar (one float at a time: libm, and every tile's tail), xsimd (batches of this build's
// instruction set) and Highway (the best target of this CPU, chosen at run time); each within the bound
// its header states, and the paths within the sum of their bounds of each other. hwy_math_test.cpp
// repeats the Highway sweeps on every Highway target.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "math_cases.hpp"

namespace {
namespace tm = tessel::testing::math;

#define TESSEL_ULP_CASE(op, ref, lo, hi, log_spaced, scalar_bound, xsimd_bound, hwy_bound, near_lo, near_hi, smooth) \
  TEST(Ulp, op) {                                                                                                    \
    const double bound[3] = {scalar_bound, xsimd_bound, hwy_bound};                                                  \
    const tm::errors e = tm::measure<tessel::prim::op##_rule>(ref, tm::sweep_points(lo, hi, log_spaced));            \
    for (int p = 0; p < 3; ++p) {                                                                                    \
      EXPECT_LE(e.worst[p], bound[p]) << tm::path_names[p] << " path, at x = " << e.worst_at[p];                     \
      RecordProperty(std::string("max_ulp_") + tm::path_names[p], std::to_string(e.worst[p]));                       \
    }                                                                                                                \
    EXPECT_LE(e.disagreement, std::max({bound[0] + bound[1], bound[0] + bound[2], bound[1] + bound[2]}) + 1)         \
        << "the paths disagree";                                                                                     \
  }
TESSEL_UNARY_TABLE(TESSEL_ULP_CASE)

// exp's edges on the xsimd path: finite up to ln(FLT_MAX) = 88.72 and inf beyond, gradual underflow down
// to -103.97 (within one subnormal step of e^x), then 0; NaN and the infinities as e^x has them. Every
// build runs it; the AVX-512 kernel (simd_math-inl.hpp) is the one that reaches both edges exactly.
TEST(Ulp, ExpOverflowsAndUnderflowsWhereEToTheXDoes) {
  std::vector<float> x;
  for (float v = 88.0f; v <= 88.72f; v = std::nextafter(v, 100.0f)) x.push_back(v);
  for (float v = -103.9f; v <= -87.0f; v += 0.001f) x.push_back(v);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> ends = {88.73f, 89.0f, 1e30f, inf, -104.0f, -200.0f, -inf, nan, -0.0f};
  x.insert(x.end(), ends.begin(), ends.end());
  std::vector<float> y(x.size());
  tessel::prim::map_unary_f32<tessel::prim::exp_rule>(tm::math_path::xsimd, x.data(), y.data(), x.size());
#if XSIMD_WITH_AVX512F
  const bool exact_edges = true;
#else
  const bool exact_edges = false;  // xsimd's generic exp: inf from 88.38, 0 below -88.38
#endif
  const std::size_t checked = x.size() - ends.size();
  for (std::size_t i = 0; i < checked && exact_edges; ++i) {
    const double r = std::exp(static_cast<double>(x[i]));
    if (r >= 0x1p-126) {
      EXPECT_LE(tessel::testing::ulp_error(y[i], r), 2.0) << "exp(" << x[i] << ") = " << y[i];
    } else {
      EXPECT_LE(std::fabs(y[i] - r), 0x1p-149) << "exp(" << x[i] << ") = " << y[i] << ", e^x = " << r;
    }
  }
  const float* e = y.data() + checked;
  EXPECT_TRUE(std::isinf(e[0]) && std::isinf(e[1]) && std::isinf(e[2]) && std::isinf(e[3]) && e[3] > 0);
  EXPECT_EQ(e[4], 0.0f);
  EXPECT_EQ(e[5], 0.0f);
  EXPECT_EQ(e[6], 0.0f);
  EXPECT_TRUE(std::isnan(e[7]));
  EXPECT_EQ(e[8], 1.0f);
}

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
