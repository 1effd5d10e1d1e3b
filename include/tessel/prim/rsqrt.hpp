#pragma once
// rsqrt (lax.rsqrt): 1 / sqrt(x), a correctly rounded sqrt, then a division; not the hardware estimate.
// Maximum error 1.5 ULP against a double reference on (0, inf) on every path (tests/backend/ulp_test.cpp,
// hwy_math_test.cpp): the scalar, xsimd and Highway paths give the same bits. Default path: xsimd (the
// same instructions as Highway's at equal vector width); Highway where the build's xsimd is narrower.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct rsqrt_rule {
  static constexpr fixed_string name = "tessel::rsqrt";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.rsqrt";
  static constexpr kernels::math_path preferred = kernels::math_path::xsimd;  // bench/README.md
  static auto apply(auto x) {
    using std::sqrt;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return simd::splat<decltype(x)>(1.0f) / sqrt(x);
  }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    const int x = g[node].operands[0];
    return of_node(build::div(g, build::scale(g, node, -0.5), x));
  }
};
inline constexpr ir::primitive rsqrt_p = unary_primitive<rsqrt_rule>("rsqrt", 3);
}  // namespace prim

template <Traced X>
constexpr auto rsqrt(X x) {
  return prim::unary<prim::rsqrt_p, prim::rsqrt_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto rsqrt(const X& x) {
  return eagerly([](auto x) { return rsqrt(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
