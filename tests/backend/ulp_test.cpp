// Every approximated function against a double reference over its documented range, on each of its three
// paths: scalar (one float at a time: libm, and every tile's tail), xsimd (batches of this build's
// instruction set) and Highway (the best target of this CPU, chosen at run time); each within the bound
// its header states, and the paths within the sum of their bounds of each other. hwy_math_test.cpp
// repeats the Highway sweeps on every Highway target.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "math_cases.hpp"

namespace {
namespace tm = tessel::testing::math;

#define TESSEL_ULP_CASE(op, ref, lo, hi, log_spaced, scalar_bound, xsimd_bound, hwy_bound)                      \
  TEST(Ulp, op) {                                                                                              \
    const double bound[3] = {scalar_bound, xsimd_bound, hwy_bound};                                            \
    const tm::errors e = tm::measure<tessel::prim::op##_rule>(ref, tm::sweep_points(lo, hi, log_spaced));      \
    for (int p = 0; p < 3; ++p) {                                                                              \
      EXPECT_LE(e.worst[p], bound[p]) << tm::path_names[p] << " path, at x = " << e.worst_at[p];              \
      RecordProperty(std::string("max_ulp_") + tm::path_names[p], std::to_string(e.worst[p]));                \
    }                                                                                                          \
    EXPECT_LE(e.disagreement, std::max({bound[0] + bound[1], bound[0] + bound[2], bound[1] + bound[2]}) + 1) \
        << "the paths disagree";                                                                               \
  }
TESSEL_MATH_CASES(TESSEL_ULP_CASE)

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
