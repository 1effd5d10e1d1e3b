#pragma once
// Random inputs and reference comparisons for the primitive tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>

#include "tessel/core/print.hpp"
#include "tessel/core/tensor.hpp"
#include "random_inputs.hpp"
#include "tessel_test.hpp"

namespace tessel::testing {

// Distance in units in the last place of float between a float result and a double reference.
inline double ulp_error(float actual, double expected) {
  if (std::isnan(expected)) return std::isnan(actual) ? 0.0 : 1e30;
  if (std::isinf(expected)) return actual == static_cast<float>(expected) ? 0.0 : 1e30;
  const float rounded = static_cast<float>(expected);
  const float ulp = std::nextafter(std::abs(rounded), std::numeric_limits<float>::infinity()) - std::abs(rounded);
  const double u = std::isinf(ulp) ? std::ldexp(1.0, 104) : (ulp == 0 ? std::numeric_limits<float>::denorm_min() : ulp);
  return std::abs(static_cast<double>(actual) - expected) / u;
}

// Every element within max_ulp of its double reference (tiny references use an absolute floor).
template <class S, class Ref>
::testing::AssertionResult within_ulp(const tensor<float, S>& actual, Ref reference, double max_ulp, double abs_floor = 0) {
  for (std::size_t i = 0; i < S::size; ++i) {
    const double e = reference(i);
    const double err = ulp_error(actual[i], e);
    if (err > max_ulp && !(std::abs(actual[i] - e) <= abs_floor)) {
      std::ostringstream os;
      os << "element " << i << ": " << actual[i] << " vs reference " << e << " (" << err << " ULP > " << max_ulp << ")";
      return ::testing::AssertionFailure() << os.str();
    }
  }
  return ::testing::AssertionSuccess();
}

// Every element of `got` within rtol times the largest magnitude of `want` of its counterpart: a whole
// computation (a sharded step against one device's) compared at the scale of its result.
template <class A, class B>
void expect_close_at_scale(const A& got, const B& want, const char* what, double rtol) {
  static_assert(A::size == B::size);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < A::size; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got.data()[i]) - want.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want.data()[i])));
  }
  EXPECT_LE(worst, rtol * scale) << what << ": largest difference " << worst << " against largest value " << scale;
}

}  // namespace tessel::testing
