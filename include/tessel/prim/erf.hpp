#pragma once
// erf (lax.erf): The error function.
// Maximum error against a double reference on [-5, 5] (tests/backend/ulp_test.cpp): scalar path (libm)
// 1 ULP, xsimd 2.5. Highway 1.0.3 has no erf: the Highway path is xsimd's, the default.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct erf_rule {
  static constexpr fixed_string name = "tessel::erf";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "chlo.erf";
  static auto apply(auto x) {
    using std::erf;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return erf(x);
  }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    const int x = g[node].operands[0];
    const int e = build::unary(g, exp_p, build::neg(g, build::mul(g, x, x)));
    return of_node(build::scale(g, e, 1.1283791670955126));  // 2 / sqrt(pi)
  }
};
inline constexpr ir::primitive erf_p = unary_primitive<erf_rule>("erf", 12);
}  // namespace prim

template <Traced X>
constexpr auto erf(X x) {
  return prim::unary<prim::erf_p, prim::erf_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto erf(const X& x) {
  return eagerly([](auto x) { return erf(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
