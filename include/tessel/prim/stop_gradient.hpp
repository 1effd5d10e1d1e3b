#pragma once
// stop_gradient (lax.stop_gradient): the identity in the forward pass; no cotangent and no tangent flow
// through it, so gradients treat its result as a constant.
//
//   grad([](auto x) { return sum(stop_gradient(x) * x); })   // at x = 3: 3, not 6

#include <algorithm>

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/identity.hpp"

namespace tessel {
namespace prim {
inline constexpr ir::primitive stop_gradient_p{.name = "stop_gradient",
                                               .kind = ir::prim_kind::elementwise,
                                               .evaluate = &identity::evaluate,
                                               .batch = &batching::elementwise,
                                               .differentiable = false,
                                               .flops_per_element = 0, .lower = &identity::lower};
}  // namespace prim

template <Traced X>
constexpr auto stop_gradient(X x) {
  return ir::emit<typename X::value_type, typename X::shape_type>(x.graph, prim::stop_gradient_p, {x.id});
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto stop_gradient(const X& x) {
  return eagerly([](auto x) { return stop_gradient(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
