#pragma once
// erf (lax.erf): The error function.
// Maximum error 3 ULP against a double reference on [-5, 5], SIMD and scalar paths alike (tests/backend/ulp_test.cpp).
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct erf_rule {
  static constexpr fixed_string name = "tessel::erf";
  static constexpr accepts domain = accepts::floating;
  static auto apply(auto x) { return xsimd::erf(x); }
};
inline constexpr ir::primitive erf_p = unary_primitive<erf_rule>("erf", 12);
}  // namespace prim

template <Traced X>
constexpr auto erf(X x) {
  return prim::unary<prim::erf_p, prim::erf_rule>(x);
}
}  // namespace tessel
