#pragma once
// all_gather (lax.all_gather): every device of the group gets the operands of all of them, in group order:
// stacked along a new axis `Axis` (tiled = false: f32[3] on 4 devices -> f32[4,3] at Axis 0), or
// concatenated along axis `Axis` (tiled = true: f32[3] -> f32[12]). The result varies along the axes
// (JAX: all_gather is varying -> varying; return it with out_specs naming the axes).
//
//   all_gather<M, "data", 0, true>(x)   // M: the shard_map's mesh type (the result's shape needs its sizes)
//
// Transpose: psum_scatter over the same axes and dimension; JVP: all_gather of the tangent; batching: the
// batch axis in front. α-β cost (ring): (N-1)α + (N-1)/N · result bytes · β.

#include <array>

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/collective.hpp"
#include "tessel/prim/family/layout.hpp"

namespace tessel {
namespace prim {

// attr: [k, axes..., axis, tiled, invariant]. invariant (JAX's all_gather_invariant; only jit with shardings
// emits it, transform/partition.hpp): the result is typed the same on every device along the axes, which
// it is, since every device gets every block.
inline void run_all_gather(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  kernels::device_context& d = collective::device();
  const collective::group gr = collective::group_of(n, *d.comm, d.device);
  collective::publish(d, n, *operands[0], in[0], out);
  const auto axis = static_cast<std::size_t>(collective::param(n, 0));
  ir::dims block = operands[0]->shape;
  if (collective::param(n, 1) == 0) block = batching::insert_axis(block, axis, 1);
  const box_side from = dense_side(block);
  box_side to = dense_side(n.shape);
  for (std::size_t j = 0; j < gr.size; ++j) {
    to.start[axis] = static_cast<std::ptrdiff_t>(j * block.d[axis]);
    copy_box(n.dtype, block.d, block.rank, from, d.comm->input(gr.member[j]), to, out);
  }
  d.comm->finish(d.device);
}

constexpr void all_gather_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = collective::remake(g, psum_scatter_p, n, ct, g[n.operands[0]].shape, n.attr);
}
constexpr int all_gather_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : collective::remake(g, all_gather_p, n, t[0], n.shape, n.attr);
}
constexpr std::uint8_t all_gather_varying(const ir::node& n, std::uint8_t operands) {
  return collective::param(n, 2) != 0 ? collective::invariant_along(n, operands) : collective::varying_along(n, operands);
}
constexpr int all_gather_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                               const std::array<int, ir::max_operands>& axes, int& out_axis) {
  return collective::batch_in_front(g, n, ops, axes, {0}, out_axis);
}

// StableHLO: stablehlo.all_gather along the axis (untiled: of the operand with a unit axis inserted there).
inline void lower_all_gather(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const auto axis = collective::param(n, 0);
  ir::hlo_value x = w.operand(0);
  if (collective::param(n, 1) == 0)
    x = w.emit("stablehlo.reshape", {x}, {}, ir::hlo_type(n.dtype, batching::insert_axis(w.operand_node(0).shape, static_cast<std::size_t>(axis), 1)));
  w.define(w.emit("stablehlo.all_gather", {x}, collective::collective_properties(w).i64("all_gather_dim", axis), w.result_type()));
}
inline constexpr ir::primitive all_gather_p{.name = "all_gather",
                                            .kind = ir::prim_kind::layout,
                                            .run = &run_all_gather,
                                            .vjp = &all_gather_vjp,
                                            .jvp = &all_gather_jvp,
                                            .batch = &all_gather_batch,
                                            .varying = &all_gather_varying,
                                            .flops_per_element = 0, .lower = &lower_all_gather};
}  // namespace prim

template <class M, spec_entry Axes, long Axis = 0, bool Tiled = false, Traced X>
constexpr auto all_gather(X x) {
  using T = typename X::value_type;
  using S = typename X::shape_type;
  constexpr std::size_t n = prim::collective::size_in<"tessel::all_gather", M, Axes>();
  constexpr std::size_t axis = normalize_axis<"tessel::all_gather", X, Axis, !Tiled>();
  using R = decltype([] {
    if constexpr (Tiled) return std::type_identity<shape_from<prim::collective::rescaled<S, axis, n, 1>()>>{};
    else return std::type_identity<insert_axis_t<S, static_cast<long>(axis), n>>{};
  }());
  using result = tracer<T, typename R::type>;
  ir::graph_builder& g = *x.graph;
  prim::collective::require_mesh<M>(g, "tessel::all_gather");
  ir::attributes a;
  prim::collective::bind(g, "tessel::all_gather", Axes, a);
  a.push(static_cast<std::int64_t>(axis));
  a.push(Tiled ? 1 : 0);
  return result{x.graph, ir::make_node(g, prim::all_gather_p, g[x.id].dtype, ir::dims_of<typename R::type>(), {x.id}, a)};
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
