#pragma once
// optimization_barrier (lax.optimization_barrier, as checkpoint uses it): the value of x, as a new node
// that comes after `after` in the table. Its attribute names `after`'s node, so it is distinct from x
// and from barriers after other nodes (hash-consing cannot merge a recomputation back into the forward
// pass), and since it is emitted after `after`, every kernel computing from it is planned after
// `after`'s (plan.hpp runs kernels in table order). Checkpoint (transform/remat.hpp) orders its
// recomputation after the cotangent that starts a segment's backward pass, so recomputed forward values
// are made late, next to the backward kernels that read them, and the forward pass's copies die early.
// Elementwise identity: it fuses into its consumers (a copy only when a GEMM reads it).
//
//   x2 = optimization_barrier(x, ct)   // x's value, computed after ct


#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/identity.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {

// Operand 0 through stablehlo.optimization_barrier, which XLA keeps as tessel's planner keeps the node's place.
inline void lower_optimization_barrier(ir::stablehlo_writer& w) {
  w.define(w.emit("stablehlo.optimization_barrier", {w.operand(0)}, {}, w.result_type()));
}
inline constexpr ir::primitive optimization_barrier_p{.name = "optimization_barrier",
                                                      .kind = ir::prim_kind::elementwise,
                                                      .evaluate = &identity::evaluate,
                                                      .vjp = &identity::vjp,
                                                      .jvp = &identity::jvp,
                                                      .batch = &identity::batch,
                                                      .flops_per_element = 0, .lower = &lower_optimization_barrier};

namespace build {
// x's value, ordered after node `after` and distinct from x.
constexpr int optimization_barrier(ir::graph_builder& g, int x, int after) {
  ir::attributes a;
  a.push(after);
  return ir::make_node(g, optimization_barrier_p, g[x].dtype, g[x].shape, {x}, a);
}
}  // namespace build
}  // namespace prim

template <Traced X, Traced D>
constexpr X optimization_barrier(X x, D after) {
  return X{x.graph, prim::build::optimization_barrier(*x.graph, x.id, after.id)};
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
