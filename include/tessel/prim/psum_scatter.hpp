#pragma once
// psum_scatter (lax.psum_scatter, XLA's reduce-scatter): the sum over the group, of which device k keeps
// block k along dimension `Dim`: tiled = true keeps f32[n·b, ...] -> f32[b, ...]; tiled = false needs
// dimension Dim to equal the group size and drops it. The first half of a psum (psum = all_gather of
// psum_scatter); the result varies along the axes.
//
//   psum_scatter<M, "data", 0, true>(x)   // M: the shard_map's mesh type
//
// Summed in group order for every element (bit-identical from run to run). Transpose: all_gather; JVP:
// psum_scatter of the tangent; batching: the batch axis in front.
// α-β cost (ring): (N-1)α + (N-1)/N · operand bytes · β.

#include <array>
#include <cstring>
#include <vector>

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/collective.hpp"

namespace tessel {
namespace prim {

// attr: [k, axes..., dimension, tiled].
inline void run_psum_scatter(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  kernels::device_context& d = collective::device();
  const collective::group gr = collective::group_of(n, *d.comm, d.device);
  const auto dim = static_cast<std::size_t>(collective::param(n, 0));
  const ir::dims& src = operands[0]->shape;
  std::size_t outer = 1, inner = 1;
  for (std::size_t a = 0; a < dim; ++a) outer *= src.d[a];
  for (std::size_t a = dim + 1; a < src.rank; ++a) inner *= src.d[a];
  const std::size_t block = src.d[dim] / gr.size * inner, bytes = ir::bytes_of(n.dtype);
  if (collective::one_device_a_process(gr, *d.comm)) {  // each process sends each other only its block
    d.comm->publish(d.device, in[0], out, 0, 0);        // nothing to share within the process
    visit_dtype(n.dtype, [&]<class T>(T) {
      if constexpr (!std::is_same_v<T, bool>) {
        // Member j's block is block j of every outer slice: laid out member after member (a copy, unless one
        // slice) so that each member's block is one run of elements.
        const void* by_member = in[0];
        if (outer > 1) {
          static std::vector<T> packed;
          packed.resize(outer * gr.size * block);
          for (std::size_t j = 0; j < gr.size; ++j)
            for (std::size_t o = 0; o < outer; ++o)
              std::memcpy(packed.data() + (j * outer + o) * block, static_cast<const T*>(in[0]) + (o * gr.size + j) * block, block * sizeof(T));
          by_member = packed.data();
        }
        std::array<std::size_t, max_mesh_devices + 1> first{};
        for (std::size_t j = 0; j <= gr.size; ++j) first[j] = j * outer * block;
        collective::reduce_chunk_over_processes<T>(d.comm->program(), collective::reduction::sum, gr, by_member, first.data(), out);
      }
    });
    d.comm->finish(d.device);
    return;
  }
  collective::publish(d, n, *operands[0], in[0], out);
  visit_dtype(n.dtype, [&]<class T>(T) {
    if constexpr (!std::is_same_v<T, bool>) {
      std::array<const void*, max_mesh_devices> ins{};
      for (std::size_t o = 0; o < outer; ++o) {
        const std::size_t from = (o * src.d[dim] * inner + gr.rank * block) * bytes;
        for (std::size_t j = 0; j < gr.size; ++j) ins[j] = static_cast<const char*>(d.comm->input(gr.member[j])) + from;
        collective::reduce_in_order<T>(collective::reduction::sum, ins.data(), gr.size, 0, block, static_cast<char*>(out) + o * block * bytes);
      }
    }
  });
  d.comm->finish(d.device);
}

constexpr void psum_scatter_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = collective::remake(g, all_gather_p, n, ct, g[n.operands[0]].shape, n.attr);
}
constexpr int psum_scatter_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : collective::remake(g, psum_scatter_p, n, t[0], n.shape, n.attr);
}
constexpr int psum_scatter_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                                 const std::array<int, ir::max_operands>& axes, int& out_axis) {
  return collective::batch_in_front(g, n, ops, axes, {0}, out_axis);
}

// StableHLO: stablehlo.reduce_scatter along the dimension (untiled: to a unit dimension, then dropped);
// bf16 summed in f32.
inline void lower_psum_scatter(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const auto dim = static_cast<std::size_t>(collective::param(n, 0));
  const ir::dtype_code acc = n.dtype == ir::dtype_code::bf16 ? ir::dtype_code::f32 : n.dtype;
  const ir::dims& in = w.operand_node(0).shape;
  ir::dims scattered = in;
  scattered.d[dim] = in.d[dim] / collective::groups_of(n, w.mesh).front().size;
  const ir::hlo_value x = acc == n.dtype ? w.operand(0) : w.convert(w.operand(0), acc, in);
  ir::hlo_value r = collective::reduce_over_group(w, "stablehlo.reduce_scatter", x, "stablehlo.add",
                                                  collective::collective_properties(w).i64("scatter_dimension", static_cast<std::int64_t>(dim)),
                                                  ir::hlo_type(acc, scattered));
  if (!(scattered == n.shape)) r = w.emit("stablehlo.reshape", {r}, {}, ir::hlo_type(acc, n.shape));
  w.define(acc == n.dtype ? r : w.convert(r, n.dtype, n.shape));
}
inline constexpr ir::primitive psum_scatter_p{.name = "psum_scatter",
                                              .kind = ir::prim_kind::layout,
                                              .run = &run_psum_scatter,
                                              .vjp = &psum_scatter_vjp,
                                              .jvp = &psum_scatter_jvp,
                                              .batch = &psum_scatter_batch,
                                              .varying = &collective::varying_along,
                                              .flops_per_element = 1, .lower = &lower_psum_scatter};
}  // namespace prim

template <class M, spec_entry Axes, long Dim = 0, bool Tiled = false, Traced X>
constexpr auto psum_scatter(X x) {
  using T = typename X::value_type;
  using S = typename X::shape_type;
  constexpr std::size_t n = prim::collective::size_in<"tessel::psum_scatter", M, Axes>();
  constexpr std::size_t dim = normalize_axis<"tessel::psum_scatter", X, Dim>();
  constexpr bool fits = Tiled ? S::dims[dim] % n == 0 : S::dims[dim] == n;
  if constexpr (!fits) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::psum_scatter: the operand is ";
      append_type<X>(m) << " and its scatter dimension " << static_cast<std::uint64_t>(dim) << " has size "
                        << static_cast<std::uint64_t>(S::dims[dim]) << ", which "
                        << (Tiled ? "the group size does not divide" : "must equal the group size") << " (" << static_cast<std::uint64_t>(n)
                        << " devices along the axes); fix: " << (Tiled ? "pad that dimension to a multiple of the group size" : "use tiled = true, or reshape so that the dimension has the group's size");
      return m;
    }>(), X>();
    return x;
  } else {
    using R = decltype([] {
      if constexpr (Tiled) return std::type_identity<shape_from<prim::collective::rescaled<S, dim, 1, n>()>>{};
      else return std::type_identity<drop_axis_t<S, static_cast<long>(dim)>>{};
    }());
    ir::graph_builder& g = *x.graph;
    prim::collective::require_mesh<M>(g, "tessel::psum_scatter");
    ir::attributes a;
    prim::collective::bind(g, "tessel::psum_scatter", Axes, a);
    a.push(static_cast<std::int64_t>(dim));
    a.push(Tiled ? 1 : 0);
    return tracer<T, typename R::type>{x.graph, ir::make_node(g, prim::psum_scatter_p, g[x.id].dtype, ir::dims_of<typename R::type>(), {x.id}, a)};
  }
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
