#pragma once
// pmax (lax.pmax): the elementwise max over the devices of the named mesh axes; every device of a group gets
// the same result, which no longer varies along those axes. A NaN on any device wins, as in reduce_max.
//
//   pmax<"data">(x)
//
// Not differentiable (as JAX: no JVP or transpose rule); grad through it is a compile error naming pmax.
// Batching: per batch element. α-β cost as psum's.

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/family/collective.hpp"
#include "tessel/prim/psum.hpp"

namespace tessel {
namespace prim {
inline constexpr ir::primitive pmax_p{.name = "pmax",
                                      .kind = ir::prim_kind::layout,
                                      .run = &collective::run_all_reduce<collective::reduction::max>,
                                      .batch = &collective::batch_in_place,
                                      .varying = &collective::invariant_along,
                                      .flops_per_element = 1, .lower = &collective::lower_all_reduce<collective::reduction::max>};
}  // namespace prim

template <spec_entry Axes, Traced X>
constexpr X pmax(X x) {
  if constexpr (!prim::collective::require_numeric<"tessel::pmax", X>()) return x;
  else return prim::collective::all_reduce(prim::pmax_p, "tessel::pmax", Axes, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
