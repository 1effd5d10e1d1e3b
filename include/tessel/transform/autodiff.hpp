#pragma once
// Reverse and forward mode on the traced table: the sweeps behind grad, value_and_grad, vjp and jvp.
//
// They run while a program is traced, on the same graph: a sweep reads the nodes a function emitted and
// emits, through each primitive's VJP or JVP rule, the nodes of the derivative. Forward values that a
// rule needs are referred to by their node ids, so the backward pass reuses them (and the planner keeps
// them alive exactly until their last use); identical derivative nodes merge like any others.

#include <array>
#include <cstddef>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/prim/build.hpp"

namespace tessel::autodiff {

// Which nodes depend on the `wrt` nodes (only those carry derivatives).
// vector<char>, not vector<bool>: clang 16 cannot evaluate libstdc++ 12's vector<bool> in constant expressions.
constexpr std::vector<char> active_nodes(const ir::graph_builder& g, std::size_t end, const std::vector<int>& wrt) {
  std::vector<char> active(end, false);
  for (int w : wrt) active[static_cast<std::size_t>(w)] = true;
  for (std::size_t i = 0; i < end; ++i) {
    if (active[i]) continue;
    const ir::node& n = g[static_cast<int>(i)];
    for (std::size_t a = 0; a < n.arity; ++a)
      if (active[static_cast<std::size_t>(n.operands[a])]) active[i] = true;
  }
  return active;
}

// Cotangents of `wrt` given the cotangent `seed` of node `out` (-1 entries: no dependence, zero).
constexpr std::vector<int> reverse(ir::graph_builder& g, int out, int seed, const std::vector<int>& wrt) {
  const std::size_t end = static_cast<std::size_t>(out) + 1;
  const std::vector<char> active = active_nodes(g, end, wrt);
  std::vector<int> ct(end, -1);
  ct[static_cast<std::size_t>(out)] = seed;
  for (std::size_t i = end; i-- > 0;) {
    if (ct[i] < 0 || !active[i]) continue;
    const ir::node n = g[static_cast<int>(i)];  // a copy: rules add nodes, which may move the table
    if (n.prim->vjp == nullptr) {
      if (n.prim->differentiable && n.arity > 0) g.report_missing(n.prim, "VJP");
      continue;
    }
    std::array<int, ir::max_operands> contributions{-1, -1, -1};
    n.prim->vjp(g, static_cast<int>(i), ct[i], contributions);
    for (std::size_t a = 0; a < n.arity; ++a) {
      const auto operand = static_cast<std::size_t>(n.operands[a]);
      if (contributions[a] < 0 || !active[operand]) continue;
      ct[operand] = prim::build::add(g, ct[operand], contributions[a]);
    }
  }
  std::vector<int> result;
  for (int w : wrt) result.push_back(ct[static_cast<std::size_t>(w)]);
  return result;
}

// The tangent of node `out` given tangents of the `wrt` nodes (-1: zero).
constexpr int forward(ir::graph_builder& g, int out, const std::vector<int>& wrt, const std::vector<int>& tangents) {
  const std::size_t end = static_cast<std::size_t>(out) + 1;
  std::vector<int> t(end, -1);
  for (std::size_t k = 0; k < wrt.size(); ++k) t[static_cast<std::size_t>(wrt[k])] = tangents[k];
  for (std::size_t i = 0; i < end; ++i) {
    const ir::node n = g[static_cast<int>(i)];
    if (t[i] >= 0 || n.arity == 0) continue;
    std::array<int, ir::max_operands> in{-1, -1, -1};
    bool any = false;
    for (std::size_t a = 0; a < n.arity; ++a) {
      in[a] = t[static_cast<std::size_t>(n.operands[a])];
      any = any || in[a] >= 0;
    }
    if (!any) continue;
    if (n.prim->jvp == nullptr) {
      if (n.prim->differentiable) g.report_missing(n.prim, "JVP");
      continue;
    }
    t[i] = n.prim->jvp(g, static_cast<int>(i), in);
  }
  return t[static_cast<std::size_t>(out)];
}

}  // namespace tessel::autodiff
