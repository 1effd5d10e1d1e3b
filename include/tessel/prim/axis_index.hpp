#pragma once
// axis_index (lax.axis_index): this device's position along the named mesh axes, an s32 scalar (for a
// tuple of axes, first major: on a (4, 2) mesh, axis_index<mesh_axes<"i", "j">> is 2i + j). It varies along
// those axes. The anchor is any value of the traced function (it names the program being traced, as
// JAX's ambient trace does). axis_size<M, "i"> is the axes' size, a compile-time constant.
//
//   auto i = tessel::axis_index<"data">(x);

#include <array>
#include <cstdint>
#include <vector>

#include "tessel/core/mesh.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/collective.hpp"

namespace tessel {
namespace prim {

// attr: [k, axes...]. A kernel of its own (not a generator inlined into loops) so that it runs on the
// device's own thread.
inline void run_axis_index(const ir::node& n, const ir::node* const*, const void* const*, void* out) {
  kernels::device_context& d = collective::device();
  *static_cast<std::int32_t*>(out) = static_cast<std::int32_t>(collective::group_of(n, *d.comm, d.device).rank);
}

// StableHLO: the device's place in its group, from stablehlo.partition_id.
inline void lower_axis_index(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  std::vector<std::size_t> axes;
  for (std::size_t i = 0; i < collective::axis_count(n); ++i) axes.push_back(collective::axis_at(n, i));
  w.define(w.place_along(axes));
}
inline constexpr ir::primitive axis_index_p{.name = "axis_index",
                                            .kind = ir::prim_kind::layout,
                                            .run = &run_axis_index,
                                            .differentiable = false,
                                            .varying = &collective::varying_along,
                                            .flops_per_element = 0, .lower = &lower_axis_index};
}  // namespace prim

template <spec_entry Axes, Traced Anchor>
constexpr tracer<std::int32_t, shape<>> axis_index(Anchor anchor) {
  ir::graph_builder& g = *anchor.graph;
  ir::attributes a;
  prim::collective::bind(g, "tessel::axis_index", Axes, a);
  return {anchor.graph, ir::make_node(g, prim::axis_index_p, ir::dtype_code::s32, ir::dims{}, {}, a)};
}

template <class M, spec_entry Axes>
inline constexpr std::size_t axis_size = prim::collective::size_in<"tessel::axis_size", M, Axes>();
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
