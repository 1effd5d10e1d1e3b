#pragma once
// The transcendental unary primitives' three paths (scalar, xsimd, Highway: backend/hwy_math.hpp)
// against double references, shared by ulp_test.cpp (the default Highway target) and
// hwy_math_test.cpp (every Highway target). TESSEL_MATH_CASES lists each function with its range and
// the maximum error of each path in ULP, as stated in the primitive's header.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "reference.hpp"
#include "tessel/lax.hpp"
#include "tessel/prim/family/elementwise-inl.hpp"  // map_unary_f32: the tile loops themselves

namespace tessel::testing::math {

using kernels::math_path;

inline constexpr math_path paths[3] = {math_path::scalar, math_path::xsimd, math_path::hwy};
inline constexpr const char* path_names[3] = {"scalar", "xsimd", "hwy"};

// Points of [lo, hi]: n evenly spaced (linearly, or logarithmically for positive ranges), then n spread
// evenly over the float bit patterns in the range (dense near zero, where relative error is hardest).
inline std::vector<float> sweep_points(double lo, double hi, bool log_spaced, std::size_t n = std::size_t{1} << 18) {
  std::vector<float> x;
  x.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const double t = (static_cast<double>(i) + 0.5) / static_cast<double>(n);
    x.push_back(static_cast<float>(log_spaced ? std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * t) : lo + (hi - lo) * t));
  }
  // Ordered keys: the float line mapped monotonically onto the integers.
  auto key = [](float f) {
    std::int32_t b;
    std::memcpy(&b, &f, 4);
    return b < 0 ? static_cast<std::int64_t>(std::numeric_limits<std::int32_t>::min()) - b : static_cast<std::int64_t>(b);
  };
  auto from_key = [](std::int64_t k) {
    const auto b = static_cast<std::int32_t>(k < 0 ? std::numeric_limits<std::int32_t>::min() - k : k);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  const float flo = std::max(static_cast<float>(lo), std::nextafter(static_cast<float>(lo), HUGE_VALF));
  const float fhi = std::min(static_cast<float>(hi), std::nextafter(static_cast<float>(hi), -HUGE_VALF));
  const std::int64_t a = key(flo), z = key(fhi);
  for (std::size_t i = 0; i < n; ++i) x.push_back(from_key(a + (z - a) * static_cast<std::int64_t>(i) / static_cast<std::int64_t>(n)));
  return x;
}

struct errors {
  double worst[3] = {0, 0, 0};      // per path, in ULP of the double reference
  float worst_at[3] = {0, 0, 0};    // an argument where it occurs
  double disagreement = 0;          // largest ULP distance between two paths' results
};

template <class Rule>
errors measure(double (*ref)(double), const std::vector<float>& x) {
  const std::size_t n = x.size();
  std::vector<float> y[3];
  for (int p = 0; p < 3; ++p) {
    y[p].resize(n);
    prim::map_unary_f32<Rule>(paths[p], x.data(), y[p].data(), n);
  }
  errors e;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = ref(x[i]);
    for (int p = 0; p < 3; ++p) {
      const double u = ulp_error(y[p][i], r);
      if (u > e.worst[p]) {
        e.worst[p] = u;
        e.worst_at[p] = x[i];
      }
    }
    for (int p = 0; p < 3; ++p)
      for (int q = p + 1; q < 3; ++q) e.disagreement = std::max(e.disagreement, ulp_error(y[p][i], y[q][i]));
  }
  return e;
}

inline double erf_inv_reference(double y) {  // erf inverted in double by Newton's method
  double x = 0;
  for (int i = 0; i < 100; ++i) {
    const double step = (std::erf(x) - y) / (2 / std::sqrt(std::numbers::pi) * std::exp(-x * x));
    x -= step;
    if (std::abs(step) <= 1e-17 * std::abs(x)) break;
  }
  return x;
}

}  // namespace tessel::testing::math

// X(op, reference, lo, hi, log_spaced, scalar bound, xsimd bound, Highway bound): maximum error in ULP
// against the double reference over [lo, hi] (the bounds each primitive's header states). erf and cbrt
// have no Highway kernel (their hwy path is xsimd's) and erf_inv is one scalar function on every path.
#define TESSEL_MATH_CASES(X)                                                                                   \
  X(exp, [](double v) { return std::exp(v); }, -87, 88, false, 1, 2, 1.5)                                      \
  X(log, [](double v) { return std::log(v); }, 1e-30, 1e30, true, 1, 1, 1)                                     \
  X(log1p, [](double v) { return std::log1p(v); }, -0.99, 10, false, 1, 1, 2.5)                                \
  X(expm1, [](double v) { return std::expm1(v); }, -10, 10, false, 1, 1.5, 4)                                  \
  X(tanh, [](double v) { return std::tanh(v); }, -10, 10, false, 2.5, 1.5, 3)                                  \
  X(logistic, [](double v) { return 1 / (1 + std::exp(-v)); }, -20, 20, false, 3, 3, 3)                        \
  X(sqrt, [](double v) { return std::sqrt(v); }, 0, 1e6, false, 0.5, 0.5, 0.5)                                 \
  X(rsqrt, [](double v) { return 1 / std::sqrt(v); }, 1e-6, 1e6, true, 1.5, 1.5, 1.5)                          \
  X(sin, [](double v) { return std::sin(v); }, -100, 100, false, 1, 2.5, 2.5)                                  \
  X(cos, [](double v) { return std::cos(v); }, -100, 100, false, 1, 2.5, 2.5)                                  \
  X(erf, [](double v) { return std::erf(v); }, -5, 5, false, 1, 2.5, 2.5)                                      \
  X(cbrt, [](double v) { return std::cbrt(v); }, -1e6, 1e6, false, 1, 2, 2)                                   \
  X(erf_inv, tessel::testing::math::erf_inv_reference, -0.9, 0.9, false, 4, 4, 4)
