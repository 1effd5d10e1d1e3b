#pragma once
// expm1 (lax.expm1): e^x - 1, accurate near 0.
// Maximum error against a double reference on [-10, 10] (tests/backend/ulp_test.cpp, hwy_math_test.cpp):
// scalar path (libm) 1 ULP, xsimd 1.5, Highway 4 (every Highway target). Default path: xsimd (Highway
// is 1.05x faster at equal vector width but less accurate; bench/README.md); Highway where the build's
// xsimd is narrower than the CPU's best Highway target. NaN, infinities and signed zeros give the scalar
// path's results on every path; xsimd alone overflows to inf early, from x = 88.38.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct expm1_rule {
  static constexpr fixed_string name = "tessel::expm1";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.exponential_minus_one";
  static constexpr kernels::math_path preferred = kernels::math_path::xsimd;  // bench/README.md
  static auto apply(auto x) {  // xsimd's expm1(-0) is +0: zeros pass through
    using std::expm1;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return simd::select(x == simd::splat<decltype(x)>(0.0f), x, expm1(x));
  }
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

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto expm1(const X& x) {
  return eagerly([](auto x) { return expm1(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
