#pragma once
// cos (lax.cos): Cosine (radians).
// Maximum error 2.5 ULP against a double reference on [-100, 100], SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct cos_rule {
  static constexpr fixed_string name = "tessel::cos";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::cos(x); }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    return of_node(build::neg(g, build::unary(g, sin_p, g[node].operands[0])));
  }
};
inline constexpr ir::primitive cos_p = unary_primitive<cos_rule>("cos", 10);
}  // namespace prim

template <Traced X>
constexpr auto cos(X x) {
  return prim::unary<prim::cos_p, prim::cos_rule>(x);
}
}  // namespace tessel
