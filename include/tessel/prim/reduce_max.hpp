#pragma once
// reduce_max (lax.reduce_max): the maximum (NaN propagates; the identity is -inf) over the static axes Axes...; the result drops
// those axes. Takes f32, bf16, s32, u32.
//
//   reduce_max<1>(x)   // f32[4,3] -> f32[4]

#include <limits>
#include <type_traits>

#include "tessel/prim/family/reduce.hpp"
#include "tessel/prim/max.hpp"

namespace tessel {
namespace prim {
struct reduce_max_rule {
  static constexpr fixed_string name = "tessel::reduce_max";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.maximum";  // the combiner
  template <class V>
  static constexpr V identity() {
    if constexpr (std::is_floating_point_v<V>) return -std::numeric_limits<V>::infinity(); else return std::numeric_limits<V>::lowest();
  }
  template <class V>
  static V combine(V a, V b) {
    return max_rule::apply(a, b);
  }
};
inline constexpr ir::primitive reduce_max_p = reduce_primitive<reduce_max_rule>("reduce_max", true);
}  // namespace prim

template <long... Axes, Traced X>
constexpr auto reduce_max(X x) {
  return prim::reduce<prim::reduce_max_p, prim::reduce_max_rule, Axes...>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto reduce_max(const X& x) {
  return eagerly([](auto x) { return reduce_max<Axes...>(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
