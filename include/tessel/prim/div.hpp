#pragma once
// div (lax.div): a / b elementwise with NumPy broadcasting; also `operator/`. Floats follow IEEE
// (x/0 = ±inf, 0/0 = NaN). Integers round toward zero; as in XLA, x/0 is -1 for s32 and all ones for
// u32, and INT32_MIN / -1 is INT32_MIN (C++ would be undefined in both cases).

#include <cstdint>
#include <limits>

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct div_rule {
  static constexpr fixed_string name = "tessel::div";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.divide";
  static auto apply(auto a, auto b) { return a / b; }
  static std::int32_t apply(std::int32_t a, std::int32_t b) {
    if (b == 0) return -1;
    if (a == std::numeric_limits<std::int32_t>::min() && b == -1) return a;
    return a / b;
  }
  static std::uint32_t apply(std::uint32_t a, std::uint32_t b) { return b == 0 ? ~0u : a / b; }
  static constexpr std::array<partial, 2> partials(ir::graph_builder& g, int node) {
    const ir::node n = g[node];
    const int b = n.operands[1];
    return {of_node(build::div(g, build::scalar_like(g, b, 1.0), b)), of_node(build::neg(g, build::div(g, node, b)))};
  }
};
inline constexpr ir::primitive div_p = binary_primitive<div_rule>("div", 4);
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto div(A a, B b) {
  return prim::binary<prim::div_p, prim::div_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto div(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return div(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator/(A a, B b) {
  return div(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto operator/(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return div(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
