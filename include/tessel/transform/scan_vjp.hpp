#pragma once
// Reverse mode through a scan (the rule transform/sweeps.hpp declares for constructs, for a scan).
//
// The backward pass is one more scan, run the other way (backprop through time), over residuals the
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
// the checkpointed function from its arguments (transform/sweeps.hpp, remat_pull): the VJP then reads only the
// arguments (the carries, x; closures directly, not copied per step), or under dots_saveable also the
// contraction results, so only those are stacked and the rest is recomputed in each backward step
// (everything_saveable is the default). JAX's scan of a jax.checkpoint-ed body does the same.

#include <array>
#include <cstddef>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/control.hpp"
#include "tessel/transform/region_copy.hpp"
#include "tessel/transform/sweeps.hpp"

namespace tessel::autodiff::control_detail {

template <class Rules>
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
  // when its per-step cotangent is a node whose primitive sums over steps (ir::primitive::sum_over_steps:
  // a contraction) of two per-step values smaller than the result (h^T ct for a weight: a rank-1 update),
  // the two values are stacked as ys and the sum is taken once after the loop (one GEMM instead of L
  // rank-1 updates).
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
  std::vector<int> cts = reverse<Rules>(g, seeds, wrt, floor);
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
    return axes.ints[0] == 0 ? id : ir::make_node(g, psum_p, g[id].dtype, g[id].shape, {id}, axes);
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
  // The closures' cotangents: a running sum, or, where the primitive has a rule for the sum over the steps
  // (a contraction), that sum after the loop on its stacked operands.
  const region_nodes body = members_of(g, rb, static_cast<int>(g.size()));
  struct hoisted {
    int closure;
    ir::node step;  // the per-step cotangent's node
    int lhs, rhs;   // its stacked operands: an input of the backward scan, or an output (index into x_results)
    bool lhs_out, rhs_out;
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
    if (d.prim->sum_over_steps != nullptr && d.arity == 2 && body.in(d.operands[0]) && body.in(d.operands[1]) &&
        g[d.operands[0]].shape.size() + g[d.operands[1]].shape.size() < d.shape.size()) {
      hoisted h{cl, d, -1, -1, false, false, psum};
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
    const int lhs = h.lhs_out ? stacked_outputs[static_cast<std::size_t>(h.lhs)] : h.lhs;
    const int rhs = h.rhs_out ? stacked_outputs[static_cast<std::size_t>(h.rhs)] : h.rhs;
    out.push_back(pulled{h.closure, with_psum(h.step.prim->sum_over_steps(g, h.step, {lhs, rhs, -1}), h.psum)});
  }
  return out;
}

}  // namespace tessel::autodiff::control_detail
