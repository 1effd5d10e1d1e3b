#pragma once
// exp (lax.exp): e^x.
// Maximum error against a double reference on [-87, 88] (tests/backend/ulp_test.cpp, hwy_math_test.cpp):
// scalar path (libm) 1 ULP, xsimd 2, Highway 1.5 (every Highway target). Default path: xsimd (on AVX-512
// xsimd's polynomial scaled by vscalefps: prim/family/simd_math-inl.hpp), 1.35x faster than Highway at
// equal vector width before that (bench/README.md); Highway where the build's xsimd is narrower than the
// CPU's best Highway target. NaN, infinities and signed zeros give the scalar path's results on every
// path. Overflow and underflow: e^x's on AVX-512 (inf from ln(FLT_MAX) = 88.72, subnormals down to
// -103.97); xsimd's generic kernel gives inf from 88.38 and 0 below -88.38.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct exp_rule {
  static constexpr fixed_string name = "tessel::exp";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.exponential";
  static constexpr kernels::math_path preferred = kernels::math_path::xsimd;  // bench/README.md
  static auto apply(auto x) { return simd::exp(x); }
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

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto exp(const X& x) {
  return eagerly([](auto x) { return exp(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
