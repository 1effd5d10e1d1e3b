#pragma once
// cbrt (lax.cbrt): Cube root, defined for every real number (cbrt(-8) = -2).
// Maximum error against a double reference on [-1e6, 1e6], subnormals included
// (tests/backend/ulp_test.cpp): scalar path (libm) 1 ULP, xsimd 2 (1.67 measured, at subnormals).
// Highway 1.0.3 has no cube root: the Highway path is xsimd's, the default.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct cbrt_rule {
  static constexpr fixed_string name = "tessel::cbrt";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.cbrt";
  static auto apply(auto x) {
    using std::cbrt;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return cbrt(x);
  }
  // d cbrt(x) = 1 / (3 cbrt(x)^2), written with the result as JAX's rule is (infinite at 0).
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    return of_node(build::div(g, build::scalar_like(g, node, 1.0 / 3.0), build::mul(g, node, node)));
  }
};
inline constexpr ir::primitive cbrt_p = unary_primitive<cbrt_rule>("cbrt", 10);
}  // namespace prim

template <Traced X>
constexpr auto cbrt(X x) {
  return prim::unary<prim::cbrt_p, prim::cbrt_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto cbrt(const X& x) {
  return eagerly([](auto x) { return cbrt(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
