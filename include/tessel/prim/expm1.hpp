#pragma once
// expm1 (lax.expm1): e^x - 1, accurate near 0.
// Maximum error 2 ULP against a double reference on [-10, 10], SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct expm1_rule {
  static constexpr fixed_string name = "tessel::expm1";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::expm1(x); }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    return of_node(build::add(g, node, build::scalar_like(g, node, 1.0)));
  }
};
inline constexpr ir::primitive expm1_p = unary_primitive<expm1_rule>("expm1", 8);
}  // namespace prim

template <Traced X>
constexpr auto expm1(X x) {
  return prim::unary<prim::expm1_p, prim::expm1_rule>(x);
}
}  // namespace tessel
