#pragma once
// reshape<To> (lax.reshape): the same elements in row-major order under a shape of equal size.
// It moves no data: a materialised operand is reused as the result's buffer.

#include "tessel/ir/tracer.hpp"

namespace tessel {
namespace prim {
inline constexpr ir::primitive reshape_p{.name = "reshape", .kind = ir::prim_kind::reshape, .flops_per_element = 0};
}  // namespace prim

template <class To, Traced X>
constexpr auto reshape(X x) {
  static_assert(Shape<To>, "tessel::reshape<To>: To must be a tessel::shape<...>");
  using T = typename X::value_type;
  if constexpr (std::is_same_v<typename X::shape_type, To>) {
    return x;
  } else if constexpr (reshapable_v<X, To>) {
    return ir::emit<T, To>(x.graph, prim::reshape_p, {x.id});
  } else {
    return tracer<T, To>{x.graph, x.id};
  }
}
}  // namespace tessel
