#pragma once
// pmin (lax.pmin): the elementwise min over the devices of the named mesh axes; every device of a group gets
// the same result, which no longer varies along those axes. A NaN on any device wins, as in reduce_min.
//
//   pmin<"data">(x)
//
// Not differentiable (as JAX: no JVP or transpose rule); grad through it is a compile error naming pmin.
// Batching: per batch element. α-β cost as psum's.

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/family/collective.hpp"
#include "tessel/prim/psum.hpp"

namespace tessel {
namespace prim {
inline constexpr ir::primitive pmin_p{.name = "pmin",
                                      .kind = ir::prim_kind::layout,
                                      .run = &collective::run_all_reduce<collective::reduction::min>,
                                      .batch = &collective::batch_in_place,
                                      .varying = &collective::invariant_along,
                                      .flops_per_element = 1, .lower = &collective::lower_all_reduce<collective::reduction::min>};
}  // namespace prim

template <spec_entry Axes, Traced X>
constexpr X pmin(X x) {
  if constexpr (!prim::collective::require_numeric<"tessel::pmin", X>()) return x;
  else return prim::collective::all_reduce(prim::pmin_p, "tessel::pmin", Axes, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
