#pragma once
// floor (lax.floor): Largest integer value not greater than x.
// Elementwise; takes f32 and bf16; the result has the operand's dtype and shape.

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct floor_rule {
  static constexpr fixed_string name = "tessel::floor";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.floor";
  static auto apply(auto x) { return simd::floor(x); }
};
inline constexpr ir::primitive floor_p = unary_primitive<floor_rule>("floor", 1);
}  // namespace prim

template <Traced X>
constexpr auto floor(X x) {
  return prim::unary<prim::floor_p, prim::floor_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto floor(const X& x) {
  return eagerly([](auto x) { return floor(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
