#pragma once
// ppermute (lax.ppermute): device `from` sends its operand to device `to`, for each pair (positions in the
// group of the named axes); a device no pair sends to gets zeros. Sources are distinct and destinations
// are distinct (a compile error otherwise, as JAX's "ppermute sources and destinations must be unique").
//
//   ppermute<"ring", edge{0, 1}, edge{1, 2}, edge{2, 3}, edge{3, 0}>(x)   // a ring shift
//
// Transpose: ppermute with every pair reversed; JVP: ppermute of the tangent; batching: per batch element.
// α-β cost: α + bytes · β (every device sends once, in parallel).

#include <array>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/collective.hpp"

namespace tessel {

// One pair of a permutation: the group positions of the sender and the receiver.
struct edge {
  int from = 0, to = 0;
};

namespace prim {

// attr: [k, axes..., group size N, sender of position 0, ..., sender of position N-1 (-1: none)].
inline constexpr std::size_t ppermute_max_group = ir::max_ints - 3;

inline void run_ppermute(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  kernels::device_context& d = collective::device();
  const collective::group gr = collective::group_of(n, *d.comm, d.device);
  collective::publish(d, n, *operands[0], in[0], out);
  const std::int64_t sender = collective::param(n, 1 + gr.rank);
  const std::size_t bytes = n.shape.size() * ir::bytes_of(n.dtype);
  if (sender < 0) std::memset(out, 0, bytes);
  else std::memcpy(out, d.comm->input(gr.member[static_cast<std::size_t>(sender)]), bytes);
  d.comm->finish(d.device);
}

// The reversed permutation: position p's sender becomes the position p sends to.
constexpr ir::attributes reversed_pairs(const ir::node& n) {
  ir::attributes a = n.attr;
  const auto size = static_cast<std::size_t>(collective::param(n, 0));
  for (std::size_t p = 0; p < size; ++p) a.ints[collective::param_slot(n, 1 + p)] = -1;
  for (std::size_t p = 0; p < size; ++p)
    if (const std::int64_t s = collective::param(n, 1 + p); s >= 0) a.ints[collective::param_slot(n, 1 + static_cast<std::size_t>(s))] = static_cast<std::int64_t>(p);
  return a;
}
constexpr void ppermute_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = collective::remake(g, ppermute_p, n, ct, n.shape, reversed_pairs(n));
}
constexpr int ppermute_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : collective::remake(g, ppermute_p, n, t[0], n.shape, n.attr);
}

// StableHLO: stablehlo.collective_permute with the pairs of every group (a device no one sends to gets
// zeros there too).
inline void lower_ppermute(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const auto size = static_cast<std::size_t>(collective::param(n, 0));
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  for (const collective::group& g : collective::groups_of(n, w.mesh))
    for (std::size_t to = 0; to < size; ++to)
      if (const std::int64_t from = collective::param(n, 1 + to); from >= 0) pairs.emplace_back(g.member[static_cast<std::size_t>(from)], g.member[to]);
  std::string text = "dense<[";
  for (std::size_t i = 0; i < pairs.size(); ++i) text += (i ? ", [" : "[") + std::to_string(pairs[i].first) + ", " + std::to_string(pairs[i].second) + "]";
  text += "]> : tensor<" + std::to_string(pairs.size()) + "x2xi64>";
  ir::hlo_properties p;
  p.add("channel_handle", "#stablehlo.channel_handle<handle = " + std::to_string(w.next_channel()) + ", type = 1>").add("source_target_pairs", text);
  w.define(w.emit("stablehlo.collective_permute", {w.operand(0)}, p, w.result_type()));
}
inline constexpr ir::primitive ppermute_p{.name = "ppermute",
                                          .kind = ir::prim_kind::layout,
                                          .run = &run_ppermute,
                                          .vjp = &ppermute_vjp,
                                          .jvp = &ppermute_jvp,
                                          .batch = &collective::batch_in_place,
                                          .varying = &collective::varying_along,
                                          .flops_per_element = 0, .lower = &lower_ppermute};

template <edge... Pairs>
consteval int repeated_end() {  // 1: a repeated source, 2: a repeated destination, 3: a negative position
  constexpr std::array<edge, sizeof...(Pairs)> p{Pairs...};
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i].from < 0 || p[i].to < 0) return 3;
    for (std::size_t j = 0; j < i; ++j) {
      if (p[i].from == p[j].from) return 1;
      if (p[i].to == p[j].to) return 2;
    }
  }
  return 0;
}
}  // namespace prim

template <spec_entry Axes, edge... Pairs, Traced X>
constexpr X ppermute(X x) {
  constexpr int problem = prim::repeated_end<Pairs...>();
  if constexpr (problem != 0) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::ppermute: the pairs (";
      bool first = true;
      for (const edge& e : std::array<edge, sizeof...(Pairs)>{Pairs...}) {
        m << (first ? "" : ", ") << '(' << static_cast<std::int64_t>(e.from) << ", " << static_cast<std::int64_t>(e.to) << ')';
        first = false;
      }
      m << ") " << (problem == 1 ? "repeat a source" : problem == 2 ? "repeat a destination" : "hold a negative position")
        << "; sources and destinations must each be unique positions in the group; fix: send from each device at most once and "
           "to each device at most once";
      return m;
    }>(), X>();
    return x;
  } else {
    ir::graph_builder& g = *x.graph;
    ir::attributes a;
    std::size_t n = prim::collective::bind(g, "tessel::ppermute", Axes, a);
    if (n > prim::ppermute_max_group) {
      g.report_error((message_builder{} << "tessel::ppermute: a group of " << static_cast<std::uint64_t>(n)
                                        << " devices; ppermute runs over groups of at most 13; fix: permute over fewer axes").view());
      n = 1;
    }
    a.push(static_cast<std::int64_t>(n));
    for (std::size_t p = 0; p < n; ++p) a.push(-1);
    for (const edge& e : std::array<edge, sizeof...(Pairs)>{Pairs...}) {
      if (static_cast<std::size_t>(e.from) >= n || static_cast<std::size_t>(e.to) >= n) {
        g.report_error((message_builder{} << "tessel::ppermute: the pair (" << static_cast<std::int64_t>(e.from) << ", "
                                          << static_cast<std::int64_t>(e.to) << ") names a position outside the group of "
                                          << static_cast<std::uint64_t>(n) << " devices; fix: positions go from 0 to "
                                          << static_cast<std::uint64_t>(n - 1)).view());
        continue;
      }
      a.ints[a.count - n + static_cast<std::size_t>(e.to)] = e.from;
    }
    return X{x.graph, ir::make_node(g, prim::ppermute_p, g[x.id].dtype, g[x.id].shape, {x.id}, a)};
  }
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
