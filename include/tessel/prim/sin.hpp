#pragma once
// sin (lax.sin): Sine (radians).
// Maximum error 2.5 ULP against a double reference on [-100, 100], SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct sin_rule {
  static constexpr fixed_string name = "tessel::sin";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::sin(x); }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    return of_node(build::unary(g, cos_p, g[node].operands[0]));
  }
};
inline constexpr ir::primitive sin_p = unary_primitive<sin_rule>("sin", 10);
}  // namespace prim

template <Traced X>
constexpr auto sin(X x) {
  return prim::unary<prim::sin_p, prim::sin_rule>(x);
}
}  // namespace tessel
