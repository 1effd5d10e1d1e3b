#pragma once
// Weight-update sharding of a shard_map body (XLA's automatic cross-replica sharding of the weight update,
// Xu et al. 2020; SHARDING.md §3.4). A data-parallel step sums each gradient over the devices (psum) and then
// every device runs the same optimizer update on the whole parameter: D devices compute D equal copies.
// Where a psum's sum is used only by elementwise operations (with arguments every device holds whole, and
// broadcast scalars) on the way to results the out_specs replicate, each device instead keeps its block of
// the sum along dimension 0 (psum_scatter: half an all-reduce's traffic) and computes its block of those
// results, which the host writes in place into the replicated result (tessel/shard_map.hpp). The values are
// the same bit for bit: each element is summed in group order either way, then computed by the same
// operations. An argument the block computation reads is handed to each device a second time, as its block
// (a new parameter whose attributes name the argument leaf it is cut from).
//
// It applies where the group's size divides dimension 0, over mesh axes this process holds whole (a result
// is written in place by the devices on this host) named in mesh order, and not in programs with scan or
// cond; elsewhere the program runs as traced.

#include <array>
#include <cstddef>
#include <cstdint>

#include "tessel/core/mesh.hpp"
#include "tessel/ir/graph.hpp"
#include "tessel/ir/program.hpp"
#include "tessel/prim/all.hpp"  // the primitives it compares nodes against and emits
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/collective.hpp"

namespace tessel::update_sharding {

// What the rewrite needs to know of the mesh and of the results.
struct setting {
  std::array<std::size_t, 8> sizes{};
  std::uint8_t local_axes = 0;  // the axes whose devices all run in this process
};


// An argument leaf's block, the parameter a rewritten program adds: attr [index, source leaf].
constexpr int source_leaf(const ir::node& parameter) { return parameter.attr.count > 1 ? static_cast<int>(parameter.attr.ints[1]) : -1; }

// What the analysis decides: for each node, the axes of the psum group whose blocks it is computed in
// (0: as traced), and whether its block must be made for a blocked use (an unblocked value read there).
template <std::size_t N>
struct blocking {
  std::array<std::uint8_t, N> group{};
  std::array<std::uint8_t, N> block_made{};
  std::size_t added = 0;  // nodes made: the blocks of unblocked values
  constexpr bool any() const { return added != 0 || group != std::array<std::uint8_t, N>{}; }
};

template <class Program, std::size_t Outputs>
constexpr blocking<Program::size> analyze(const Program& p, const std::array<std::uint8_t, Outputs>& out_axes, const setting& s) {
  constexpr std::size_t n = Program::size;
  blocking<n> b;
  if (p.construct_count != 0) return b;
  auto& group = b.group;
  const auto divides = [&](const ir::node& x, std::uint8_t axes) {
    const std::size_t g = group_size(s.sizes, axes);
    return x.shape.rank >= 1 && g > 1 && x.shape.d[0] % g == 0 && x.dtype != ir::dtype_code::pred;
  };

  // Values each device can compute its block of from what it holds: whole arguments, broadcasts that keep
  // dimension 0 out of their operand, and elementwise operations of such values.
  std::array<std::uint8_t, n> sliceable{};
  for (std::size_t i = 0; i < n; ++i) {
    const ir::node& x = p.nodes[i];
    if (x.shape.rank == 0) continue;
    if (x.prim == &prim::parameter_p) {
      sliceable[i] = x.varying == 0;
    } else if (x.prim == &prim::broadcast_in_dim_p) {
      bool keeps_dim0_out = true;
      for (std::size_t k = 0; k < x.attr.count; ++k) keeps_dim0_out = keeps_dim0_out && x.attr.ints[k] != 0;
      sliceable[i] = keeps_dim0_out;
    } else if (x.prim->kind == ir::prim_kind::elementwise) {
      bool all = x.arity > 0;
      for (std::size_t k = 0; k < x.arity; ++k) {
        const auto o = static_cast<std::size_t>(x.operands[k]);
        all = all && sliceable[o] && p.nodes[o].shape == x.shape;
      }
      sliceable[i] = all;
    }
  }

  // The psums and what follows them elementwise, in one group each.
  for (std::size_t i = 0; i < n; ++i) {
    const ir::node& x = p.nodes[i];
    if (x.prim == &prim::psum_p) {
      const std::uint8_t axes = prim::collective::axes_bits(x);
      bool mesh_order = true;
      for (std::size_t k = 1; k < prim::collective::axis_count(x); ++k)
        mesh_order = mesh_order && prim::collective::axis_at(x, k - 1) < prim::collective::axis_at(x, k);
      if (mesh_order && (axes & ~s.local_axes) == 0 && divides(x, axes)) group[i] = axes;
    } else if (x.prim->kind == ir::prim_kind::elementwise && x.shape.rank >= 1) {
      std::uint8_t axes = 0;
      bool ok = true;
      for (std::size_t k = 0; k < x.arity; ++k) {
        const std::uint8_t g = group[static_cast<std::size_t>(x.operands[k])];
        if (g != 0 && axes != 0 && g != axes) ok = false;
        if (g != 0) axes = g;
      }
      if (axes == 0 || !divides(x, axes)) continue;
      for (std::size_t k = 0; k < x.arity; ++k) {
        const auto o = static_cast<std::size_t>(x.operands[k]);
        ok = ok && p.nodes[o].shape == x.shape && (group[o] != 0 || sliceable[o]);
      }
      if (ok) group[i] = axes;
    }
  }

  // Keep only a closed set: every use of a blocked value is blocked, or a result the out_specs replicate.
  std::array<std::uint8_t, n> used_outside{};
  for (std::size_t o = 0; o < Outputs; ++o)
    if (out_axes[o] != 0) used_outside[static_cast<std::size_t>(p.outputs[o])] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < n; ++i) {
      const ir::node& x = p.nodes[i];
      bool keep = group[i] == 0 || !used_outside[i];
      if (group[i] != 0 && x.prim != &prim::psum_p)
        for (std::size_t k = 0; k < x.arity; ++k) {
          const auto o = static_cast<std::size_t>(x.operands[k]);
          keep = keep && (group[o] == group[i] || (group[o] == 0 && sliceable[o]));
        }
      if (!keep) {
        group[i] = 0;
        changed = true;
      }
      if (group[i] == 0)
        for (std::size_t k = 0; k < x.arity; ++k) {
          const auto o = static_cast<std::size_t>(x.operands[k]);
          if (group[o] != 0 && !used_outside[o]) {
            used_outside[o] = 1;
            changed = true;
          }
        }
    }
  }
  // A psum whose sum is only returned is left as the all-reduce written: there is no update to share out.
  std::array<std::uint8_t, n> feeds_update{};
  for (std::size_t i = 0; i < n; ++i)
    if (group[i] != 0 && p.nodes[i].prim != &prim::psum_p)
      for (std::size_t k = 0; k < p.nodes[i].arity; ++k) feeds_update[static_cast<std::size_t>(p.nodes[i].operands[k])] = 1;
  for (std::size_t i = 0; i < n; ++i)
    if (p.nodes[i].prim == &prim::psum_p && !feeds_update[i]) group[i] = 0;
  // Worth it only where a blocked value is a result (else the blocked nodes were dead anyway).
  bool reaches_result = false;
  for (std::size_t o = 0; o < Outputs; ++o) reaches_result = reaches_result || group[static_cast<std::size_t>(p.outputs[o])] != 0;
  if (!reaches_result) return blocking<n>{};

  // The unblocked values whose blocks a blocked operation reads (through elementwise chains), each made
  // once, for one group (a value two groups would cut differently leaves the rewrite out). Users come after
  // their operands, so one backward pass sees every use first.
  for (std::size_t i = n; i-- > 0;) {
    const ir::node& x = p.nodes[i];
    std::uint8_t axes = 0;
    if (group[i] != 0 && x.prim != &prim::psum_p) axes = group[i];
    else if (b.block_made[i] != 0 && x.prim->kind == ir::prim_kind::elementwise) axes = b.block_made[i];
    if (axes == 0) continue;
    for (std::size_t k = 0; k < x.arity; ++k) {
      const auto o = static_cast<std::size_t>(x.operands[k]);
      if (group[o] != 0) continue;
      if (b.block_made[o] != 0 && b.block_made[o] != axes) return blocking<n>{};
      b.block_made[o] = axes;
    }
  }
  for (std::size_t i = 0; i < n; ++i) b.added += b.block_made[i] != 0;
  return b;
}

// The program with its blocked nodes computed in blocks: each psum becomes a psum_scatter (tiled, dimension
// 0), each blocked operation runs at the block shape, and each unblocked value it reads is made again at the
// block shape just before its first use (an argument: a new parameter, its block). The rest is copied as is.
template <std::size_t Size, std::size_t Outputs, class Program>
constexpr ir::program<Size, Outputs> rewrite(const Program& p, const blocking<Program::size>& b, const setting& s) {
  constexpr std::size_t n = Program::size;
  ir::program<Size, Outputs> out;
  std::array<int, n> id{}, block{};
  std::size_t next = 0;
  int next_parameter = p.parameter_count;
  const auto emit = [&](ir::node x) {
    if (x.prim->kind != ir::prim_kind::parameter) {  // as graph_builder::add derives it
      std::uint8_t operands = 0;
      for (std::size_t k = 0; k < x.arity; ++k) operands |= out.nodes[static_cast<std::size_t>(x.operands[k])].varying;
      x.varying = x.prim->varying ? x.prim->varying(x, operands) : operands;
    }
    out.nodes[next] = x;
    return static_cast<int>(next++);
  };
  const auto cut = [&](ir::node& x, std::uint8_t axes) { x.shape.d[0] /= group_size(s.sizes, axes); };
  for (std::size_t i = 0; i < n; ++i) {
    ir::node x = p.nodes[i];
    if (b.block_made[i] != 0) {  // its block, before its whole self (its uses come later either way)
      ir::node y = x;
      cut(y, b.block_made[i]);
      if (y.prim == &prim::parameter_p) {
        y.varying = b.block_made[i];
        y.attr = {};
        y.attr.push(next_parameter++);
        y.attr.push(x.attr.ints[0]);
      } else if (y.prim == &prim::broadcast_in_dim_p) {
        y.operands[0] = id[static_cast<std::size_t>(y.operands[0])];
      } else {
        for (std::size_t k = 0; k < y.arity; ++k) y.operands[k] = block[static_cast<std::size_t>(y.operands[k])];
      }
      block[i] = emit(y);
    }
    if (b.group[i] == 0) {
      for (std::size_t k = 0; k < x.arity; ++k) x.operands[k] = id[static_cast<std::size_t>(x.operands[k])];
    } else if (x.prim == &prim::psum_p) {
      x.prim = &prim::psum_scatter_p;
      cut(x, b.group[i]);
      x.operands[0] = id[static_cast<std::size_t>(x.operands[0])];
      x.attr.push(0);  // scatter dimension
      x.attr.push(1);  // tiled
    } else {
      cut(x, b.group[i]);
      for (std::size_t k = 0; k < x.arity; ++k) {
        const auto o = static_cast<std::size_t>(x.operands[k]);
        x.operands[k] = b.group[o] != 0 ? id[o] : block[o];
      }
    }
    id[i] = emit(x);
  }
  for (std::size_t o = 0; o < Outputs; ++o) out.outputs[o] = id[static_cast<std::size_t>(p.outputs[o])];
  out.parameter_count = next_parameter;
  return out;
}

}  // namespace tessel::update_sharding
