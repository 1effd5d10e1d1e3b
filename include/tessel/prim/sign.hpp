#pragma once
// sign (lax.sign): sign(x): -1, 0 or 1 (NaN stays NaN; 0 for u32 zero, else 1).
// Elementwise; takes f32, bf16, s32 and u32; the result has the operand's dtype and shape.

#include <cmath>
#include <cstdint>

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct sign_rule {
  static constexpr fixed_string name = "tessel::sign";
  static constexpr accepts domain = accepts::numeric;
  static void lower(ir::stablehlo_writer& w) {  // stablehlo.sign takes signed integers: a u32's is x != 0
    const ir::node& n = w.current();
    if (n.dtype != ir::dtype_code::u32) return w.lower_as("stablehlo.sign");
    const ir::hlo_value nonzero = w.compare(w.operand(0), w.constant(n.dtype, 0, n.shape), n.dtype, "NE", ir::hlo_type(ir::dtype_code::pred, n.shape));
    w.define(w.convert(nonzero, n.dtype, n.shape));
  }
  static float apply(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x; }  // keeps NaN and the sign of zero
  static std::int32_t apply(std::int32_t x) { return (x > 0) - (x < 0); }
  static std::uint32_t apply(std::uint32_t x) { return x != 0; }
};
inline constexpr ir::primitive sign_p = unary_primitive<sign_rule>("sign", 1);
}  // namespace prim

template <Traced X>
constexpr auto sign(X x) {
  return prim::unary<prim::sign_p, prim::sign_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto sign(const X& x) {
  return eagerly([](auto x) { return sign(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
