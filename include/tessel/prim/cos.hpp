#pragma once
// cos (lax.cos): Cosine (radians).
// Maximum error against a double reference on [-100, 100] (tests/backend/ulp_test.cpp, hwy_math_test.cpp):
// scalar path (libm) 1 ULP, xsimd 2.5, Highway 2.5 (every Highway target). Default path: Highway, 1.35x
// faster than xsimd at equal vector width (bench/README.md); |x| > 39000 (outside hwy::Cos's reduction)
// takes the scalar path. NaN and infinities give the scalar path's results on every path.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct cos_rule {
  static constexpr fixed_string name = "tessel::cos";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.cosine";
  static constexpr kernels::math_path preferred = kernels::math_path::hwy;  // bench/README.md
  static auto apply(auto x) {
    using std::cos;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return cos(x);
  }
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

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto cos(const X& x) {
  return eagerly([](auto x) { return cos(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
