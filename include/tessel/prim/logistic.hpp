#pragma once
// logistic (lax.logistic): The logistic sigmoid 1 / (1 + e^-x) (jax.nn.sigmoid); saturates to 0 and 1 without NaN.
// Maximum error against a double reference on [-20, 20] (tests/backend/ulp_test.cpp, hwy_math_test.cpp):
// 3 ULP on every path (2.48 measured): scalar (libm's exp), xsimd, Highway (1 / (1 + hwy::Exp(-x))).
// Default path: xsimd, 1.3x faster than Highway at equal vector width (bench/README.md); Highway where
// the build's xsimd is narrower than the CPU's best Highway target. NaN and infinities give the scalar
// path's results on every path.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct logistic_rule {
  static constexpr fixed_string name = "tessel::logistic";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.logistic";
  static constexpr kernels::math_path preferred = kernels::math_path::xsimd;  // bench/README.md
  static auto apply(auto x) { return simd::splat<decltype(x)>(1.0f) / (simd::splat<decltype(x)>(1.0f) + simd::exp(-x)); }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    return of_node(build::mul(g, node, build::sub(g, build::scalar_like(g, node, 1.0), node)));
  }
};
inline constexpr ir::primitive logistic_p = unary_primitive<logistic_rule>("logistic", 10);
}  // namespace prim

template <Traced X>
constexpr auto logistic(X x) {
  return prim::unary<prim::logistic_p, prim::logistic_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto logistic(const X& x) {
  return eagerly([](auto x) { return logistic(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
