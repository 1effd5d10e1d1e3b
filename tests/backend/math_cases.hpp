#pragma once
// The unary primitives' three paths (scalar, xsimd, Highway: kernels/hwy_math.hpp) against double
// references, shared by ulp_test.cpp (the default Highway target) and hwy_math_test.cpp (every Highway
// target), over the rows of the unary table (support/unary_table.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "reference.hpp"
#include "unary_table.hpp"
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

}  // namespace tessel::testing::math
