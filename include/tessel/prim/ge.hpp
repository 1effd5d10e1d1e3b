#pragma once
// ge (lax.ge): a >= b elementwise, with NumPy broadcasting; also `operator>=`. The result is pred
// (bool) of the broadcast shape. Comparisons with NaN are false, as IEEE says.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct ge_rule {
  static constexpr fixed_string name = "tessel::ge";
  static constexpr accepts domain = accepts::any;
  static constexpr std::string_view comparison = "GE";  // stablehlo.compare
  template <class T>
  using result = bool;
  static bool apply(auto a, auto b) { return a >= b; }
};
inline constexpr ir::primitive ge_p = binary_primitive<ge_rule>("ge");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto ge(A a, B b) {
  return prim::binary<prim::ge_p, prim::ge_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto ge(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return ge(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator>=(A a, B b) {
  return ge(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto operator>=(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return ge(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
