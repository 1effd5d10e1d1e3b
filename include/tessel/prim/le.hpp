#pragma once
// le (lax.le): a <= b elementwise, with NumPy broadcasting; also `operator<=`. The result is pred
// (bool) of the broadcast shape. Comparisons with NaN are false, as IEEE says.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct le_rule {
  static constexpr fixed_string name = "tessel::le";
  static constexpr accepts domain = accepts::any;
  static constexpr std::string_view comparison = "LE";  // stablehlo.compare
  template <class T>
  using result = bool;
  static bool apply(auto a, auto b) { return a <= b; }
};
inline constexpr ir::primitive le_p = binary_primitive<le_rule>("le");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto le(A a, B b) {
  return prim::binary<prim::le_p, prim::le_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto le(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return le(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator<=(A a, B b) {
  return le(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto operator<=(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return le(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
