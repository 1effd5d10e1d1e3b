#pragma once
// log1p (lax.log1p): log(1 + x), accurate near 0.
// Maximum error 1 ULP against a double reference on (-1, 10], SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct log1p_rule {
  static constexpr fixed_string name = "tessel::log1p";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::log1p(x); }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    const int x = g[node].operands[0];
    const int one = build::scalar_like(g, x, 1.0);
    return of_node(build::div(g, one, build::add(g, one, x)));
  }
};
inline constexpr ir::primitive log1p_p = unary_primitive<log1p_rule>("log1p", 8);
}  // namespace prim

template <Traced X>
constexpr auto log1p(X x) {
  return prim::unary<prim::log1p_p, prim::log1p_rule>(x);
}
}  // namespace tessel
