#pragma once
// tanh (lax.tanh): Hyperbolic tangent.
// Maximum error against a double reference on [-10, 10] (tests/backend/ulp_test.cpp, hwy_math_test.cpp):
// scalar path (libm) 2.5 ULP, xsimd 1.5, Highway 3 (every Highway target). Default path: xsimd, 1.07x
// faster than Highway at equal vector width and more accurate (bench/README.md); Highway where the
// build's xsimd is narrower than the CPU's best Highway target. NaN, infinities and signed zeros give
// the scalar path's results on every path.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct tanh_rule {
  static constexpr fixed_string name = "tessel::tanh";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.tanh";
  static constexpr kernels::math_path preferred = kernels::math_path::xsimd;  // bench/README.md
  static auto apply(auto x) {
    using std::tanh;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return tanh(x);
  }
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

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto tanh(const X& x) {
  return eagerly([](auto x) { return tanh(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
