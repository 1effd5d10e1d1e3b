#pragma once
// add (lax.add): a + b, elementwise with NumPy broadcasting; also `operator+`. A scalar operand
// takes the tensor's dtype. Takes f32, bf16, s32 and u32 (integers wrap); operands' dtypes must agree.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct add_rule {
  static constexpr fixed_string name = "tessel::add";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.add";
  static auto apply(auto a, auto b) { return a + b; }
  static std::uint32_t apply(std::uint32_t a, std::uint32_t b) { return a + b; }
  static std::int32_t apply(std::int32_t a, std::int32_t b) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));  // wraps, no UB
  }
  static constexpr std::array<partial, 2> partials([[maybe_unused]] ir::graph_builder& g, [[maybe_unused]] int node) {
    return {partial{partial::one}, partial{partial::one}};
  }
};
inline constexpr ir::primitive add_p = binary_primitive<add_rule>("add");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto add(A a, B b) {
  return prim::binary<prim::add_p, prim::add_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto add(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return add(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator+(A a, B b) {
  return add(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto operator+(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return add(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
