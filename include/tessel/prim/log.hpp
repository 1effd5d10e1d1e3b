#pragma once
// log (lax.log): Natural logarithm; log(0) = -inf, log(x<0) = NaN.
// Maximum error against a double reference on (0, inf) (tests/backend/ulp_test.cpp, hwy_math_test.cpp):
// scalar path (libm) 1 ULP, xsimd 1, Highway 1 (every Highway target). Default path: Highway, 1.1x faster
// than xsimd at equal vector width (bench/README.md). NaN, infinities, zeros and negative arguments give
// the scalar path's results on every path.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct log_rule {
  static constexpr fixed_string name = "tessel::log";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.log";
  static constexpr kernels::math_path preferred = kernels::math_path::hwy;  // bench/README.md
  static auto apply(auto x) {
    using std::log;  // floats: the C library's; batches: xsimd's (prim/family/simd_math.hpp)
    return log(x);
  }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    const int x = g[node].operands[0];
    return of_node(build::div(g, build::scalar_like(g, x, 1.0), x));
  }
};
inline constexpr ir::primitive log_p = unary_primitive<log_rule>("log", 8);
}  // namespace prim

template <Traced X>
constexpr auto log(X x) {
  return prim::unary<prim::log_p, prim::log_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto log(const X& x) {
  return eagerly([](auto x) { return log(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
