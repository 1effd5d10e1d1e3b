#pragma once
// log (lax.log): Natural logarithm; log(0) = -inf, log(x<0) = NaN.
// Maximum error 1 ULP against a double reference on (0, inf), SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct log_rule {
  static constexpr fixed_string name = "tessel::log";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::log(x); }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    const int x = g[node].operands[0];
    return of_node(build::div(g, build::scalar_like(g, x, 1.0), x));
  }
};
inline constexpr ir::primitive log_p = unary_primitive<log_rule>("log", 8);
}  // namespace prim

template <Traced X>
constexpr auto log(X x) {
  return prim::unary<prim::log_p, prim::log_rule>(x);
}
}  // namespace tessel
