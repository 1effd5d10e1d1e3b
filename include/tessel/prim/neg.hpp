#pragma once
// neg (lax.neg): Negation, -x (wraps for u32, like XLA).
// Elementwise; takes f32, bf16, s32 and u32; the result has the operand's dtype and shape.

#include <cstdint>

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct neg_rule {
  static constexpr fixed_string name = "tessel::neg";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.negate";
  static auto apply(auto x) {
    // Flips the sign bit, as IEEE negation does: xsimd's -x is 0 - x, which gives +0 for +0.
    if constexpr (simd::Batch<decltype(x)>) return x ^ decltype(x)(-0.0f);
    else return -x;
  }
  static std::int32_t apply(std::int32_t x) { return static_cast<std::int32_t>(0u - static_cast<std::uint32_t>(x)); }
  static constexpr partial derivative([[maybe_unused]] ir::graph_builder& g, [[maybe_unused]] int node) {
    return {partial::minus_one};
  }
};
inline constexpr ir::primitive neg_p = unary_primitive<neg_rule>("neg", 1);
}  // namespace prim

template <Traced X>
constexpr auto neg(X x) {
  return prim::unary<prim::neg_p, prim::neg_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto neg(const X& x) {
  return eagerly([](auto x) { return neg(x); }, x);
}
template <Traced X>
constexpr auto operator-(X x) {
  return neg(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto operator-(const X& x) {
  return eagerly([](auto x) { return neg(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
