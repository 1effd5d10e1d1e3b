#pragma once
// Reverse mode through control flow (scan, switch): the rules autodiff.hpp declares for constructs.
//
// scan: the backward pass is one more scan, run the other way (backprop through time), over residuals the
// forward scan saved. The backward body is built as the forward body copied on a step's carry and x and
// differentiated; the forward values its VJP nodes read are the residuals: each becomes an extra stacked
// y of the forward scan (so the forward scan still runs once, and computes the body once), and the VJP
// nodes are emitted again reading them (the copy is left dead: the planner makes no kernels for it).
// Only what the VJP reads is stacked (a tanh's output, a matmul's other operand), plus every carry a
// step starts with; values that do not depend on the carry or x (closures: weights, their broadcasts)
// are read directly, xs are sliced from the xs, and a residual that is already a y is that y. So the
// body is computed once and memory is the residuals of every step. A value made by a nested construct's
// own backward pass (the residuals of an inner scan) is not stacked: the inner forward scan then runs
// again in the outer backward step. The backward scan's carries are the carries' cotangents and a
// running sum of the cotangents of each closure; xs are the residuals, the xs and the ys' cotangents;
// ys are the xs' cotangents.
// Under checkpoint (transform/remat.hpp) the body holds a checkpoint node, whose reverse rule recomputes
// the checkpointed function from its arguments (autodiff.hpp, remat_pull): the VJP then reads only the
// arguments (the carries, x; closures directly, not copied per step), or under dots_saveable also the
// contraction results, so only those are stacked and the rest is recomputed in each backward step
// (everything_saveable is the default). JAX's scan of a jax.checkpoint-ed body does the same.
// switch: the backward pass is a switch on the same index whose branch b is branch b's VJP (re-traced on
// the operands), returning the operands' cotangents and those of every closure of any branch (zero
// where a branch does not read it). Bodies holding constructs of their own are copied with them.
// Forward mode (jvp): a scan carrying (carry, tangent) over (x, tangent) whose body is the body and its
// JVP (the primal scan runs as well); a switch whose branches return their outputs' tangents.

#include <array>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/control.hpp"
#include "tessel/transform/autodiff.hpp"

namespace tessel::autodiff {

constexpr bool construct_depends(const ir::graph_builder& g, const ir::node& output, const std::vector<char>& active) {
  const ir::construct_record& c = g.constructs[static_cast<std::size_t>(output.attr.ints[0])];
  for (int in : c.inputs)
    if (static_cast<std::size_t>(in) < active.size() && active[static_cast<std::size_t>(in)]) return true;
  for (int r = c.first_region; r < c.first_region + c.region_count; ++r)
    for (int res : g.regions[static_cast<std::size_t>(r)].results)
      if (static_cast<std::size_t>(res) < active.size() && active[static_cast<std::size_t>(res)]) return true;
  return false;
}


namespace control_detail {

// The nodes of region r among ids [lo, hi): its parameters, everything that depends on them, and the
// nodes of constructs nested in it (as the planner assigns regions: a node is in the innermost region
// among its operands', a region parameter in its region, a construct's output in the construct's parent).
struct region_nodes {
  int lo = 0, hi = 0;
  std::vector<char> member;  // by id - lo
  std::vector<int> where;    // by id - lo: the innermost region a node is in (-1: outside every region)
  constexpr bool in(int id) const { return id >= lo && id < hi && member[static_cast<std::size_t>(id - lo)]; }
};

constexpr int parent_region(const ir::graph_builder& g, int q) {
  return g.constructs[static_cast<std::size_t>(g.regions[static_cast<std::size_t>(q)].construct)].parent;
}
constexpr int depth_of(const ir::graph_builder& g, int q) {
  int d = 0;
  for (; q >= 0; q = parent_region(g, q)) ++d;
  return d;
}
constexpr bool inside(const ir::graph_builder& g, int q, int r) {
  for (; q >= 0; q = parent_region(g, q))
    if (q == r) return true;
  return false;
}

constexpr region_nodes members_of(const ir::graph_builder& g, int r, int hi) {
  region_nodes m;
  m.lo = g.constructs[static_cast<std::size_t>(g.regions[static_cast<std::size_t>(r)].construct)].first_node;
  m.hi = hi;
  m.member.assign(static_cast<std::size_t>(hi - m.lo), false);
  std::vector<int> region(static_cast<std::size_t>(hi - m.lo), -1);
  for (int i = m.lo; i < hi; ++i) {
    const ir::node& n = g[i];
    int q = -1;
    if (n.prim->kind == ir::prim_kind::region_parameter) q = static_cast<int>(n.attr.ints[0]);
    else if (n.prim->kind == ir::prim_kind::control) q = g.constructs[static_cast<std::size_t>(n.attr.ints[0])].parent;
    else
      for (std::size_t a = 0; a < n.arity; ++a) {
        const int o = n.operands[a] >= m.lo ? region[static_cast<std::size_t>(n.operands[a] - m.lo)] : -1;
        if (depth_of(g, o) > depth_of(g, q)) q = o;
      }
    region[static_cast<std::size_t>(i - m.lo)] = q;
    m.member[static_cast<std::size_t>(i - m.lo)] = inside(g, q, r);
  }
  m.where = region;
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

constexpr std::vector<pulled> scan_pull(ir::graph_builder& g, int c, const std::vector<int>& ocs, const std::vector<char>& active) {
  using namespace prim;
  const int r = g.constructs[static_cast<std::size_t>(c)].first_region;
  const region_nodes m = members_of(g, r, g.constructs[static_cast<std::size_t>(c)].outputs[0]);
  std::vector<int> closures;
  add_closures(g, r, m, active, closures);
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  const ir::region_record fr = g.regions[static_cast<std::size_t>(r)];
  const int nc = fc.carries;
  const int nx = static_cast<int>(fc.inputs.size()) - nc;
  const int ny = static_cast<int>(ocs.size()) - nc;  // every y so far (residuals of earlier pulls included)
  auto floating = [&](int id) { return ir::is_floating(g[id].dtype); };

  // The backward scan. Its parameters are made first (carries' cotangents, each step's starting carries
  // and xs, ys' cotangents, each varying along the mesh axes of the value it will read: its inputs are
  // listed at the end), the forward body is copied on them and differentiated; then the residuals
  // (the forward values the VJP nodes read) become stacked ys of the forward scan, and the VJP nodes are
  // emitted again reading them, so the copy is left dead. Then each closure gets a running-sum carry, or,
  // when its per-step cotangent is a contraction of two per-step values smaller than the result (h^T ct
  // for a weight: a rank-1 update), the two values are stacked as ys and contracted once over the steps
  // after the loop (one GEMM instead of L rank-1 updates).
  const int b = control::new_construct(g, ir::construct_kind::scan);
  const int rb = control::open_region(g, b);
  const int floor = static_cast<int>(g.size());
  std::vector<int> carry_ct, res, xs, y_ct, y_index;
  std::vector<int> carry_inputs, y_ct_inputs;
  for (int k = 0; k < nc; ++k) {
    const int p = fr.params[static_cast<std::size_t>(k)];
    if (!floating(p)) continue;
    const int out = fc.outputs[static_cast<std::size_t>(k)];
    carry_ct.push_back(control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[out].varying));
    carry_inputs.push_back(varying_as(g, or_zeros(g, ocs[static_cast<std::size_t>(k)], out), g[out].varying));
  }
  for (int k = 0; k < nc; ++k) {
    const int p = fr.params[static_cast<std::size_t>(k)];
    res.push_back(control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying));
  }
  for (int j = 0; j < nx; ++j) {
    const int p = fr.params[static_cast<std::size_t>(nc + j)];
    xs.push_back(control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying));
  }
  for (int y = 0; y < ny; ++y) {
    const int out = fc.outputs[static_cast<std::size_t>(nc + y)];
    if (ocs[static_cast<std::size_t>(nc + y)] < 0 || !floating(out)) continue;
    y_index.push_back(y);
    const int ct = ocs[static_cast<std::size_t>(nc + y)];
    y_ct.push_back(control::region_parameter(g, rb, g[out].dtype, control::unstacked(g[out].shape), g[ct].varying));
    y_ct_inputs.push_back(ocs[static_cast<std::size_t>(nc + y)]);
  }
  // The forward body again, on this step's carry and x, and its VJP.
  std::vector<int> fwd_params = res;
  fwd_params.insert(fwd_params.end(), xs.begin(), xs.end());
  const int copy_lo = static_cast<int>(g.size());
  const std::vector<int> map = copy_region(g, r, m, fwd_params);
  const int copy_hi = static_cast<int>(g.size());
  std::vector<pulled> seeds;
  {
    std::size_t next = 0;
    for (int k = 0; k < nc; ++k)
      if (floating(fr.params[static_cast<std::size_t>(k)]))
        seeds.push_back(pulled{mapped(m, map, fr.results[static_cast<std::size_t>(k)]), carry_ct[next++]});
    for (std::size_t i = 0; i < y_index.size(); ++i)
      seeds.push_back(pulled{mapped(m, map, fr.results[static_cast<std::size_t>(nc + y_index[i])]), y_ct[i]});
  }
  std::vector<int> wrt;
  for (int k = 0; k < nc; ++k)
    if (floating(res[static_cast<std::size_t>(k)])) wrt.push_back(res[static_cast<std::size_t>(k)]);
  for (int j = 0; j < nx; ++j)
    if (floating(xs[static_cast<std::size_t>(j)])) wrt.push_back(xs[static_cast<std::size_t>(j)]);
  wrt.insert(wrt.end(), closures.begin(), closures.end());
  std::vector<int> cts = reverse(g, seeds, wrt, floor);
  const int vjp_hi = static_cast<int>(g.size());

  // Residuals: the step values (starting carries, values of the copied body) that the VJP reads. A copied
  // value stands for the forward body's node it copies (its counterpart in region r itself); a value with
  // none (an output a nested construct's own backward pass added to the copy) stays, and is recomputed
  // with what it needs. Under checkpoint the VJP recomputes the body from the checkpoint's arguments, so
  // only those are read (remat_pull): the carries, and the contractions under dots_saveable.
  std::vector<int> counterpart(static_cast<std::size_t>(vjp_hi - floor), -1);  // by id - floor
  for (int i = m.lo; i < m.hi; ++i) {
    const int copy = mapped(m, map, i);
    if (m.in(i) && m.where[static_cast<std::size_t>(i - m.lo)] == r && copy >= copy_lo && copy < copy_hi)
      counterpart[static_cast<std::size_t>(copy - floor)] = i;
  }
  std::vector<char> referenced(static_cast<std::size_t>(vjp_hi - floor), false);
  auto reference = [&](int id) {
    if (id >= floor && id < vjp_hi && counterpart[static_cast<std::size_t>(id - floor)] >= 0) referenced[static_cast<std::size_t>(id - floor)] = true;
  };
  for (int i = copy_hi; i < vjp_hi; ++i) {
    const ir::node& n = g[i];
    for (std::size_t a = 0; a < n.arity; ++a) reference(n.operands[a]);
    if (is_call(*n.prim))
      for (int k = 0; k < call_input_count(n); ++k) reference(call_input(n, k));
    if (n.prim->kind == ir::prim_kind::control && n.attr.ints[1] == 0) {
      const ir::construct_record& nested = g.constructs[static_cast<std::size_t>(n.attr.ints[0])];
      for (int in : nested.inputs) reference(in);
      if (nested.index >= 0) reference(nested.index);
      for (int q = nested.first_region; q < nested.first_region + nested.region_count; ++q)
        for (int v : g.regions[static_cast<std::size_t>(q)].results) reference(v);
    }
  }
  for (int ct : cts) reference(ct);
  // Each residual: a parameter of the backward body reading the forward scan's stacked y of it.
  // The starting carries are always stacked (their parameters res[k] stay: a dead one in a body would be
  // a parameter that no list names); then every copied value the VJP reads.
  std::vector<int> residual_params = res, residual_of(fr.params.begin(), fr.params.begin() + nc);  // residual_of: the forward node
  std::vector<substitute> preset;
  for (int i = floor; i < vjp_hi; ++i) {
    if (!referenced[static_cast<std::size_t>(i - floor)]) continue;
    const int f = counterpart[static_cast<std::size_t>(i - floor)];
    const int p = control::region_parameter(g, rb, g[f].dtype, g[f].shape, g[f].varying);
    residual_params.push_back(p);
    residual_of.push_back(f);
    preset.push_back(substitute{i, p});
  }
  // The VJP nodes again, reading the residual parameters (constructs nested in them copied as well).
  {
    const region_nodes in_rb = members_of(g, rb, vjp_hi);
    region_nodes vjp;
    vjp.lo = floor;
    vjp.hi = vjp_hi;
    vjp.member.assign(static_cast<std::size_t>(vjp_hi - floor), false);
    vjp.where.assign(static_cast<std::size_t>(vjp_hi - floor), -1);
    for (int i = copy_hi; i < vjp_hi; ++i) {
      // Outputs a nested backward pass added to a copied construct are that construct's: not emitted again.
      const ir::node& n = g[i];
      const bool late_output = n.prim->kind == ir::prim_kind::control && g.constructs[static_cast<std::size_t>(n.attr.ints[0])].first_node < copy_hi;
      vjp.member[static_cast<std::size_t>(i - floor)] = in_rb.in(i) && !late_output;
    }
    const std::vector<int> again = copy_region(g, rb, vjp, {}, preset);
    for (int& ct : cts)
      if (ct >= 0) ct = mapped(vjp, again, ct);
  }
  std::vector<int> x_params, x_inputs;
  for (std::size_t i = 0; i < residual_params.size(); ++i) {
    const int f = residual_of[i];
    ir::region_record& reg = g.regions[static_cast<std::size_t>(r)];
    int o = -1;
    for (std::size_t y = static_cast<std::size_t>(nc); y < reg.results.size() && o < 0; ++y)
      if (reg.results[y] == f) o = static_cast<int>(y);  // already stacked: a y, or a residual of an earlier pull
    if (o < 0) {
      if (g.constructs[static_cast<std::size_t>(c)].residuals < 0)
        g.constructs[static_cast<std::size_t>(c)].residuals = static_cast<int>(reg.results.size());
      o = static_cast<int>(reg.results.size());
      reg.results.push_back(f);
      control::output(g, c, g[f].dtype, control::stacked(static_cast<std::size_t>(fc.length), g[f].shape));
    }
    x_params.push_back(residual_params[i]);
    x_inputs.push_back(g.constructs[static_cast<std::size_t>(c)].outputs[static_cast<std::size_t>(o)]);
  }
  for (int j = 0; j < nx; ++j) {
    x_params.push_back(xs[static_cast<std::size_t>(j)]);
    x_inputs.push_back(fc.inputs[static_cast<std::size_t>(nc + j)]);
  }
  x_params.insert(x_params.end(), y_ct.begin(), y_ct.end());
  x_inputs.insert(x_inputs.end(), y_ct_inputs.begin(), y_ct_inputs.end());

  // A cotangent psummed in every step (an invariant x or closure read by device-varying values inside
  // shard_map) is psummed once after the loop instead: psum is linear, so the psum of the steps' sum (or
  // of the stacked steps) is the sum (the stack) of their psums, and one collective replaces one a step.
  // psum_after(ct) keeps the psum's operand in the loop and returns the psum's axes (count 0: none).
  auto psum_after = [&](int& ct) {
    ir::attributes axes;
    axes.push(0);
    if (ct >= 0 && g[ct].prim == &psum_p) {
      axes = g[ct].attr;
      ct = g[ct].operands[0];
    }
    return axes;
  };
  auto with_psum = [&](int id, const ir::attributes& axes) {
    return axes.ints[0] == 0 ? id : build::make(g, psum_p, g[id].dtype, g[id].shape, {id}, axes);
  };
  std::vector<int> carry_results, x_results;
  std::vector<ir::attributes> x_psums;  // by x, in order
  std::size_t w = 0;
  for (int k = 0; k < nc; ++k)
    if (floating(res[static_cast<std::size_t>(k)])) {
      carry_results.push_back(or_zeros(g, cts[w], res[static_cast<std::size_t>(k)]));
      ++w;
    }
  for (int j = 0; j < nx; ++j)
    if (floating(xs[static_cast<std::size_t>(j)])) {
      x_psums.push_back(psum_after(cts[w]));
      x_results.push_back(or_zeros(g, cts[w++], xs[static_cast<std::size_t>(j)]));
    }
  // The closures' cotangents: a running sum, or a contraction hoisted out of the loop.
  const region_nodes body = members_of(g, rb, static_cast<int>(g.size()));
  struct hoisted {
    int closure;
    int lhs, rhs;  // stacked operands: an input of the backward scan, or an output (index into x_results)
    bool lhs_out, rhs_out;
    build::dot_dims dims;
    ir::attributes psum;
  };
  std::vector<hoisted> hoists;
  std::vector<int> acc_closures, acc_params, acc_results;
  std::vector<ir::attributes> acc_psums;
  auto stacked_operand = [&](int id, int& at, bool& is_output) {
    while (g[id].prim == &optimization_barrier_p && body.in(g[id].operands[0])) id = g[id].operands[0];  // the same value
    for (std::size_t i = 0; i < x_params.size(); ++i)
      if (x_params[i] == id) {  // already stacked: the input itself
        at = x_inputs[i];
        is_output = false;
        return;
      }
    is_output = true;
    for (std::size_t i = 0; i < x_results.size(); ++i)
      if (x_results[i] == id) {  // stacked already (for another closure, or as an x's cotangent)
        at = static_cast<int>(i);
        return;
      }
    at = static_cast<int>(x_results.size());
    x_results.push_back(id);
  };
  for (int cl : closures) {
    int ct = cts[w++];
    if (ct < 0) continue;
    const ir::attributes psum = psum_after(ct);
    const ir::node d = g[ct];
    if (d.prim == &dot_general_p && body.in(d.operands[0]) && body.in(d.operands[1]) &&
        g[d.operands[0]].shape.size() + g[d.operands[1]].shape.size() < d.shape.size()) {
      hoisted h{cl, -1, -1, false, false, build::dims_of_dot(d), psum};
      stacked_operand(d.operands[0], h.lhs, h.lhs_out);
      stacked_operand(d.operands[1], h.rhs, h.rhs_out);
      hoists.push_back(h);
      continue;
    }
    // The running sum varies as the steps' cotangents do, until its psum after the loop.
    acc_closures.push_back(cl);
    acc_psums.push_back(psum);
    acc_params.push_back(control::region_parameter(g, rb, g[cl].dtype, g[cl].shape, g[ct].varying | g[cl].varying));
    acc_results.push_back(build::add(g, acc_params.back(), ct));
  }
  {
    ir::region_record& reg = g.regions[static_cast<std::size_t>(rb)];
    reg.params = carry_ct;
    reg.params.insert(reg.params.end(), acc_params.begin(), acc_params.end());
    reg.params.insert(reg.params.end(), x_params.begin(), x_params.end());
    ir::construct_record& bc = g.constructs[static_cast<std::size_t>(b)];
    bc.length = fc.length;
    bc.reverse = !fc.reverse;
    bc.carries = static_cast<int>(carry_ct.size() + acc_params.size());
    bc.inputs = carry_inputs;
    for (std::size_t i = 0; i < acc_closures.size(); ++i)
      bc.inputs.push_back(varying_as(g, build::zeros_like(g, acc_closures[i]), g[acc_params[i]].varying));
    bc.inputs.insert(bc.inputs.end(), x_inputs.begin(), x_inputs.end());
  }
  std::vector<int> results = carry_results;
  results.insert(results.end(), acc_results.begin(), acc_results.end());
  results.insert(results.end(), x_results.begin(), x_results.end());
  control::close_region(g, rb, results);

  std::vector<pulled> out;
  for (int k = 0; k < nc; ++k) {
    const int p = fr.params[static_cast<std::size_t>(k)];
    if (floating(p)) out.push_back(pulled{fc.inputs[static_cast<std::size_t>(k)], control::output(g, b, g[p].dtype, g[p].shape)});
  }
  for (std::size_t i = 0; i < acc_closures.size(); ++i) {
    const int cl = acc_closures[i];
    out.push_back(pulled{cl, with_psum(control::output(g, b, g[cl].dtype, g[cl].shape), acc_psums[i])});
  }
  std::vector<int> stacked_outputs;
  for (int id : x_results)
    stacked_outputs.push_back(control::output(g, b, g[id].dtype, control::stacked(static_cast<std::size_t>(fc.length), g[id].shape)));
  for (int j = 0, next = 0; j < nx; ++j) {
    const int in = fc.inputs[static_cast<std::size_t>(nc + j)];
    if (floating(in)) {
      out.push_back(pulled{in, with_psum(stacked_outputs[static_cast<std::size_t>(next)], x_psums[static_cast<std::size_t>(next)])});
      ++next;
    }
  }
  for (const hoisted& h : hoists) {
    // sum over steps of dot(a_i, b_i) = dot(A, B) with the step axis (0) contracted as well.
    build::dot_dims d;
    d.nb = h.dims.nb;
    d.nc = h.dims.nc + 1;
    for (std::size_t i = 0; i < d.nb; ++i) {
      d.lb[i] = h.dims.lb[i] + 1;
      d.rb[i] = h.dims.rb[i] + 1;
    }
    d.lc[0] = d.rc[0] = 0;
    for (std::size_t i = 0; i < h.dims.nc; ++i) {
      d.lc[i + 1] = h.dims.lc[i] + 1;
      d.rc[i + 1] = h.dims.rc[i] + 1;
    }
    const int lhs = h.lhs_out ? stacked_outputs[static_cast<std::size_t>(h.lhs)] : h.lhs;
    const int rhs = h.rhs_out ? stacked_outputs[static_cast<std::size_t>(h.rhs)] : h.rhs;
    out.push_back(pulled{h.closure, with_psum(build::dot_general(g, lhs, rhs, d), h.psum)});
  }
  return out;
}

constexpr std::vector<pulled> switch_pull(ir::graph_builder& g, int c, const std::vector<int>& ocs, const std::vector<char>& active) {
  using namespace prim;
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  std::vector<region_nodes> members;
  std::vector<int> closures;
  for (int r = fc.first_region; r < fc.first_region + fc.region_count; ++r) {
    members.push_back(members_of(g, r, fc.outputs[0]));
    add_closures(g, r, members.back(), active, closures);
  }
  const int nops = static_cast<int>(fc.inputs.size());
  auto floating = [&](int id) { return ir::is_floating(g[id].dtype); };
  std::vector<int> out_index;
  for (std::size_t o = 0; o < ocs.size(); ++o)
    if (ocs[o] >= 0 && floating(fc.outputs[o])) out_index.push_back(static_cast<int>(o));

  const int b = control::new_construct(g, ir::construct_kind::switch_);
  {
    std::vector<int> inputs = fc.inputs;
    for (int o : out_index) inputs.push_back(ocs[static_cast<std::size_t>(o)]);
    ir::construct_record& bc = g.constructs[static_cast<std::size_t>(b)];
    bc.index = fc.index;
    bc.inputs = inputs;
  }
  for (int branch = 0; branch < fc.region_count; ++branch) {
    const int r = fc.first_region + branch;
    const region_nodes& m = members[static_cast<std::size_t>(branch)];
    const int rb = control::open_region(g, b);
    const int floor = static_cast<int>(g.size());
    std::vector<int> ops, cts_in;
    for (int j = 0; j < nops; ++j) {
      const int in = fc.inputs[static_cast<std::size_t>(j)];
      ops.push_back(control::region_parameter(g, rb, g[in].dtype, g[in].shape));
    }
    for (int o : out_index) {
      const int out = fc.outputs[static_cast<std::size_t>(o)];
      cts_in.push_back(control::region_parameter(g, rb, g[out].dtype, g[out].shape));
    }
    const ir::region_record fr = g.regions[static_cast<std::size_t>(r)];
    const std::vector<int> map = copy_region(g, r, m, ops);
    std::vector<pulled> seeds;
    for (std::size_t i = 0; i < out_index.size(); ++i)
      seeds.push_back(pulled{mapped(m, map, fr.results[static_cast<std::size_t>(out_index[i])]), cts_in[i]});
    std::vector<int> wrt;
    for (int p : ops)
      if (floating(p)) wrt.push_back(p);
    wrt.insert(wrt.end(), closures.begin(), closures.end());
    const std::vector<int> cts = reverse(g, seeds, wrt, floor);
    std::vector<int> results;
    for (std::size_t i = 0; i < cts.size(); ++i) results.push_back(or_zeros(g, cts[i], wrt[i]));
    control::close_region(g, rb, results);
  }
  std::vector<pulled> out;
  for (int j = 0; j < nops; ++j) {
    const int in = fc.inputs[static_cast<std::size_t>(j)];
    if (floating(in)) out.push_back(pulled{in, control::output(g, b, g[in].dtype, g[in].shape)});
  }
  for (int cl : closures) out.push_back(pulled{cl, control::output(g, b, g[cl].dtype, g[cl].shape)});
  return out;
}

// ---- forward mode ---------------------------------------------------------------------------------

// Tangents by node id over [from, to) (a region's copied nodes), as autodiff::forward computes them.
constexpr void sweep(ir::graph_builder& g, int from, int to, std::vector<int>& t) {
  if (t.size() < static_cast<std::size_t>(to)) t.resize(static_cast<std::size_t>(to), -1);
  for (int i = from; i < to; ++i) {
    const ir::node n = g[i];
    if (n.prim->kind == ir::prim_kind::control) {
      construct_jvp(g, i, t);
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
  sweep(g, from, to, out.t);
  return out;
}

// jvp of a scan: a scan carrying (carry, its tangent) over (x, its tangent), whose body is the forward
// body with its JVP; the primal outputs are computed again alongside (the original scan still runs).
constexpr void scan_jvp(ir::graph_builder& g, int c, std::vector<int>& t) {
  using namespace prim;
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  const int r = fc.first_region;
  const ir::region_record fr = g.regions[static_cast<std::size_t>(r)];
  const int nc = fc.carries, nx = static_cast<int>(fc.inputs.size()) - nc, ny = static_cast<int>(fr.results.size()) - nc;
  auto floating = [&](int id) { return ir::is_floating(g[id].dtype); };
  const int b = control::new_construct(g, ir::construct_kind::scan);
  const int rb = control::open_region(g, b);
  std::vector<int> primal, tangent, xp, xt, inputs_c, inputs_t, inputs_x, inputs_xt, primal_tangents;
  for (int k = 0; k < nc; ++k) {
    const int p = fr.params[static_cast<std::size_t>(k)];
    primal.push_back(control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying));
    inputs_c.push_back(fc.inputs[static_cast<std::size_t>(k)]);
  }
  for (int k = 0; k < nc; ++k) {
    const int p = fr.params[static_cast<std::size_t>(k)];
    int pt = -1;
    if (floating(p)) {  // a carry's tangent varies as the carry (the inputs are listed at the end)
      pt = control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying);
      tangent.push_back(pt);
      const int in = fc.inputs[static_cast<std::size_t>(k)];
      inputs_t.push_back(varying_as(g, tangent_of(t, in) >= 0 ? tangent_of(t, in) : build::zeros_like(g, in), g[p].varying));
    }
    primal_tangents.push_back(pt);
  }
  for (int j = 0; j < nx; ++j) {
    const int p = fr.params[static_cast<std::size_t>(nc + j)];
    xp.push_back(control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying));
    inputs_x.push_back(fc.inputs[static_cast<std::size_t>(nc + j)]);
  }
  for (int j = 0; j < nx; ++j) {
    const int p = fr.params[static_cast<std::size_t>(nc + j)];
    const int in = fc.inputs[static_cast<std::size_t>(nc + j)];
    int pt = -1;
    if (floating(p) && tangent_of(t, in) >= 0) {
      pt = control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[tangent_of(t, in)].varying);
      xt.push_back(pt);
      inputs_xt.push_back(tangent_of(t, in));
    }
    primal_tangents.push_back(pt);
  }
  std::vector<int> params = primal;
  params.insert(params.end(), xp.begin(), xp.end());
  const tangent_copy body = copy_with_tangents(g, r, fc.outputs[0], params, primal_tangents, t);
  std::vector<int> results;
  for (int k = 0; k < nc; ++k) results.push_back(body.value(fr.results[static_cast<std::size_t>(k)]));
  for (int k = 0; k < nc; ++k) {
    const int res = fr.results[static_cast<std::size_t>(k)];
    if (floating(fr.params[static_cast<std::size_t>(k)])) results.push_back(or_zeros(g, body.tangent(res), body.value(res)));
  }
  std::vector<int> y_float;
  for (int y = 0; y < ny; ++y) results.push_back(body.value(fr.results[static_cast<std::size_t>(nc + y)]));
  for (int y = 0; y < ny; ++y) {
    const int res = fr.results[static_cast<std::size_t>(nc + y)];
    if (!floating(res)) continue;
    y_float.push_back(y);
    results.push_back(or_zeros(g, body.tangent(res), body.value(res)));
  }
  {
    ir::region_record& reg = g.regions[static_cast<std::size_t>(rb)];
    reg.params = primal;
    reg.params.insert(reg.params.end(), tangent.begin(), tangent.end());
    reg.params.insert(reg.params.end(), xp.begin(), xp.end());
    reg.params.insert(reg.params.end(), xt.begin(), xt.end());
    ir::construct_record& bc = g.constructs[static_cast<std::size_t>(b)];
    bc.length = fc.length;
    bc.reverse = fc.reverse;
    bc.carries = static_cast<int>(primal.size() + tangent.size());
    bc.inputs = inputs_c;
    bc.inputs.insert(bc.inputs.end(), inputs_t.begin(), inputs_t.end());
    bc.inputs.insert(bc.inputs.end(), inputs_x.begin(), inputs_x.end());
    bc.inputs.insert(bc.inputs.end(), inputs_xt.begin(), inputs_xt.end());
  }
  control::close_region(g, rb, results);
  for (int k = 0; k < nc; ++k) {
    const int o = fc.outputs[static_cast<std::size_t>(k)];
    control::output(g, b, g[o].dtype, g[o].shape);
  }
  for (int k = 0; k < nc; ++k) {
    const int o = fc.outputs[static_cast<std::size_t>(k)];
    if (!floating(o)) continue;
    const int tan = control::output(g, b, g[o].dtype, g[o].shape);
    if (static_cast<std::size_t>(o) < t.size()) t[static_cast<std::size_t>(o)] = tan;
  }
  for (int y = 0; y < ny; ++y) {
    const int o = fc.outputs[static_cast<std::size_t>(nc + y)];
    control::output(g, b, g[o].dtype, g[o].shape);
  }
  for (int y : y_float) {
    const int o = fc.outputs[static_cast<std::size_t>(nc + y)];
    const int tan = control::output(g, b, g[o].dtype, g[o].shape);
    if (static_cast<std::size_t>(o) < t.size()) t[static_cast<std::size_t>(o)] = tan;
  }
}

// jvp of a switch: a switch on the same index whose branch b returns branch b's output tangents.
constexpr void switch_jvp(ir::graph_builder& g, int c, std::vector<int>& t) {
  using namespace prim;
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  auto floating = [&](int id) { return ir::is_floating(g[id].dtype); };
  std::vector<int> float_outputs;
  for (std::size_t o = 0; o < fc.outputs.size(); ++o)
    if (floating(fc.outputs[o])) float_outputs.push_back(static_cast<int>(o));
  const int b = control::new_construct(g, ir::construct_kind::switch_);
  std::vector<int> inputs = fc.inputs;
  for (int in : fc.inputs)
    if (floating(in) && tangent_of(t, in) >= 0) inputs.push_back(tangent_of(t, in));
  // Listed before the branches are made: each parameter varies as the input it stands for.
  g.constructs[static_cast<std::size_t>(b)].index = fc.index;
  g.constructs[static_cast<std::size_t>(b)].inputs = inputs;
  for (int q = fc.first_region; q < fc.first_region + fc.region_count; ++q) {
    const int rb = control::open_region(g, b);
    std::vector<int> primal, tangent, primal_tangents;
    for (int in : fc.inputs) primal.push_back(control::region_parameter(g, rb, g[in].dtype, g[in].shape));
    for (int in : fc.inputs) {
      int pt = -1;
      if (floating(in) && tangent_of(t, in) >= 0) {
        pt = control::region_parameter(g, rb, g[in].dtype, g[in].shape);
        tangent.push_back(pt);
      }
      primal_tangents.push_back(pt);
    }
    const tangent_copy body = copy_with_tangents(g, q, fc.outputs[0], primal, primal_tangents, t);
    const std::vector<int> fr_results = g.regions[static_cast<std::size_t>(q)].results;
    std::vector<int> results;
    for (int o : float_outputs) {
      const int res = fr_results[static_cast<std::size_t>(o)];
      results.push_back(or_zeros(g, body.tangent(res), body.value(res)));
    }
    g.regions[static_cast<std::size_t>(rb)].params = primal;
    g.regions[static_cast<std::size_t>(rb)].params.insert(g.regions[static_cast<std::size_t>(rb)].params.end(), tangent.begin(), tangent.end());
    control::close_region(g, rb, results);
  }
  for (int o : float_outputs) {
    const int out = fc.outputs[static_cast<std::size_t>(o)];
    const int tan = control::output(g, b, g[out].dtype, g[out].shape);
    if (static_cast<std::size_t>(out) < t.size()) t[static_cast<std::size_t>(out)] = tan;
  }
}

}  // namespace control_detail

constexpr void construct_jvp(ir::graph_builder& g, int id, std::vector<int>& t) {
  const int c = static_cast<int>(g[id].attr.ints[0]);
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  if (fc.outputs[0] != id) return;  // the rule runs at the first output; the others' tangents are set then
  // Does any tangent reach the construct (through an input or a value a body reads from outside)?
  std::vector<char> has(t.size(), false);
  for (std::size_t i = 0; i < t.size(); ++i) has[i] = t[i] >= 0;
  bool any = false;
  for (int in : fc.inputs) any = any || control_detail::tangent_of(t, in) >= 0;
  for (int q = fc.first_region; q < fc.first_region + fc.region_count && !any; ++q) {
    std::vector<int> closures;
    control_detail::add_closures(g, q, control_detail::members_of(g, q, id), has, closures);
    any = !closures.empty();
  }
  if (!any) return;
  if (fc.kind == ir::construct_kind::scan) control_detail::scan_jvp(g, c, t);
  else control_detail::switch_jvp(g, c, t);
}

constexpr std::vector<pulled> construct_pull(ir::graph_builder& g, int id, const std::vector<int>& cts, const std::vector<char>& active) {
  const int c = static_cast<int>(g[id].attr.ints[0]);
  const std::vector<int> outputs = g.constructs[static_cast<std::size_t>(c)].outputs;
  if (outputs[0] != id) return {};  // the rule runs at the first output, when every output's cotangent is known
  std::vector<int> ocs;
  bool any = false;
  for (int o : outputs) {
    ocs.push_back(static_cast<std::size_t>(o) < cts.size() ? cts[static_cast<std::size_t>(o)] : -1);
    any = any || ocs.back() >= 0;
  }
  if (!any) return {};
  if (g.constructs[static_cast<std::size_t>(c)].kind == ir::construct_kind::scan) return control_detail::scan_pull(g, c, ocs, active);
  return control_detail::switch_pull(g, c, ocs, active);
}

}  // namespace tessel::autodiff
