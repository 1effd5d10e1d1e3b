#pragma once
// pow (lax.pow): a^b elementwise with NumPy broadcasting, for f32 and bf16 (C's powf semantics:
// pow(x, 0) = 1 even for NaN x; a negative base with a non-integer exponent gives NaN).

#include <cmath>

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct pow_rule {
  static constexpr fixed_string name = "tessel::pow";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "stablehlo.power";
  static float apply(float a, float b) { return std::pow(a, b); }
  // d/da = b a^(b-1); d/db = a^b log(a), taken as 0 where a == 0 (as JAX).
  static constexpr std::array<partial, 2> partials(ir::graph_builder& g, int node) {
    const ir::node n = g[node];
    const int a = n.operands[0], b = n.operands[1];
    const int b_minus_one = build::sub(g, b, build::scalar_like(g, b, 1.0));
    const int da = build::mul(g, b, build::binary(g, pow_p, a, b_minus_one));
    const int zero = build::scalar_like(g, a, 0.0);
    const int safe_log = build::select(g, build::compare(g, eq_p, a, zero), zero, build::unary(g, log_p, a));
    return {of_node(da), of_node(build::mul(g, node, safe_log))};
  }
};
inline constexpr ir::primitive pow_p = binary_primitive<pow_rule>("pow", 20);
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto pow(A a, B b) {
  return prim::binary<prim::pow_p, prim::pow_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto pow(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return pow(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
