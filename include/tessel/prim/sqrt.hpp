#pragma once
// sqrt (lax.sqrt): Square root (correctly rounded).
// Maximum error 0.5 ULP against a double reference on [0, inf), SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct sqrt_rule {
  static constexpr fixed_string name = "tessel::sqrt";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::sqrt(x); }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    return of_node(build::div(g, build::scalar_like(g, node, 0.5), node));
  }
};
inline constexpr ir::primitive sqrt_p = unary_primitive<sqrt_rule>("sqrt", 2);
}  // namespace prim

template <Traced X>
constexpr auto sqrt(X x) {
  return prim::unary<prim::sqrt_p, prim::sqrt_rule>(x);
}
}  // namespace tessel
