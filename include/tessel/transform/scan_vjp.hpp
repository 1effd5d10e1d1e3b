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

// A closure's cotangent summed over the steps once, after the loop, by its primitive's sum_over_steps.
struct hoisted_sum {
  int closure;
  ir::node step;  // the per-step cotangent's node
  int lhs, rhs;   // its stacked operands: an input of the backward scan, or an output (index into x_results)
  bool lhs_out, rhs_out;
  ir::attributes psum;
};

// The backward scan of scan c, built step by step in the order scan_pull calls them (each step's nodes
// come after the previous step's, so the order is part of the result).
template <class Rules>
class backward_scan {
 public:
  constexpr backward_scan(ir::graph_builder& g, int c, const std::vector<int>& ocs, const std::vector<char>& active)
      : g(g), c(c), ocs(ocs), fc(g.constructs[static_cast<std::size_t>(c)]), r(fc.first_region),
        fr(g.regions[static_cast<std::size_t>(r)]), m(members_of(g, r, fc.outputs[0])), nc(fc.carries),
        nx(static_cast<int>(fc.inputs.size()) - nc), ny(static_cast<int>(ocs.size()) - nc) {
    add_closures(g, r, m, active, closures);
  }

  // The backward scan's parameters, made first (carries' cotangents, each step's starting carries and xs,
  // ys' cotangents, each varying along the mesh axes of the value it will read: its inputs are listed at
  // the end).
  constexpr void make_parameters() {
    b = prim::control::new_construct(g, ir::construct_kind::scan);
    rb = prim::control::open_region(g, b);
    floor = static_cast<int>(g.size());
    for (int k = 0; k < nc; ++k) {
      const int p = fr.params[static_cast<std::size_t>(k)];
      if (!floating(p)) continue;
      const int out = fc.outputs[static_cast<std::size_t>(k)];
      carry_ct.push_back(prim::control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[out].varying));
      carry_inputs.push_back(varying_as(g, or_zeros(g, ocs[static_cast<std::size_t>(k)], out), g[out].varying));
    }
    for (int k = 0; k < nc; ++k) {
      const int p = fr.params[static_cast<std::size_t>(k)];
      res.push_back(prim::control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying));
    }
    for (int j = 0; j < nx; ++j) {
      const int p = fr.params[static_cast<std::size_t>(nc + j)];
      xs.push_back(prim::control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying));
    }
    for (int y = 0; y < ny; ++y) {
      const int out = fc.outputs[static_cast<std::size_t>(nc + y)];
      if (ocs[static_cast<std::size_t>(nc + y)] < 0 || !floating(out)) continue;
      y_index.push_back(y);
      const int ct = ocs[static_cast<std::size_t>(nc + y)];
      y_ct.push_back(prim::control::region_parameter(g, rb, g[out].dtype, prim::control::unstacked(g[out].shape), g[ct].varying));
      y_ct_inputs.push_back(ocs[static_cast<std::size_t>(nc + y)]);
    }
  }

  // The forward body again, on this step's carry and x, and its VJP.
  constexpr void differentiate() {
    std::vector<int> fwd_params = res;
    fwd_params.insert(fwd_params.end(), xs.begin(), xs.end());
    copy_lo = static_cast<int>(g.size());
    map = copy_region(g, r, m, fwd_params);
    copy_hi = static_cast<int>(g.size());
    std::vector<pulled> seeds;
    std::size_t next = 0;
    for (int k = 0; k < nc; ++k)
      if (floating(fr.params[static_cast<std::size_t>(k)]))
        seeds.push_back(pulled{mapped(m, map, fr.results[static_cast<std::size_t>(k)]), carry_ct[next++]});
    for (std::size_t i = 0; i < y_index.size(); ++i)
      seeds.push_back(pulled{mapped(m, map, fr.results[static_cast<std::size_t>(nc + y_index[i])]), y_ct[i]});
    std::vector<int> wrt;
    for (int k = 0; k < nc; ++k)
      if (floating(res[static_cast<std::size_t>(k)])) wrt.push_back(res[static_cast<std::size_t>(k)]);
    for (int j = 0; j < nx; ++j)
      if (floating(xs[static_cast<std::size_t>(j)])) wrt.push_back(xs[static_cast<std::size_t>(j)]);
    wrt.insert(wrt.end(), closures.begin(), closures.end());
    cts = reverse<Rules>(g, seeds, wrt, floor);
    vjp_hi = static_cast<int>(g.size());
  }

  // Residuals: the step values (starting carries, values of the copied body) that the VJP reads, each a
  // parameter of the backward body, and the VJP nodes emitted again reading them, so the copy is left
  // dead. A copied value stands for the forward body's node it copies (its counterpart in region r
  // itself); a value with none (an output a nested construct's own backward pass added to the copy)
  // stays, and is recomputed with what it needs. Under checkpoint the VJP recomputes the body from the
  // checkpoint's arguments, so only those are read (remat_pull): the carries, and the contractions under
  // dots_saveable.
  constexpr void read_residuals() {
    std::vector<int> counterpart(static_cast<std::size_t>(vjp_hi - floor), -1);  // by id - floor
    for (int i = m.lo; i < m.hi; ++i) {
      const int copy = mapped(m, map, i);
      if (m.in(i) && m.where[static_cast<std::size_t>(i - m.lo)] == r && copy >= copy_lo && copy < copy_hi)
        counterpart[static_cast<std::size_t>(copy - floor)] = i;
    }
    const std::vector<char> referenced = referenced_by_vjp(counterpart);
    // The starting carries are always stacked (their parameters res[k] stay: a dead one in a body would be
    // a parameter that no list names); then every copied value the VJP reads.
    residual_params = res;
    residual_of.assign(fr.params.begin(), fr.params.begin() + nc);
    std::vector<substitute> preset;
    for (int i = floor; i < vjp_hi; ++i) {
      if (!referenced[static_cast<std::size_t>(i - floor)]) continue;
      const int f = counterpart[static_cast<std::size_t>(i - floor)];
      const int p = prim::control::region_parameter(g, rb, g[f].dtype, g[f].shape, g[f].varying);
      residual_params.push_back(p);
      residual_of.push_back(f);
      preset.push_back(substitute{i, p});
    }
    // The VJP nodes again, reading the residual parameters (constructs nested in them copied as well).
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

  // Each residual a stacked y of the forward scan (one already stacked, a y or a residual of an earlier
  // pull, is that one); the backward scan's xs: the residuals, the xs and the ys' cotangents.
  constexpr void stack_residuals() {
    for (std::size_t i = 0; i < residual_params.size(); ++i) {
      const int f = residual_of[i];
      ir::region_record& reg = g.regions[static_cast<std::size_t>(r)];
      int o = -1;
      for (std::size_t y = static_cast<std::size_t>(nc); y < reg.results.size() && o < 0; ++y)
        if (reg.results[y] == f) o = static_cast<int>(y);
      if (o < 0) {
        if (g.constructs[static_cast<std::size_t>(c)].residuals < 0)
          g.constructs[static_cast<std::size_t>(c)].residuals = static_cast<int>(reg.results.size());
        o = static_cast<int>(reg.results.size());
        reg.results.push_back(f);
        prim::control::output(g, c, g[f].dtype, prim::control::stacked(static_cast<std::size_t>(fc.length), g[f].shape));
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
  }

  // What each step returns: the carries' cotangents, the xs' cotangents (stacked), and each closure's:
  // a running sum, or, when its per-step cotangent is a node whose primitive sums over steps
  // (ir::primitive::sum_over_steps: a contraction) of two per-step values smaller than the result (h^T ct
  // for a weight: a rank-1 update), the two values stacked as ys and the sum taken once after the loop
  // (one GEMM instead of L rank-1 updates).
  constexpr void sum_cotangents() {
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
    const region_nodes body = members_of(g, rb, static_cast<int>(g.size()));
    for (int cl : closures) {
      int ct = cts[w++];
      if (ct < 0) continue;
      const ir::attributes psum = psum_after(ct);
      const ir::node d = g[ct];
      if (d.prim->sum_over_steps != nullptr && d.arity == 2 && body.in(d.operands[0]) && body.in(d.operands[1]) &&
          g[d.operands[0]].shape.size() + g[d.operands[1]].shape.size() < d.shape.size()) {
        hoisted_sum h{cl, d, -1, -1, false, false, psum};
        stacked_operand(body, d.operands[0], h.lhs, h.lhs_out);
        stacked_operand(body, d.operands[1], h.rhs, h.rhs_out);
        hoists.push_back(h);
        continue;
      }
      // The running sum varies as the steps' cotangents do, until its psum after the loop.
      acc_closures.push_back(cl);
      acc_psums.push_back(psum);
      acc_params.push_back(prim::control::region_parameter(g, rb, g[cl].dtype, g[cl].shape, g[ct].varying | g[cl].varying));
      acc_results.push_back(prim::build::add(g, acc_params.back(), ct));
    }
  }

  // The backward scan's lists (carries: the carries' cotangents, then the running sums), its region closed.
  constexpr void close() {
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
      bc.inputs.push_back(varying_as(g, prim::build::zeros_like(g, acc_closures[i]), g[acc_params[i]].varying));
    bc.inputs.insert(bc.inputs.end(), x_inputs.begin(), x_inputs.end());
    std::vector<int> results = carry_results;
    results.insert(results.end(), acc_results.begin(), acc_results.end());
    results.insert(results.end(), x_results.begin(), x_results.end());
    prim::control::close_region(g, rb, results);
  }

  // The cotangent of each of the forward scan's inputs and closures: the backward scan's outputs, and the
  // hoisted sums over its stacked operands.
  constexpr std::vector<pulled> cotangents() {
    std::vector<pulled> out;
    for (int k = 0; k < nc; ++k) {
      const int p = fr.params[static_cast<std::size_t>(k)];
      if (floating(p)) out.push_back(pulled{fc.inputs[static_cast<std::size_t>(k)], prim::control::output(g, b, g[p].dtype, g[p].shape)});
    }
    for (std::size_t i = 0; i < acc_closures.size(); ++i) {
      const int cl = acc_closures[i];
      out.push_back(pulled{cl, with_psum(prim::control::output(g, b, g[cl].dtype, g[cl].shape), acc_psums[i])});
    }
    std::vector<int> stacked_outputs;
    for (int id : x_results)
      stacked_outputs.push_back(prim::control::output(g, b, g[id].dtype, prim::control::stacked(static_cast<std::size_t>(fc.length), g[id].shape)));
    for (int j = 0, next = 0; j < nx; ++j) {
      const int in = fc.inputs[static_cast<std::size_t>(nc + j)];
      if (floating(in)) {
        out.push_back(pulled{in, with_psum(stacked_outputs[static_cast<std::size_t>(next)], x_psums[static_cast<std::size_t>(next)])});
        ++next;
      }
    }
    for (const hoisted_sum& h : hoists) {
      const int lhs = h.lhs_out ? stacked_outputs[static_cast<std::size_t>(h.lhs)] : h.lhs;
      const int rhs = h.rhs_out ? stacked_outputs[static_cast<std::size_t>(h.rhs)] : h.rhs;
      out.push_back(pulled{h.closure, with_psum(h.step.prim->sum_over_steps(g, h.step, {lhs, rhs, -1}), h.psum)});
    }
    return out;
  }

 private:
  constexpr bool floating(int id) const { return ir::is_floating(g[id].dtype); }

  // Which values of the copied body (by id - floor) the VJP nodes read, of those with a counterpart.
  constexpr std::vector<char> referenced_by_vjp(const std::vector<int>& counterpart) const {
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
    return referenced;
  }

  // A cotangent psummed in every step (an invariant x or closure read by device-varying values inside
  // shard_map) is psummed once after the loop instead: psum is linear, so the psum of the steps' sum (or
  // of the stacked steps) is the sum (the stack) of their psums, and one collective replaces one a step.
  // psum_after(ct) keeps the psum's operand in the loop and returns the psum's axes (count 0: none).
  constexpr ir::attributes psum_after(int& ct) const {
    ir::attributes axes;
    axes.push(0);
    if (ct >= 0 && g[ct].prim == &prim::psum_p) {
      axes = g[ct].attr;
      ct = g[ct].operands[0];
    }
    return axes;
  }
  constexpr int with_psum(int id, const ir::attributes& axes) const {
    return axes.ints[0] == 0 ? id : ir::make_node(g, prim::psum_p, g[id].dtype, g[id].shape, {id}, axes);
  }

  // Where a hoisted sum's operand `id` is stacked: an x of the backward scan (at: its input), or one of
  // its stacked outputs (at: the index into x_results; added there if it is not yet).
  constexpr void stacked_operand(const region_nodes& body, int id, int& at, bool& is_output) {
    while (g[id].prim == &prim::optimization_barrier_p && body.in(g[id].operands[0])) id = g[id].operands[0];  // the same value
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
  }

  ir::graph_builder& g;
  const int c;
  const std::vector<int>& ocs;          // the cotangents of the forward scan's outputs (-1: zero)
  const ir::construct_record fc;        // the forward scan, as it was when the pull began
  const int r;                          // its body
  const ir::region_record fr;
  const region_nodes m;                 // the body's nodes
  const int nc, nx, ny;                 // carries, xs, every y so far (residuals of earlier pulls included)
  std::vector<int> closures;            // values from outside the body that it reads and that need cotangents
  int b = -1, rb = -1, floor = 0;       // the backward scan, its body, the first node of its body
  std::vector<int> carry_ct, res, xs, y_ct, y_index, carry_inputs, y_ct_inputs;
  int copy_lo = 0, copy_hi = 0, vjp_hi = 0;  // the copied body [copy_lo, copy_hi), its VJP [copy_hi, vjp_hi)
  std::vector<int> map, cts;                 // the copy of the body's nodes; the cotangents of wrt
  std::vector<int> residual_params, residual_of;  // residual_of: the forward node each reads
  std::vector<int> x_params, x_inputs;
  std::vector<int> carry_results, x_results, acc_closures, acc_params, acc_results;
  std::vector<ir::attributes> x_psums, acc_psums;  // by x; by running sum
  std::vector<hoisted_sum> hoists;
};

template <class Rules>
constexpr std::vector<pulled> scan_pull(ir::graph_builder& g, int c, const std::vector<int>& ocs, const std::vector<char>& active) {
  backward_scan<Rules> backward(g, c, ocs, active);
  backward.make_parameters();
  backward.differentiate();
  backward.read_residuals();
  backward.stack_residuals();
  backward.sum_cotangents();
  backward.close();
  return backward.cotangents();
}

}  // namespace tessel::autodiff::control_detail
