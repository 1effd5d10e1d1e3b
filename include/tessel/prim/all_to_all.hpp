#pragma once
// all_to_all (lax.all_to_all): each device cuts its operand into N chunks along `Split` and sends chunk k to
// the group's device k, which joins what it receives, in group order, along `Concat`. tiled = true:
// dimension Split is divided by N and dimension Concat multiplied by N; tiled = false: dimension Split
// must equal N, is removed, and a new dimension of size N is inserted at Concat (rank unchanged).
//
//   all_to_all<M, "data", 0, 0, true>(x)   // a block transpose; M: the shard_map's mesh type
//
// Transpose: all_to_all with Split and Concat swapped; JVP: all_to_all of the tangent; batching: the batch
// axis in front. α-β cost: (N-1)α + (N-1)/N · bytes · β.

#include <array>

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/collective.hpp"
#include "tessel/prim/family/layout.hpp"

namespace tessel {
namespace prim {

// attr: [k, axes..., split, concat, tiled]. An untiled all_to_all is run as a tiled one over views of the
// buffers with a unit dimension inserted (inserting one does not move an element).
inline void run_all_to_all(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  kernels::device_context& d = collective::device();
  const collective::group gr = collective::group_of(n, *d.comm, d.device);
  collective::publish(d, n, *operands[0], in[0], out);
  auto split = static_cast<std::size_t>(collective::param(n, 0)), concat = static_cast<std::size_t>(collective::param(n, 1));
  ir::dims source = operands[0]->shape;
  if (collective::param(n, 2) == 0) {
    const std::size_t c = concat < split ? concat : concat + 1;
    source = batching::insert_axis(source, c, 1);
    split = c <= split ? split + 1 : split;
    concat = c;
  }
  ir::dims result = source, box = source;
  result.d[split] /= gr.size;
  result.d[concat] *= gr.size;
  box.d[split] /= gr.size;
  box_side from = dense_side(source), to = dense_side(result);
  from.start[split] = static_cast<std::ptrdiff_t>(gr.rank * box.d[split]);
  for (std::size_t j = 0; j < gr.size; ++j) {
    to.start[concat] = static_cast<std::ptrdiff_t>(j * box.d[concat]);
    copy_box(n.dtype, box.d, box.rank, from, d.comm->input(gr.member[j]), to, out);
  }
  d.comm->finish(d.device);
}

constexpr ir::attributes swapped_axes(const ir::node& n) {
  ir::attributes a = n.attr;
  a.ints[collective::param_slot(n, 0)] = n.attr.ints[collective::param_slot(n, 1)];
  a.ints[collective::param_slot(n, 1)] = n.attr.ints[collective::param_slot(n, 0)];
  return a;
}
constexpr void all_to_all_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = collective::remake(g, all_to_all_p, n, ct, g[n.operands[0]].shape, swapped_axes(n));
}
constexpr int all_to_all_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : collective::remake(g, all_to_all_p, n, t[0], n.shape, n.attr);
}
constexpr int all_to_all_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                               const std::array<int, ir::max_operands>& axes, int& out_axis) {
  return collective::batch_in_front(g, n, ops, axes, {0, 1}, out_axis);
}

// StableHLO: stablehlo.all_to_all; untiled, over the operand with a unit axis inserted where, once the
// split axis (then of size 1) is dropped, it stands at Concat.
inline void lower_all_to_all(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  auto split = static_cast<std::size_t>(collective::param(n, 0));
  auto concat = static_cast<std::size_t>(collective::param(n, 1));
  const bool tiled = collective::param(n, 2) != 0;
  const std::size_t count = collective::groups_of(n, w.mesh).front().size;
  ir::dims in = w.operand_node(0).shape;
  ir::hlo_value x = w.operand(0);
  if (!tiled) {
    if (concat > split) ++concat;
    in = batching::insert_axis(in, concat, 1);
    x = w.emit("stablehlo.reshape", {x}, {}, ir::hlo_type(n.dtype, in));
    if (concat <= split) ++split;
  }
  ir::dims out = in;
  out.d[split] /= count;
  out.d[concat] *= count;
  ir::hlo_properties p = collective::collective_properties(w, false);
  p.i64("concat_dimension", static_cast<std::int64_t>(concat)).i64("split_count", static_cast<std::int64_t>(count)).i64("split_dimension", static_cast<std::int64_t>(split));
  const ir::hlo_value r = w.emit("stablehlo.all_to_all", {x}, p, ir::hlo_type(n.dtype, out));
  w.define(tiled ? r : w.emit("stablehlo.reshape", {r}, {}, w.result_type()));
}
inline constexpr ir::primitive all_to_all_p{.name = "all_to_all",
                                            .kind = ir::prim_kind::layout,
                                            .run = &run_all_to_all,
                                            .vjp = &all_to_all_vjp,
                                            .jvp = &all_to_all_jvp,
                                            .batch = &all_to_all_batch,
                                            .varying = &collective::varying_along,
                                            .flops_per_element = 0, .lower = &lower_all_to_all};

template <class S, std::size_t Split, std::size_t Concat, std::size_t N, bool Tiled>
consteval auto all_to_all_shape() {
  if constexpr (Tiled) {
    constexpr auto d = [] {
      std::array<std::size_t, S::rank> r = S::dims;
      r[Split] /= N;
      r[Concat] *= N;
      return r;
    }();
    return std::type_identity<shape_from<d>>{};
  } else {
    return std::type_identity<insert_axis_t<drop_axis_t<S, static_cast<long>(Split)>, static_cast<long>(Concat), N>>{};
  }
}
}  // namespace prim

template <class M, spec_entry Axes, long Split, long Concat, bool Tiled = false, Traced X>
constexpr auto all_to_all(X x) {
  using T = typename X::value_type;
  using S = typename X::shape_type;
  constexpr std::size_t n = prim::collective::size_in<"tessel::all_to_all", M, Axes>();
  constexpr std::size_t split = normalize_axis<"tessel::all_to_all", X, Split>();
  constexpr std::size_t concat = normalize_axis<"tessel::all_to_all", X, Concat>();
  constexpr bool fits = Tiled ? S::dims[split] % n == 0 : S::dims[split] == n;
  if constexpr (!fits) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::all_to_all: the operand is ";
      append_type<X>(m) << " and its split dimension " << static_cast<std::uint64_t>(split) << " has size "
                        << static_cast<std::uint64_t>(S::dims[split]) << ", which "
                        << (Tiled ? "the group size does not divide" : "must equal the group size") << " (" << static_cast<std::uint64_t>(n)
                        << " devices along the axes); fix: "
                        << (Tiled ? "pad that dimension to a multiple of the group size" : "use tiled = true, or reshape so that the dimension has the group's size");
      return m;
    }>(), X>();
    return x;
  } else {
    using R = typename decltype(prim::all_to_all_shape<S, split, concat, n, Tiled>())::type;
    ir::graph_builder& g = *x.graph;
    prim::collective::require_mesh<M>(g, "tessel::all_to_all");
    ir::attributes a;
    prim::collective::bind(g, "tessel::all_to_all", Axes, a);
    a.push(static_cast<std::int64_t>(split));
    a.push(static_cast<std::int64_t>(concat));
    a.push(Tiled ? 1 : 0);
    return tracer<T, R>{x.graph, ir::make_node(g, prim::all_to_all_p, g[x.id].dtype, ir::dims_of<R>(), {x.id}, a)};
  }
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
