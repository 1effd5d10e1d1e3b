#pragma once
// reduce_min (lax.reduce_min): the minimum (NaN propagates; the identity is +inf) over the static axes Axes...; the result drops
// those axes. Takes f32, bf16, s32, u32.
//
//   reduce_min<1>(x)   // f32[4,3] -> f32[4]

#include <limits>
#include <type_traits>

#include "tessel/prim/family/reduce.hpp"
#include "tessel/prim/min.hpp"

namespace tessel {
namespace prim {
struct reduce_min_rule {
  static constexpr fixed_string name = "tessel::reduce_min";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.minimum";  // the combiner
  template <class V>
  static constexpr V identity() {
    if constexpr (std::is_floating_point_v<V>) return std::numeric_limits<V>::infinity(); else return std::numeric_limits<V>::max();
  }
  template <class V>
  static V combine(V a, V b) {
    return min_rule::apply(a, b);
  }
};
inline constexpr ir::primitive reduce_min_p = reduce_primitive<reduce_min_rule>("reduce_min", true);
}  // namespace prim

template <long... Axes, Traced X>
constexpr auto reduce_min(X x) {
  return prim::reduce<prim::reduce_min_p, prim::reduce_min_rule, Axes...>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto reduce_min(const X& x) {
  return eagerly([](auto x) { return reduce_min<Axes...>(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
