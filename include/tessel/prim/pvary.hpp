#pragma once
// pvary (JAX's pcast(x, axes, to='varying')): the identity, whose result is typed as varying along the named
// mesh axes. It is what psum's transpose is: where an invariant value meets device-varying ones, its
// cotangent differs per device, and pvary's own transpose, psum, adds those parts back up. tessel inserts
// the psum itself when a cotangent reaches an invariant value (transform/sweeps.hpp), so users call
// pvary only to make a scan's initial carry vary along the axes its body makes it vary along.
//
//   pvary<"data">(init)

#include <array>
#include <cstring>

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/collective.hpp"
#include "tessel/prim/family/identity.hpp"

namespace tessel {
namespace prim {

inline void run_pvary(const ir::node& n, const ir::node* const*, const void* const* in, void* out) {
  std::memcpy(out, in[0], n.shape.size() * ir::bytes_of(n.dtype));
}
constexpr void pvary_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = collective::remake(g, psum_p, n, ct, g[n.operands[0]].shape, n.attr);
}
constexpr int pvary_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : collective::remake(g, pvary_p, n, t[0], n.shape, n.attr);
}

inline constexpr ir::primitive pvary_p{.name = "pvary",
                                       .kind = ir::prim_kind::layout,
                                       .run = &run_pvary,
                                       .vjp = &pvary_vjp,
                                       .jvp = &pvary_jvp,
                                       .batch = &collective::batch_in_place,
                                       .varying = &collective::varying_along,
                                       .flops_per_element = 0, .lower = &identity::lower};
}  // namespace prim

template <spec_entry Axes, Traced X>
constexpr X pvary(X x) {
  ir::attributes a;
  prim::collective::bind(*x.graph, "tessel::pvary", Axes, a);
  return X{x.graph, ir::make_node(*x.graph, prim::pvary_p, x.graph->operator[](x.id).dtype, x.graph->operator[](x.id).shape, {x.id}, a)};
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
