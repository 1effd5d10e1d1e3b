#pragma once
// ne (lax.ne): a != b elementwise, with NumPy broadcasting; also `operator!=`. The result is pred
// (bool) of the broadcast shape. Comparisons with NaN are false (and != is true), as IEEE says.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct ne_rule {
  static constexpr fixed_string name = "tessel::ne";
  static constexpr accepts domain = accepts::any;
  static constexpr std::string_view comparison = "NE";  // stablehlo.compare
  template <class T>
  using result = bool;
  static bool apply(auto a, auto b) { return a != b; }
};
inline constexpr ir::primitive ne_p = binary_primitive<ne_rule>("ne");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto ne(A a, B b) {
  return prim::binary<prim::ne_p, prim::ne_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto ne(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return ne(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator!=(A a, B b) {
  return ne(a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
