#pragma once
// exp (lax.exp): e^x.
// Maximum error 2 ULP against a double reference on [-87, 88], SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct exp_rule {
  static constexpr fixed_string name = "tessel::exp";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::exp(x); }
  static constexpr partial derivative([[maybe_unused]] ir::graph_builder& g, [[maybe_unused]] int node) {
    return of_node(node);  // d exp(x) = exp(x): the forward value, reused
  }
};
inline constexpr ir::primitive exp_p = unary_primitive<exp_rule>("exp", 8);
}  // namespace prim

template <Traced X>
constexpr auto exp(X x) {
  return prim::unary<prim::exp_p, prim::exp_rule>(x);
}
}  // namespace tessel
