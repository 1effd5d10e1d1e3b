#pragma once
// gt (lax.gt): a > b elementwise, with NumPy broadcasting; also `operator>`. The result is pred
// (bool) of the broadcast shape. Comparisons with NaN are false, as IEEE says.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct gt_rule {
  static constexpr fixed_string name = "tessel::gt";
  static constexpr accepts domain = accepts::any;
  static constexpr std::string_view comparison = "GT";  // stablehlo.compare
  template <class T>
  using result = bool;
  static bool apply(auto a, auto b) { return a > b; }
};
inline constexpr ir::primitive gt_p = binary_primitive<gt_rule>("gt");
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto gt(A a, B b) {
  return prim::binary<prim::gt_p, prim::gt_rule>(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto gt(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return gt(a, b); }, a, b);
}
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator>(A a, B b) {
  return gt(a, b);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class A, class B>
  requires(Eager<A, B>)
auto operator>(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return gt(a, b); }, a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
