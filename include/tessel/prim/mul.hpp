#pragma once
// mul (lax.mul): a * b, elementwise with NumPy broadcasting; also `operator*`. A scalar operand
// takes the tensor's dtype. Takes f32, bf16, s32 and u32 (integers wrap); operands' dtypes must agree.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct mul_rule {
  static constexpr fixed_string name = "tessel::mul";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.multiply";
  static auto apply(auto a, auto b) { return a * b; }
  static std::uint32_t apply(std::uint32_t a, std::uint32_t b) { return a * b; }
  static std::int32_t apply(std::int32_t a, std::int32_t b) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) * static_cast<std::uint32_t>(b));  // wraps, no UB
  }
  static constexpr std::array<partial, 2> partials(ir::graph_builder& g, int node) {
    const ir::node n = g[node];
    return {of_node(n.operands[1]), of_node(n.operands[0])};
  }
};
inline constexpr ir::primitive mul_p = binary_primitive<mul_rule>("mul");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto mul(A a, B b) {
  return prim::binary<prim::mul_p, prim::mul_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto mul(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return mul(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator*(A a, B b) {
  return mul(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto operator*(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return mul(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
