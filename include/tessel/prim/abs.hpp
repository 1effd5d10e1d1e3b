#pragma once
// abs (lax.abs): Absolute value. For s32, abs(INT32_MIN) stays INT32_MIN, as in XLA.
// Elementwise; takes f32, bf16, s32 and u32; the result has the operand's dtype and shape.

#include <cmath>
#include <cstdint>

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct abs_rule {
  static constexpr fixed_string name = "tessel::abs";
  static constexpr accepts domain = accepts::numeric;
  static void lower(ir::stablehlo_writer& w) {  // stablehlo.abs takes signed integers: a u32 is its own abs
    if (w.current().dtype == ir::dtype_code::u32) w.define(w.operand(0));
    else w.lower_as("stablehlo.abs");
  }
  static float apply(float x) { return std::fabs(x); }
  template <simd::Batch V>
  static V apply(const V& x) {
    return simd::abs(x);
  }
  static std::int32_t apply(std::int32_t x) {
    return x < 0 ? static_cast<std::int32_t>(0u - static_cast<std::uint32_t>(x)) : x;
  }
  static std::uint32_t apply(std::uint32_t x) { return x; }
  static constexpr partial derivative(ir::graph_builder& g, int node) {
    return of_node(build::unary(g, sign_p, g[node].operands[0]));
  }
};
inline constexpr ir::primitive abs_p = unary_primitive<abs_rule>("abs", 1);
}  // namespace prim

template <Traced X>
constexpr auto abs(X x) {
  return prim::unary<prim::abs_p, prim::abs_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto abs(const X& x) {
  return eagerly([](auto x) { return abs(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
