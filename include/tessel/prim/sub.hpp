#pragma once
// sub (lax.sub): a - b, elementwise with NumPy broadcasting; also `operator-`. A scalar operand
// takes the tensor's dtype. Takes f32, bf16, s32 and u32 (integers wrap); operands' dtypes must agree.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct sub_rule {
  static constexpr fixed_string name = "tessel::sub";
  static constexpr accepts domain = accepts::numeric;
  static constexpr std::string_view stablehlo = "stablehlo.subtract";
  static auto apply(auto a, auto b) { return a - b; }
  static std::uint32_t apply(std::uint32_t a, std::uint32_t b) { return a - b; }
  static std::int32_t apply(std::int32_t a, std::int32_t b) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) - static_cast<std::uint32_t>(b));  // wraps, no UB
  }
  static constexpr std::array<partial, 2> partials([[maybe_unused]] ir::graph_builder& g, [[maybe_unused]] int node) {
    return {partial{partial::one}, partial{partial::minus_one}};
  }
};
inline constexpr ir::primitive sub_p = binary_primitive<sub_rule>("sub");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto sub(A a, B b) {
  return prim::binary<prim::sub_p, prim::sub_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto sub(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return sub(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator-(A a, B b) {
  return sub(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto operator-(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return sub(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
