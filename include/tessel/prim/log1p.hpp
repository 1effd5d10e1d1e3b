#pragma once
// log1p (lax.log1p): log(1 + x), accurate near 0.
// Maximum error against a double reference on (-1, 10] (tests/backend/ulp_test.cpp, hwy_math_test.cpp):
// scalar path (libm) 1 ULP, xsimd 1, Highway 2.5 (every Highway target). Default path: xsimd (Highway is
// 1.1x faster at equal vector width but 2.5x less accurate; bench/README.md); Highway where the build's
// xsimd is narrower than the CPU's best Highway target. NaN, infinities, signed zeros and x <= -1 give
// the scalar path's results on every path.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct log1p_rule {
  static constexpr fixed_string name = "tessel::log1p";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.log_plus_one";
  static constexpr kernels::math_path preferred = kernels::math_path::xsimd;  // bench/README.md
  static auto apply(auto x) {  // xsimd's log1p(-0) is +0: zeros pass through
    using std::log1p;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return simd::select(x == simd::splat<decltype(x)>(0.0f), x, log1p(x));
  }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    const int x = g[node].operands[0];
    const int one = build::scalar_like(g, x, 1.0);
    return of_node(build::div(g, one, build::add(g, one, x)));
  }
};
inline constexpr ir::primitive log1p_p = unary_primitive<log1p_rule>("log1p", 8);
}  // namespace prim

template <Traced X>
constexpr auto log1p(X x) {
  return prim::unary<prim::log1p_p, prim::log1p_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto log1p(const X& x) {
  return eagerly([](auto x) { return log1p(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
