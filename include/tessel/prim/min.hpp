#pragma once
// min (lax.min): the elementwise minimum with NumPy broadcasting. A NaN in either operand gives NaN
// (lax.min propagates NaN; the x86 instruction would not).

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math.hpp"

namespace tessel {
namespace prim {
struct min_rule {
  static constexpr fixed_string name = "tessel::min";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.minimum";
  template <class V>
  [[gnu::always_inline]] static V apply(V a, V b) {  // inlined: g++ called it per vector from reduce_max
    if constexpr (std::is_integral_v<V>) {
      return a < b ? a : b;
    } else {
      return simd::select(simd::is_nan(a) || a < b, a, b);  // NaN in b falls through to b
    }
  }
  // JAX's balanced rule: the winner gets the whole cotangent, a tie splits it in halves.
  static constexpr std::array<partial, 2> partials(ir::graph_builder& g, int node) {
    const ir::node n = g[node];
    const int a = n.operands[0], b = n.operands[1];
    const int wins = build::compare(g, lt_p, a, b);
    const int ties = build::compare(g, eq_p, a, b);
    const int half_or_none = build::select(g, ties, build::scalar_like(g, a, 0.5), build::scalar_like(g, a, 0.0));
    const int wa = build::select(g, wins, build::scalar_like(g, a, 1.0), half_or_none);
    return {of_node(wa), of_node(build::sub(g, build::scalar_like(g, a, 1.0), wa))};
  }
};
inline constexpr ir::primitive min_p = binary_primitive<min_rule>("min");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto min(A a, B b) {
  return prim::binary<prim::min_p, prim::min_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto min(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return min(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
