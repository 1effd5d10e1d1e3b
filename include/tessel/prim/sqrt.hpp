#pragma once
// sqrt (lax.sqrt): Square root (correctly rounded).
// Maximum error 0.5 ULP against a double reference on [0, inf) on every path (tests/backend/ulp_test.cpp,
// hwy_math_test.cpp): the scalar, xsimd and Highway paths give the same bits. Default path: xsimd (the
// same instruction as Highway's at equal vector width); Highway where the build's xsimd is narrower.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct sqrt_rule {
  static constexpr fixed_string name = "tessel::sqrt";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.sqrt";
  static constexpr kernels::math_path preferred = kernels::math_path::xsimd;  // bench/README.md
  static auto apply(auto x) {
    using std::sqrt;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return sqrt(x);
  }
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

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto sqrt(const X& x) {
  return eagerly([](auto x) { return sqrt(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
