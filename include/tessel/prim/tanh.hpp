#pragma once
// tanh (lax.tanh): Hyperbolic tangent.
// Maximum error 3 ULP against a double reference on [-10, 10], SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct tanh_rule {
  static constexpr fixed_string name = "tessel::tanh";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::tanh(x); }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    return of_node(build::sub(g, build::scalar_like(g, node, 1.0), build::mul(g, node, node)));
  }
};
inline constexpr ir::primitive tanh_p = unary_primitive<tanh_rule>("tanh", 10);
}  // namespace prim

template <Traced X>
constexpr auto tanh(X x) {
  return prim::unary<prim::tanh_p, prim::tanh_rule>(x);
}
}  // namespace tessel
