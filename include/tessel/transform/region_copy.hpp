#pragma once
// What autodiff's control-flow rules do to a construct's region: its nodes (by the one region rule,
// ir/region.hpp), the values from outside it that carry derivatives (its closures), and copies of it on
// new parameters, with tangents (copy_with_tangents) or without (copy_region). The backward and forward
// bodies of a scan or a switch are built from such copies (transform/scan_vjp.hpp, switch_vjp.hpp,
// control_jvp.hpp).

#include <array>
#include <cstddef>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/ir/region.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/control.hpp"
#include "tessel/transform/sweeps.hpp"

namespace tessel::autodiff::control_detail {

// The nodes of region r among ids [lo, hi): its parameters, everything that depends on them, and the
// nodes of constructs nested in it, as the planner assigns regions (ir/region.hpp).
struct region_nodes {
  int lo = 0, hi = 0;
  std::vector<char> member;  // by id - lo
  std::vector<int> where;    // by id - lo: the innermost region a node is in (-1: outside every region)
  constexpr bool in(int id) const { return id >= lo && id < hi && member[static_cast<std::size_t>(id - lo)]; }
};

constexpr region_nodes members_of(const ir::graph_builder& g, int r, int hi) {
  region_nodes m;
  m.lo = g.constructs[static_cast<std::size_t>(ir::region_construct(g, r))].first_node;
  m.hi = hi;
  m.where.assign(static_cast<std::size_t>(hi - m.lo), -1);
  ir::assign_regions(g, m.lo, hi, m.where);
  m.member.assign(static_cast<std::size_t>(hi - m.lo), false);
  for (std::size_t k = 0; k < m.where.size(); ++k) m.member[k] = ir::region_inside(g, m.where[k], r);
  return m;
}

// The floating values from outside that region r (or a construct in it) reads or returns, and that the
// differentiation sees.
constexpr void add_closures(const ir::graph_builder& g, int r, const region_nodes& m, const std::vector<char>& active, std::vector<int>& out) {
  auto consider = [&](int id) {
    if (id < 0 || m.in(id) || static_cast<std::size_t>(id) >= active.size() || !active[static_cast<std::size_t>(id)]) return;
    if (!ir::is_floating(g[id].dtype)) return;
    for (int c : out)
      if (c == id) return;
    out.push_back(id);
  };
  for (int i = m.lo; i < m.hi; ++i) {
    if (!m.in(i)) continue;
    const ir::node& n = g[i];
    for (std::size_t a = 0; a < n.arity; ++a) consider(n.operands[a]);
    if (is_call(*n.prim))  // checkpoint, custom_vjp: their reverse rules send cotangents to the inputs they name
      for (int k = 0; k < call_input_count(n); ++k) consider(call_input(n, k));
    if (n.prim->kind == ir::prim_kind::control && n.attr.ints[1] == 0) {  // a nested construct's inputs and results
      const ir::construct_record& c = g.constructs[static_cast<std::size_t>(n.attr.ints[0])];
      for (int in : c.inputs) consider(in);
      for (int q = c.first_region; q < c.first_region + c.region_count; ++q)
        for (int res : g.regions[static_cast<std::size_t>(q)].results) consider(res);
    }
  }
  for (int res : g.regions[static_cast<std::size_t>(r)].results) consider(res);
}

// Copies region r's nodes, reading `params[k]` for its parameter k, constructs nested in it included (as
// new constructs with new regions); returns the map from old ids (by id - lo). `preset` (old id, new id)
// pairs, ids in [lo, hi) that are not copied, stand for values given from elsewhere.
struct substitute {
  int from, to;
};
constexpr std::vector<int> copy_region(ir::graph_builder& g, int r, const region_nodes& m, const std::vector<int>& params,
                                       const std::vector<substitute>& preset = {}) {
  std::vector<int> map(static_cast<std::size_t>(m.hi - m.lo), -1);
  auto at = [&](int id) -> int& { return map[static_cast<std::size_t>(id - m.lo)]; };
  auto mapped_id = [&](int id) { return id >= m.lo && id < m.hi && at(id) >= 0 ? at(id) : id; };
  for (const substitute& s : preset) at(s.from) = s.to;
  const std::vector<int> old_params = g.regions[static_cast<std::size_t>(r)].params;
  for (std::size_t k = 0; k < old_params.size() && k < params.size(); ++k) at(old_params[k]) = params[k];
  std::vector<int> region_map(g.regions.size(), -1), construct_map(g.constructs.size(), -1);
  // A nested construct's copy: its record, its regions (contiguous) and their parameters, made at once.
  auto copy_construct = [&](int c) {
    if (construct_map[static_cast<std::size_t>(c)] >= 0) return construct_map[static_cast<std::size_t>(c)];
    const ir::construct_record old = g.constructs[static_cast<std::size_t>(c)];
    ir::construct_record fresh;
    fresh.kind = old.kind;
    fresh.reverse = old.reverse;
    fresh.length = old.length;
    fresh.carries = old.carries;
    fresh.parent = old.parent == r ? g.current_region() : region_map[static_cast<std::size_t>(old.parent)];
    fresh.first_node = static_cast<int>(g.size());
    fresh.first_region = static_cast<int>(g.regions.size());
    fresh.region_count = old.region_count;
    g.constructs.push_back(fresh);
    const int copy = static_cast<int>(g.constructs.size() - 1);
    construct_map[static_cast<std::size_t>(c)] = copy;
    for (int q = old.first_region; q < old.first_region + old.region_count; ++q) {
      ir::region_record reg;
      reg.construct = copy;
      g.regions.push_back(reg);
      region_map[static_cast<std::size_t>(q)] = static_cast<int>(g.regions.size() - 1);
    }
    for (int q = old.first_region; q < old.first_region + old.region_count; ++q) {
      const std::vector<int> ps = g.regions[static_cast<std::size_t>(q)].params;
      for (int p : ps)
        at(p) = prim::control::region_parameter(g, region_map[static_cast<std::size_t>(q)], g[p].dtype, g[p].shape, g[p].varying);
    }
    return copy;
  };
  for (int i = m.lo; i < m.hi; ++i) {
    if (!m.in(i) || at(i) >= 0) continue;
    ir::node n = g[i];
    if (n.prim->kind == ir::prim_kind::region_parameter) {
      copy_construct(g.regions[static_cast<std::size_t>(n.attr.ints[0])].construct);
      continue;
    }
    if (n.prim->kind == ir::prim_kind::control) {
      const int c = static_cast<int>(n.attr.ints[0]);
      const int copy = copy_construct(c);
      const ir::construct_record old = g.constructs[static_cast<std::size_t>(c)];
      std::vector<int> inputs;
      for (int in : old.inputs) inputs.push_back(mapped_id(in));
      g.constructs[static_cast<std::size_t>(copy)].inputs = inputs;
      g.constructs[static_cast<std::size_t>(copy)].index = old.index >= 0 ? mapped_id(old.index) : -1;
      for (int q = old.first_region; q < old.first_region + old.region_count; ++q) {
        std::vector<int> results;
        for (int res : g.regions[static_cast<std::size_t>(q)].results) results.push_back(mapped_id(res));
        g.regions[static_cast<std::size_t>(region_map[static_cast<std::size_t>(q)])].results = results;
      }
      g.constructs[static_cast<std::size_t>(copy)].residuals = old.residuals;
      for (int o : old.outputs) {
        const int fresh = prim::control::output(g, copy, g[o].dtype, g[o].shape);
        if (m.in(o)) at(o) = fresh;
      }
      continue;
    }
    for (std::size_t a = 0; a < n.arity; ++a) n.operands[a] = mapped_id(n.operands[a]);
    if (n.prim == &prim::optimization_barrier_p) n.attr.ints[0] = mapped_id(static_cast<int>(n.attr.ints[0]));  // the node it follows
    if (is_call(*n.prim))  // checkpoint, custom_vjp: the inputs (and residuals) its attributes name
      for (std::size_t k = 1; k < call_named_end(n); ++k) n.attr.ints[k] = mapped_id(static_cast<int>(n.attr.ints[k]));
    at(i) = g.add(n);
  }
  return map;
}

constexpr int mapped(const region_nodes& m, const std::vector<int>& map, int id) {
  return id >= m.lo && id < m.hi && map[static_cast<std::size_t>(id - m.lo)] >= 0 ? map[static_cast<std::size_t>(id - m.lo)] : id;
}

constexpr int or_zeros(ir::graph_builder& g, int ct, int like) { return ct >= 0 ? ct : prim::build::zeros_like(g, like); }

constexpr int tangent_of(const std::vector<int>& t, int id) {
  return id >= 0 && static_cast<std::size_t>(id) < t.size() ? t[static_cast<std::size_t>(id)] : -1;
}

// Region r's body copied on `params`, with tangents `param_tangents` for them (-1: none) and the outer
// tangents `t` for what it reads from outside; returns the copy's map and the tangents by id.
struct tangent_copy {
  region_nodes m;
  std::vector<int> map;
  std::vector<int> t;
  constexpr int value(int id) const { return mapped(m, map, id); }
  constexpr int tangent(int id) const { return tangent_of(t, value(id)); }
};
template <class Rules>
constexpr tangent_copy copy_with_tangents(ir::graph_builder& g, int r, int hi, const std::vector<int>& params,
                                          const std::vector<int>& param_tangents, const std::vector<int>& t) {
  tangent_copy out;
  out.m = members_of(g, r, hi);
  const int from = static_cast<int>(g.size());
  out.map = copy_region(g, r, out.m, params);
  const int to = static_cast<int>(g.size());
  out.t = t;
  out.t.resize(static_cast<std::size_t>(to), -1);
  for (std::size_t k = 0; k < params.size(); ++k) out.t[static_cast<std::size_t>(params[k])] = param_tangents[k];
  sweep<Rules>(g, from, to, out.t);
  return out;
}

}  // namespace tessel::autodiff::control_detail
