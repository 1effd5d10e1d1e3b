#pragma once
// ge (lax.ge): a >= b elementwise, with NumPy broadcasting; also `operator>=`. The result is pred
// (bool) of the broadcast shape. Comparisons with NaN are false, as IEEE says.

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct ge_rule {
  static constexpr fixed_string name = "tessel::ge";
  static constexpr accepts domain = accepts::any;
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
template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto operator>=(A a, B b) {
  return ge(a, b);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
