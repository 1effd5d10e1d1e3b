#pragma once
// Reverse and forward mode on the traced table: the sweeps behind grad, value_and_grad, vjp and jvp
// (transform/autodiff.hpp adds the rules of control flow, which run these sweeps on the bodies).
//
// They run while a program is traced, on the same graph: a sweep reads the nodes a function emitted and
// emits, through each primitive's VJP or JVP rule, the nodes of the derivative. Forward values that a
// rule needs are referred to by their node ids, so the backward pass reuses them (and the planner keeps
// them alive exactly until their last use); identical derivative nodes merge like any others.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/optimization_barrier.hpp"
#include "tessel/prim/remat.hpp"

namespace tessel::autodiff {

// Calls: nodes whose reverse rule sends cotangents to the function inputs named in their attributes,
// [input count, input ids..., rule-specific...], rather than through their operands (operand 0 is
// the function's result, which is not differentiated): custom_vjp (transform/custom_vjp.hpp) and
// checkpoint (prim/remat.hpp).
constexpr bool is_custom_vjp(const ir::primitive& p) { return p.name == "custom_vjp_call"; }
constexpr bool is_call(const ir::primitive& p) { return &p == &prim::remat_p || is_custom_vjp(p); }
constexpr int call_input_count(const ir::node& n) { return static_cast<int>(n.attr.ints[0]); }
constexpr int call_input(const ir::node& n, int k) { return static_cast<int>(n.attr.ints[static_cast<std::size_t>(1 + k)]); }
// The nodes a call's attributes name are attr.ints[1, call_named_end): its inputs, then a custom_vjp's residuals.
constexpr std::size_t call_named_end(const ir::node& n) {
  return is_custom_vjp(*n.prim) ? n.attr.count : 1 + static_cast<std::size_t>(call_input_count(n));
}

// Control flow: a construct's output depends on its inputs and on what its bodies read from outside,
// through the bodies' results. Its rules run once for all its outputs, and differentiate the bodies with
// these sweeps: the sweeps take them as `Rules` (Rules::pull, Rules::jvp), by default control_rules,
// which transform/autodiff.hpp defines from transform/control_vjp.hpp and transform/control_jvp.hpp.
constexpr bool construct_depends(const ir::graph_builder& g, const ir::node& output, const std::vector<char>& active) {
  const ir::construct_record& c = g.constructs[static_cast<std::size_t>(output.attr.ints[0])];
  for (int in : c.inputs)
    if (static_cast<std::size_t>(in) < active.size() && active[static_cast<std::size_t>(in)]) return true;
  for (int r = c.first_region; r < c.first_region + c.region_count; ++r)
    for (int res : g.regions[static_cast<std::size_t>(r)].results)
      if (static_cast<std::size_t>(res) < active.size() && active[static_cast<std::size_t>(res)]) return true;
  return false;
}

struct control_rules;

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
    if (is_call(*n.prim))
      for (int k = 0; k < call_input_count(n); ++k)
        if (active[static_cast<std::size_t>(call_input(n, k))]) active[i] = true;
    if (n.prim->kind == ir::prim_kind::control && construct_depends(g, n, active)) active[i] = true;
  }
  return active;
}

// A cotangent `ct` that node `target` receives.
struct pulled {
  int target;
  int ct;
};

constexpr std::vector<pulled> pull(ir::graph_builder& g, int id, int ct);

// Reverse mode through a checkpoint node: recompute the function's nodes after `ct` (optimization
// barriers on the values they read from outside, so the copies are new nodes, scheduled late), keeping
// only what the policy saves, and differentiate the copies. Returns the cotangents of the inputs.
constexpr std::vector<pulled> remat_pull(ir::graph_builder& g, int id, int ct) {
  const ir::node call = g[id];
  const int k = call_input_count(call);
  const auto policy = static_cast<prim::remat_policy>(call.attr.ints[static_cast<std::size_t>(1 + k)]);
  const int out = call.operands[0];
  if (policy == prim::remat_policy::everything_saveable) return {pulled{out, ct}};  // the forward nodes, as without checkpoint
  int lo = out;
  for (int j = 0; j < k; ++j) lo = call_input(call, j) < lo ? call_input(call, j) : lo;
  const std::size_t span = static_cast<std::size_t>(out - lo + 1);
  auto at = [lo](int i) { return static_cast<std::size_t>(i - lo); };
  std::vector<char> is_input(span, false), dep(span, false), seg(span, false), saved(span, false);
  for (int j = 0; j < k; ++j) is_input[at(call_input(call, j))] = dep[at(call_input(call, j))] = true;
  for (int i = lo; i <= out; ++i) {
    const ir::node& n = g[i];
    for (std::size_t a = 0; a < n.arity && !dep[at(i)]; ++a) dep[at(i)] = n.operands[a] >= lo && dep[at(n.operands[a])];
  }
  // The function's nodes: on a path from an input to the result.
  std::vector<char> need(span, false);
  need[at(out)] = true;
  for (int i = out; i >= lo; --i) {
    if (!need[at(i)] || !dep[at(i)] || is_input[at(i)]) continue;
    seg[at(i)] = true;
    const ir::node& n = g[i];
    for (std::size_t a = 0; a < n.arity; ++a)
      if (n.operands[a] >= lo) need[at(n.operands[a])] = true;
    if (is_call(*n.prim))  // its inputs, and a custom_vjp's residuals: recomputed too
      for (std::size_t c = 1; c < call_named_end(n); ++c)
        if (n.attr.ints[c] >= lo) need[at(static_cast<int>(n.attr.ints[c]))] = true;
    saved[at(i)] = policy == prim::remat_policy::dots_saveable && n.prim->kind == ir::prim_kind::contraction;
  }
  // The copies. value[i]: what a recomputed node reads for node i; copy[i]: the node whose rule runs.
  std::vector<int> value(span, -1), copy(span, -1), barrier(span, -1);
  // Inside a control-flow body being built (a scan's backward step), an input made before the construct
  // began (a weight the body reads) is a loop invariant: read as it is, not copied each step.
  const int open = g.current_region();
  const int invariant_below =
      open < 0 ? 0 : g.constructs[static_cast<std::size_t>(g.regions[static_cast<std::size_t>(open)].construct)].first_node;
  auto value_of = [&](int o) {
    if (o < lo || (!is_input[at(o)] && !seg[at(o)])) return o;  // a constant of the function
    if (is_input[at(o)] && o < invariant_below) return o;
    if (is_input[at(o)] || saved[at(o)]) {
      if (barrier[at(o)] < 0) barrier[at(o)] = prim::build::optimization_barrier(g, o, ct);
      return barrier[at(o)];
    }
    return value[at(o)];
  };
  for (int i = lo; i <= out; ++i) {
    if (!seg[at(i)]) continue;
    ir::node m = g[i];
    for (std::size_t a = 0; a < m.arity; ++a) m.operands[a] = value_of(m.operands[a]);
    // A custom_vjp's rule reads the nodes its attributes name: the copies, as its operands are, so that
    // its backward work follows the cotangent (JAX's checkpoint recomputes a custom_vjp's residuals).
    if (is_custom_vjp(*m.prim))
      for (std::size_t c = 1; c < call_named_end(m); ++c) m.attr.ints[c] = value_of(static_cast<int>(m.attr.ints[c]));
    copy[at(i)] = g.add(m);
    if (!saved[at(i)]) value[at(i)] = copy[at(i)];
  }
  // The backward pass over the copies; cotangents are kept by forward id.
  std::vector<int> cts(span, -1);
  cts[at(out)] = ct;
  for (int i = out; i >= lo; --i) {
    if (!seg[at(i)] || cts[at(i)] < 0) continue;
    const ir::node n = g[i];
    std::vector<pulled> back;
    if (is_custom_vjp(*n.prim)) {  // through the copy, whose inputs stand for the forward's
      back = pull(g, copy[at(i)], cts[at(i)]);
      for (std::size_t j = 0; j < back.size(); ++j) back[j].target = call_input(n, static_cast<int>(j));
    } else if (is_call(*n.prim)) {
      back = pull(g, i, cts[at(i)]);  // a nested checkpoint reads the forward values its attributes name
    } else {
      const std::vector<pulled> from_copy = pull(g, copy[at(i)], cts[at(i)]);
      for (std::size_t a = 0; a < from_copy.size(); ++a) back.push_back(pulled{n.operands[a], from_copy[a].ct});
    }
    for (const pulled& p : back)
      if (p.ct >= 0 && p.target >= lo && (seg[at(p.target)] || is_input[at(p.target)]))
        cts[at(p.target)] = prim::build::add(g, cts[at(p.target)], p.ct);
  }
  std::vector<pulled> result;  // each input once, though f may take it twice
  for (int j = 0; j < k; ++j) {
    bool repeated = false;
    for (int e = 0; e < j; ++e) repeated = repeated || call_input(call, e) == call_input(call, j);
    if (!repeated) result.push_back(pulled{call_input(call, j), cts[at(call_input(call, j))]});
  }
  return result;
}

// The cotangents node `id` sends back, given its own: to its operands, or to a call's inputs.
constexpr std::vector<pulled> pull(ir::graph_builder& g, int id, int ct) {
  const ir::node n = g[id];  // a copy: rules add nodes, which may move the table
  std::vector<pulled> out;
  if (n.prim == &prim::remat_p) return remat_pull(g, id, ct);
  if (is_custom_vjp(*n.prim)) {
    // The user's rule gives one input's cotangent per call: [k, -2, -1] in, [cotangent, ...] out
    // (its nodes are the same each time, so the repeated calls add nothing to the graph).
    for (int j = 0; j < call_input_count(n); ++j) {
      std::array<int, ir::max_operands> io{j, -2, -1};
      n.prim->vjp(g, id, ct, io);
      out.push_back(pulled{call_input(n, j), io[0]});
    }
    return out;
  }
  if (n.prim->vjp == nullptr) {
    if (n.prim->differentiable && n.arity > 0) g.report_missing(n.prim, "VJP");
    return out;
  }
  std::array<int, ir::max_operands> contributions{-1, -1, -1};
  n.prim->vjp(g, id, ct, contributions);
  for (std::size_t a = 0; a < n.arity; ++a) out.push_back(pulled{n.operands[a], contributions[a]});
  return out;
}

// Inside shard_map, a cotangent that varies along mesh axes its primal does not (an invariant value used by
// device-varying ones, as replicated weights by a sharded batch) is summed over those axes: JAX's implicit
// pvary, whose transpose is psum. Outside shard_map nothing varies and this returns ct.
constexpr ir::attributes collective_axes(std::uint8_t axes) {  // [count, axis...], as collective::bind makes
  ir::attributes a;
  a.push(0);
  for (std::size_t axis = 0; axis < 8; ++axis)
    if (axes & (1u << axis)) {
      a.ints[0] += 1;
      a.push(static_cast<std::int64_t>(axis));
    }
  return a;
}
constexpr int invariant_cotangent(ir::graph_builder& g, int ct, int primal) {
  const auto extra = static_cast<std::uint8_t>(g[ct].varying & ~g[primal].varying);
  if (extra == 0) return ct;
  return ir::make_node(g, prim::psum_p, g[ct].dtype, g[ct].shape, {ct}, collective_axes(extra));
}

// `x` typed as varying along `varying` too (pvary): a scan's carried cotangent or tangent has its primal's
// varying axes, also where what starts it does not vary (zeros, or a psummed loss's cotangent), as JAX's.
constexpr int varying_as(ir::graph_builder& g, int x, std::uint8_t varying) {
  const auto extra = static_cast<std::uint8_t>(varying & ~g[x].varying);
  if (extra == 0) return x;
  return ir::make_node(g, prim::pvary_p, g[x].dtype, g[x].shape, {x}, collective_axes(extra));
}

// Cotangents of `wrt` given cotangents of several nodes (seeds: target node, cotangent); only nodes at or
// above `floor` pass cotangents on (a body's backward pass stops at the values it reads from outside).
template <class Rules = control_rules>
constexpr std::vector<int> reverse(ir::graph_builder& g, const std::vector<pulled>& seeds, const std::vector<int>& wrt, int floor = 0) {
  std::size_t end = 0;
  for (const pulled& s : seeds) end = static_cast<std::size_t>(s.target) + 1 > end ? static_cast<std::size_t>(s.target) + 1 : end;
  for (int w : wrt) end = static_cast<std::size_t>(w) + 1 > end ? static_cast<std::size_t>(w) + 1 : end;
  const std::vector<char> active = active_nodes(g, end, wrt);
  std::vector<int> ct(end, -1);
  std::vector<char> asked(end, 0);
  for (int w : wrt) asked[static_cast<std::size_t>(w)] = 1;
  for (const pulled& s : seeds)
    if (s.ct >= 0) ct[static_cast<std::size_t>(s.target)] = prim::build::add(g, ct[static_cast<std::size_t>(s.target)], s.ct);
  for (std::size_t i = end; i-- > static_cast<std::size_t>(floor);) {
    const bool control = g[static_cast<int>(i)].prim->kind == ir::prim_kind::control;
    if ((ct[i] < 0 && !control) || !active[i]) continue;
    // Named, not a range over `control ? a() : b()`: GCC 12 frees that temporary too early in constant evaluation.
    std::vector<pulled> back;
    if (control) back = Rules::pull(g, static_cast<int>(i), ct, active);
    else back = pull(g, static_cast<int>(i), ct[i]);
    for (const pulled& p : back) {
      const auto target = static_cast<std::size_t>(p.target);
      if (p.ct < 0 || !active[target]) continue;
      // An invariant broadcast (a replicated bias spread over a sharded batch) passes its varying cotangent
      // on to its transpose, a reduce_sum, and the psum comes after it, on the operand's smaller shape
      // (psum is linear: the same sum, fewer bytes over the wire).
      const bool defer = g[p.target].prim == &prim::broadcast_in_dim_p && p.target >= floor && !asked[target];
      ct[target] = prim::build::add(g, ct[target], defer ? p.ct : invariant_cotangent(g, p.ct, p.target));
    }
  }
  std::vector<int> result;
  for (int w : wrt) result.push_back(ct[static_cast<std::size_t>(w)]);
  return result;
}

// Cotangents of `wrt` given the cotangent `seed` of node `out` (-1 entries: no dependence, zero).
template <class Rules = control_rules>
constexpr std::vector<int> reverse(ir::graph_builder& g, int out, int seed, const std::vector<int>& wrt) {
  return reverse<Rules>(g, std::vector<pulled>{pulled{out, seed}}, wrt);
}

// Tangents by node id over [from, to), set in `t` (-1: zero): the one forward sweep (forward below, and a
// construct's copied bodies, transform/region_copy.hpp).
template <class Rules = control_rules>
constexpr void sweep(ir::graph_builder& g, int from, int to, std::vector<int>& t) {
  if (t.size() < static_cast<std::size_t>(to)) t.resize(static_cast<std::size_t>(to), -1);
  for (int i = from; i < to; ++i) {
    const ir::node n = g[i];
    if (n.prim->kind == ir::prim_kind::control) {
      Rules::jvp(g, i, t);
      continue;
    }
    if (t[static_cast<std::size_t>(i)] >= 0 || n.arity == 0) continue;
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
    t[static_cast<std::size_t>(i)] = n.prim->jvp(g, i, in);
  }
}

// The tangent of node `out` given tangents of the `wrt` nodes (-1: zero).
template <class Rules = control_rules>
constexpr int forward(ir::graph_builder& g, int out, const std::vector<int>& wrt, const std::vector<int>& tangents) {
  std::vector<int> t(static_cast<std::size_t>(out) + 1, -1);
  for (std::size_t k = 0; k < wrt.size(); ++k) t[static_cast<std::size_t>(wrt[k])] = tangents[k];
  sweep<Rules>(g, 0, out + 1, t);
  return t[static_cast<std::size_t>(out)];
}

}  // namespace tessel::autodiff
