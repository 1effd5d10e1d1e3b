#pragma once
// reduce_sum (lax.reduce_sum): the sum (f32 sums accumulate in f32, blocked by SIMD lanes) over the static axes Axes...; the result drops
// those axes. Takes f32, bf16, s32, u32.
//
//   reduce_sum<1>(x)   // f32[4,3] -> f32[4]

#include <limits>
#include <type_traits>

#include "tessel/prim/family/reduce.hpp"


namespace tessel {
namespace prim {
struct reduce_sum_rule {
  static constexpr fixed_string name = "tessel::reduce_sum";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.add";  // the combiner
  template <class V>
  static constexpr V identity() {
    return V(0);
  }
  template <class V>
  static V combine(V a, V b) {
    return a + b;
  }
};
inline constexpr ir::primitive reduce_sum_p = reduce_primitive<reduce_sum_rule>("reduce_sum", false);
}  // namespace prim

template <long... Axes, Traced X>
constexpr auto reduce_sum(X x) {
  return prim::reduce<prim::reduce_sum_p, prim::reduce_sum_rule, Axes...>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto reduce_sum(const X& x) {
  return eagerly([](auto x) { return reduce_sum<Axes...>(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
