#pragma once
// lt (lax.lt): a < b elementwise, with NumPy broadcasting; also `operator<`. The result is pred
// (bool) of the broadcast shape. Comparisons with NaN are false, as IEEE says.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct lt_rule {
  static constexpr fixed_string name = "tessel::lt";
  static constexpr accepts domain = accepts::any;
  static constexpr std::string_view comparison = "LT";  // stablehlo.compare
  template <class T>
  using result = bool;
  static bool apply(auto a, auto b) { return a < b; }
};
inline constexpr ir::primitive lt_p = binary_primitive<lt_rule>("lt");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto lt(A a, B b) {
  return prim::binary<prim::lt_p, prim::lt_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto lt(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return lt(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator<(A a, B b) {
  return lt(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto operator<(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return lt(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
