#pragma once
// eq (lax.eq): a == b elementwise, with NumPy broadcasting; also `operator==`. The result is pred
// (bool) of the broadcast shape. Comparisons with NaN are false, as IEEE says.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct eq_rule {
  static constexpr fixed_string name = "tessel::eq";
  static constexpr accepts domain = accepts::any;
  static constexpr std::string_view comparison = "EQ";  // stablehlo.compare
  template <class T>
  using result = bool;
  static bool apply(auto a, auto b) { return a == b; }
};
inline constexpr ir::primitive eq_p = binary_primitive<eq_rule>("eq");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto eq(A a, B b) {
  return prim::binary<prim::eq_p, prim::eq_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto eq(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return eq(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator==(A a, B b) {
  return eq(a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
