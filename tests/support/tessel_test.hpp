#pragma once
// Test helpers shared by every capability's tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string_view>

#include "tessel/core/print.hpp"
#include "tessel/core/tensor.hpp"

namespace tessel::testing {

// Like allclose, but on failure names the first differing element, both values and both tensors.
template <class T, class S>
::testing::AssertionResult all_close(const tensor<T, S>& actual, const tensor<T, S>& expected, tolerance tol = {}) {
  if (allclose(actual, expected, tol)) return ::testing::AssertionSuccess();
  for (std::size_t i = 0; i < S::size; ++i) {
    tensor<T, shape<>> a, e;
    a[0] = actual[i];
    e[0] = expected[i];
    if (!allclose(a, e, tol)) {
      std::ostringstream os;
      os << "element " << i << ": " << static_cast<double>(static_cast<float>(actual[i])) << " vs expected "
         << static_cast<double>(static_cast<float>(expected[i])) << " (rtol " << tol.rtol << ", atol " << tol.atol
         << ")\n  actual:   " << actual << "\n  expected: " << expected;
      return ::testing::AssertionFailure() << os.str();
    }
  }
  return ::testing::AssertionFailure();
}

// The kernels of a plan (Traced::plan: jit's or a shard_map's traced_for) whose root is the named primitive
// (a collective is a kernel of its own).
template <class Traced>
std::size_t count_kernels(std::string_view name) {
  constexpr const auto& plan = Traced::plan;
  std::size_t n = 0;
  for (int k = 0; k < plan.kernel_count; ++k)
    if (plan.node(plan.kernels[static_cast<std::size_t>(k)].root).prim->name == name) ++n;
  return n;
}

}  // namespace tessel::testing
