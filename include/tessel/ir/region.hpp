#pragma once
// Which region of a program each node is in: the one rule that the planner (plan/plan.hpp), vmap's
// control rules (transform/control_batching.hpp), autodiff's (transform/region_copy.hpp) and the
// StableHLO writer (ir/stablehlo-inl.hpp) apply, on a program being traced (graph_builder), frozen
// (program) or seen through pointers (program_view). A region parameter is in its region, a construct's
// output in the region the construct runs in, and any other node in the innermost region among its
// operands' (-1: the program itself). Regions nest: a region's parent is the region its construct runs in.

#include <cstddef>

#include "tessel/ir/graph.hpp"
#include "tessel/ir/program.hpp"

namespace tessel::ir {

// The region construct c runs in, and the construct that region q belongs to: the two links of the tree.
constexpr int construct_parent(const graph_builder& g, int c) { return g.constructs[static_cast<std::size_t>(c)].parent; }
constexpr int region_construct(const graph_builder& g, int q) { return g.regions[static_cast<std::size_t>(q)].construct; }
template <std::size_t N, std::size_t O>
constexpr int construct_parent(const program<N, O>& p, int c) {
  return p.construct(c).parent;
}
template <std::size_t N, std::size_t O>
constexpr int region_construct(const program<N, O>& p, int q) {
  return p.region(q).construct;
}
inline int construct_parent(const program_view& p, int c) { return p.construct(c).parent; }
inline int region_construct(const program_view& p, int q) { return p.region(q).construct; }
constexpr const node& node_at(const graph_builder& g, int id) { return g[id]; }
inline const node& node_at(const program_view& p, int id) { return p[id]; }
template <std::size_t N, std::size_t O>
constexpr const node& node_at(const program<N, O>& p, int id) {
  return p.nodes[static_cast<std::size_t>(id)];
}

template <class Graph>
constexpr int parent_region(const Graph& g, int q) {
  return construct_parent(g, region_construct(g, q));
}

// Regions from the program (0) down to q.
template <class Graph>
constexpr int region_depth(const Graph& g, int q) {
  int d = 0;
  for (; q >= 0; q = parent_region(g, q)) ++d;
  return d;
}

// Is region q region r or inside it? (-1, the program, holds every region.)
template <class Graph>
constexpr bool region_inside(const Graph& g, int q, int r) {
  for (; q >= 0; q = parent_region(g, q))
    if (q == r) return true;
  return r < 0;
}

// The region of each node of ids [lo, hi), written to region[id - lo]; an operand below lo is outside
// every region (a value the nodes read from the program).
template <class Graph, class Regions>
constexpr void assign_regions(const Graph& g, int lo, int hi, Regions& region) {
  for (int i = lo; i < hi; ++i) {
    const node& n = node_at(g, i);
    int q = -1;
    if (n.prim->kind == prim_kind::region_parameter) q = static_cast<int>(n.attr.ints[0]);
    else if (n.prim->kind == prim_kind::control) q = construct_parent(g, static_cast<int>(n.attr.ints[0]));
    else
      for (std::size_t a = 0; a < n.arity; ++a) {
        const int o = n.operands[a] >= lo ? region[static_cast<std::size_t>(n.operands[a] - lo)] : -1;
        if (region_depth(g, o) > region_depth(g, q)) q = o;
      }
    region[static_cast<std::size_t>(i - lo)] = q;
  }
}

}  // namespace tessel::ir
