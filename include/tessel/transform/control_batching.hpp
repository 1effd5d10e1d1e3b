#pragma once
// vmap's re-emission of a traced function (transform/vmap.hpp), control flow included: every node of the
// unbatched program is emitted into the caller's graph through its primitive's batching rule, and each
// control construct (scan, switch; ir/graph.hpp) is emitted whole, with batched regions, following JAX's
// _scan_batching_rule and _cond_batching_rule:
//
// scan (fori_loop, scan<L>): a carry is batched if its init is, or if the body makes it so: a fixpoint
//   from the inits' batched-ness, redone while a body result is batched where its carry was not (an
//   unbatched init of a batched carry is broadcast). Batched carries hold the batch at axis 0; batched
//   xs are given with the batch at axis 1 (the length axis stays first), so each slice has it at 0; a
//   batched y comes out with the batch at axis 1 of the stacked ys. Values the body reads from outside
//   may be batched or not; reverse and nested constructs are kept.
// switch (cond): with an unbatched index, the same switch with batched branches (an output batched in one
//   branch is broadcast in the others, at axis 0). With a batched index, every branch runs (inline, on
//   the batch) and select combines the outputs per example: the index clamped as switch_ clamps it.
//
// One analysis (analyse) gives every node's batched-ness first, the carries' fixpoint included, so the
// regions are emitted once.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/ir/region.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/control.hpp"
#include "tessel/prim/family/batching.hpp"

namespace tessel::batching_detail {

// Position of each region parameter in its region's params, and of each control node in its
// construct's outputs (the lists may have been reordered or extended after the nodes were made).
constexpr std::vector<int> positions(const ir::graph_builder& in) {
  std::vector<int> pos(in.size(), -1);
  for (const ir::region_record& r : in.regions)
    for (std::size_t k = 0; k < r.params.size(); ++k) pos[static_cast<std::size_t>(r.params[k])] = static_cast<int>(k);
  for (const ir::construct_record& c : in.constructs)
    for (std::size_t o = 0; o < c.outputs.size(); ++o) pos[static_cast<std::size_t>(c.outputs[o])] = static_cast<int>(o);
  return pos;
}

// The region each node is in (-1: the program), as the planner assigns it (ir/region.hpp).
constexpr std::vector<int> regions_of(const ir::graph_builder& in) {
  std::vector<int> out(in.size(), -1);
  ir::assign_regions(in, 0, static_cast<int>(in.size()), out);
  return out;
}

struct analysis {
  std::vector<char> batched;               // by node of the unbatched program
  std::vector<std::vector<char>> carries;  // by construct: which of a scan's carries are batched
};

// Which nodes carry the batch, given the parameters' batch axes (-1: shared).
constexpr analysis analyse(const ir::graph_builder& in, const std::vector<int>& param_axes) {
  const std::vector<int> pos = positions(in);
  analysis a;
  a.carries.resize(in.constructs.size());
  for (std::size_t c = 0; c < in.constructs.size(); ++c)
    a.carries[c].assign(static_cast<std::size_t>(in.constructs[c].kind == ir::construct_kind::scan ? in.constructs[c].carries : 0), 0);
  auto at = [&](int id) { return a.batched[static_cast<std::size_t>(id)] != 0; };
  for (bool changed = true; changed;) {
    changed = false;
    a.batched.assign(in.size(), 0);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const ir::node& n = in[static_cast<int>(i)];
      bool b = false;
      if (n.prim->kind == ir::prim_kind::parameter) {
        const auto p = static_cast<std::size_t>(n.attr.ints[0]);
        b = p < param_axes.size() && param_axes[p] >= 0;
      } else if (n.prim->kind == ir::prim_kind::region_parameter) {
        const auto c = static_cast<std::size_t>(in.regions[static_cast<std::size_t>(n.attr.ints[0])].construct);
        const auto k = static_cast<std::size_t>(pos[i]);
        const ir::construct_record& cr = in.constructs[c];
        b = cr.kind == ir::construct_kind::scan && k < a.carries[c].size() ? a.carries[c][k] != 0 : at(cr.inputs[k]);
      } else if (n.prim->kind == ir::prim_kind::control) {
        const auto c = static_cast<std::size_t>(n.attr.ints[0]);
        const auto o = static_cast<std::size_t>(pos[i]);
        const ir::construct_record& cr = in.constructs[c];
        if (cr.kind == ir::construct_kind::scan) {
          b = o < a.carries[c].size() ? a.carries[c][o] != 0 : at(in.regions[static_cast<std::size_t>(cr.first_region)].results[o]);
        } else {
          b = at(cr.index);
          for (int q = cr.first_region; q < cr.first_region + cr.region_count; ++q) b = b || at(in.regions[static_cast<std::size_t>(q)].results[o]);
        }
      } else {
        for (std::size_t k = 0; k < n.arity; ++k) b = b || at(n.operands[k]);
      }
      a.batched[i] = b;
    }
    // The fixpoint: a carry is batched if its init is or the body returns it batched.
    for (std::size_t c = 0; c < in.constructs.size(); ++c) {
      const ir::construct_record& cr = in.constructs[c];
      for (std::size_t k = 0; k < a.carries[c].size(); ++k) {
        const bool want = at(cr.inputs[k]) || at(in.regions[static_cast<std::size_t>(cr.first_region)].results[k]);
        if (want && !a.carries[c][k]) {
          a.carries[c][k] = 1;
          changed = true;
        }
      }
    }
  }
  return a;
}

// Emits the unbatched program `in` into g with batch size `batch`; id/axis map each node of `in` to its
// batched node and batch axis (-1: unbatched). The caller sets the parameters' entries first.
struct batcher {
  const ir::graph_builder& in;
  ir::graph_builder& g;
  std::size_t batch;
  analysis a;
  std::vector<int> pos, region;
  std::vector<int> id, axis;
  std::vector<char> done;

  constexpr batcher(const ir::graph_builder& inner, ir::graph_builder& outer, std::size_t b, const std::vector<int>& param_axes)
      : in(inner), g(outer), batch(b), a(analyse(inner, param_axes)), pos(positions(inner)), region(regions_of(inner)),
        id(inner.size(), -1), axis(inner.size(), -1), done(inner.constructs.size(), 0) {}

  constexpr void set(int i, int to, int ax) {
    id[static_cast<std::size_t>(i)] = to;
    axis[static_cast<std::size_t>(i)] = ax;
  }
  constexpr int id_of(int i) const { return id[static_cast<std::size_t>(i)]; }
  constexpr int axis_of(int i) const { return axis[static_cast<std::size_t>(i)]; }
  // Node i with its batch at `to` (broadcast there when unbatched).
  constexpr int at_axis(int i, std::size_t to) { return prim::batching::batched_at(g, id_of(i), axis_of(i), to, batch); }

  // One past the last node of construct c's regions: its first output, or later if a transform appended
  // region results after it (as reverse mode appends residuals).
  constexpr int end_of(const ir::construct_record& cr) const {
    int hi = cr.outputs[0];
    for (int q = cr.first_region; q < cr.first_region + cr.region_count; ++q)
      for (int res : in.regions[static_cast<std::size_t>(q)].results)
        if (res >= hi && region[static_cast<std::size_t>(res)] >= 0) hi = res + 1;
    return hi;
  }

  // The nodes of region r (-1: the program) among [lo, hi), in order; constructs in it are emitted whole.
  constexpr void emit_range(int r, int lo, int hi) {
    for (int i = lo; i < hi; ++i)
      if (region[static_cast<std::size_t>(i)] == r) emit(i);
  }

  constexpr void emit(int i) {
    const ir::node n = in[i];
    if (n.prim->kind == ir::prim_kind::parameter || n.prim->kind == ir::prim_kind::region_parameter) return;  // set by the caller
    if (n.prim->kind == ir::prim_kind::control) {
      const auto c = static_cast<std::size_t>(n.attr.ints[0]);
      if (done[c]) return;
      done[c] = 1;
      const ir::construct_record& cr = in.constructs[c];
      if (cr.kind == ir::construct_kind::scan) emit_scan(static_cast<int>(c));
      else if (axis_of(cr.index) >= 0) emit_select(static_cast<int>(c));
      else emit_switch(static_cast<int>(c));
      return;
    }
    std::array<int, ir::max_operands> ops{-1, -1, -1}, op_axes{-1, -1, -1};
    bool any = false;
    for (std::size_t k = 0; k < n.arity; ++k) {
      ops[k] = id_of(n.operands[k]);
      op_axes[k] = axis_of(n.operands[k]);
      any = any || op_axes[k] >= 0;
    }
    if (!any || n.prim->batch == nullptr) {
      if (any) g.report_missing(n.prim, "batch");
      ir::node m = n;
      m.operands = ops;
      set(i, g.add(m), -1);
      return;
    }
    int out_axis = -1;
    const int y = n.prim->batch(g, n, ops, op_axes, out_axis);
    set(i, y, out_axis);
  }

  constexpr void emit_scan(int c) {
    using namespace prim;
    const ir::construct_record cr = in.constructs[static_cast<std::size_t>(c)];
    const ir::region_record reg = in.regions[static_cast<std::size_t>(cr.first_region)];
    const std::vector<char>& carried = a.carries[static_cast<std::size_t>(c)];
    const auto nc = static_cast<std::size_t>(cr.carries);
    // Inputs: batched carries with the batch at 0, batched xs at 1 (behind the length axis).
    std::vector<int> inputs;
    std::vector<char> param_batched;
    for (std::size_t k = 0; k < cr.inputs.size(); ++k) {
      const int x = cr.inputs[k];
      if (k < nc) {
        inputs.push_back(carried[k] ? at_axis(x, 0) : id_of(x));
        param_batched.push_back(carried[k]);
      } else {
        const bool b = axis_of(x) >= 0;
        inputs.push_back(b ? at_axis(x, 1) : id_of(x));
        param_batched.push_back(b);
      }
    }
    const int c2 = control::new_construct(g, ir::construct_kind::scan);
    {
      ir::construct_record& nr = g.constructs[static_cast<std::size_t>(c2)];
      nr.length = cr.length;
      nr.reverse = cr.reverse;
      nr.carries = cr.carries;
      nr.inputs = inputs;
    }
    const int r2 = control::open_region(g, c2);
    for (std::size_t k = 0; k < reg.params.size(); ++k) {
      const ir::node& p = in[reg.params[k]];
      const bool b = param_batched[k] != 0;
      set(reg.params[k], control::region_parameter(g, r2, p.dtype, b ? batching::insert_axis(p.shape, 0, batch) : p.shape), b ? 0 : -1);
    }
    emit_range(cr.first_region, cr.first_node, end_of(cr));
    std::vector<int> results;
    std::vector<char> y_batched;
    for (std::size_t k = 0; k < reg.results.size(); ++k) {
      const int res = reg.results[k];
      if (k < nc) {
        results.push_back(carried[k] ? at_axis(res, 0) : id_of(res));
      } else {
        const bool b = axis_of(res) >= 0;
        results.push_back(b ? at_axis(res, 0) : id_of(res));
        y_batched.push_back(b);
      }
    }
    control::close_region(g, r2, results);
    g.constructs[static_cast<std::size_t>(c2)].residuals = cr.residuals;
    for (std::size_t o = 0; o < cr.outputs.size(); ++o) {
      const ir::node& out = in[cr.outputs[o]];
      const bool b = o < nc ? carried[o] != 0 : y_batched[o - nc] != 0;
      const std::size_t where = o < nc ? 0 : 1;
      set(cr.outputs[o], control::output(g, c2, out.dtype, b ? batching::insert_axis(out.shape, where, batch) : out.shape),
          b ? static_cast<int>(where) : -1);
    }
  }

  // A switch on an unbatched index: the same switch, its branches batched.
  constexpr void emit_switch(int c) {
    using namespace prim;
    const ir::construct_record cr = in.constructs[static_cast<std::size_t>(c)];
    std::vector<int> inputs;
    for (int x : cr.inputs) inputs.push_back(id_of(x));
    const int c2 = control::new_construct(g, ir::construct_kind::switch_);
    g.constructs[static_cast<std::size_t>(c2)].index = id_of(cr.index);
    g.constructs[static_cast<std::size_t>(c2)].inputs = inputs;
    for (int q = cr.first_region; q < cr.first_region + cr.region_count; ++q) {
      const ir::region_record reg = in.regions[static_cast<std::size_t>(q)];
      const int r2 = control::open_region(g, c2);
      for (std::size_t k = 0; k < reg.params.size(); ++k) {
        const int x = cr.inputs[k];
        set(reg.params[k], control::region_parameter(g, r2, g[id_of(x)].dtype, g[id_of(x)].shape), axis_of(x));
      }
      emit_range(q, cr.first_node, end_of(cr));
      std::vector<int> results;
      for (std::size_t o = 0; o < reg.results.size(); ++o) {
        const int res = reg.results[o];
        results.push_back(a.batched[static_cast<std::size_t>(cr.outputs[o])] ? at_axis(res, 0) : id_of(res));
      }
      control::close_region(g, r2, results);
    }
    for (int o : cr.outputs) {
      const ir::node& out = in[o];
      const bool b = a.batched[static_cast<std::size_t>(o)] != 0;
      set(o, control::output(g, c2, out.dtype, b ? batching::insert_axis(out.shape, 0, batch) : out.shape), b ? 0 : -1);
    }
  }

  // A switch on a batched index: every branch runs on the batch and select takes each example's branch.
  constexpr void emit_select(int c) {
    using namespace prim;
    const ir::construct_record cr = in.constructs[static_cast<std::size_t>(c)];
    std::vector<std::vector<int>> branch_results;
    for (int q = cr.first_region; q < cr.first_region + cr.region_count; ++q) {
      const ir::region_record reg = in.regions[static_cast<std::size_t>(q)];
      for (std::size_t k = 0; k < reg.params.size(); ++k) set(reg.params[k], id_of(cr.inputs[k]), axis_of(cr.inputs[k]));
      emit_range(q, cr.first_node, end_of(cr));
      branch_results.push_back(reg.results);
    }
    const int index = at_axis(cr.index, 0);  // [batch]
    const ir::dtype_code index_dtype = g[index].dtype;
    const std::size_t branches = static_cast<std::size_t>(cr.region_count);
    for (std::size_t o = 0; o < cr.outputs.size(); ++o) {
      int y = at_axis(branch_results[0][o], 0);
      // Branch b wins where the (clamped) index is at least b: the last such b is the index itself.
      const std::size_t last = index_dtype == ir::dtype_code::pred ? (branches > 1 ? 1 : 0) : branches - 1;
      for (std::size_t b = 1; b <= last; ++b) {
        const int yb = at_axis(branch_results[b][o], 0);
        const int take = index_dtype == ir::dtype_code::pred
                             ? index
                             : build::compare(g, ge_p, index, build::scalar_like(g, index, static_cast<double>(b)));
        std::array<std::int64_t, ir::max_rank> dims{};
        const int mask = build::broadcast_in_dim(g, take, g[yb].shape, dims);
        y = build::select(g, mask, yb, y);
      }
      set(cr.outputs[o], y, 0);
    }
  }
};

}  // namespace tessel::batching_detail
