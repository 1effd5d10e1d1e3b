#pragma once
// The partitioner of jit with shardings (transform/partition.hpp): f's global program emitted again per
// device, each value with a layout: the mesh axes that split each dimension (first major, as a
// PartitionSpec's tuple entry), and the axes along which the devices hold partial sums of it that are
// still to be added (JAX's unreduced {U:X}, DTensor's Partial). The rules, per primitive kind:
//
//   elementwise      operands split alike; an operand whole along a split dimension takes its device's block
//                    (no communication). Where splits clash, an argument of f (a storage choice: maybe
//                    broadcast, transposed, reshaped or cast) yields to a computed value and is gathered;
//                    a clash between two computed values or two arguments is a compile error.
//                    add, sub, neg, and mul or div by a whole value keep a partial sum partial; any other
//                    operation adds it up first: by the reduce-scatter another use of the same sum got, if
//                    any (so an optimizer's g and g*g share one), else by psum.
//   broadcast_in_dim, reshape, transpose   the splits follow the dimensions (a reshape gathers a split it
//                    cannot carry); a partial sum stays partial. A broadcast wanted in another layout is made
//                    again from its operand in the matching one (a split bias is gathered as f32[n], not as
//                    the f32[batch,n] it becomes); so is an iota along a whole dimension.
//   reduce_sum       over a split dimension: a partial sum over its axes (no communication yet).
//   reduce_max/min   over a split dimension: the local reduction, then pmax / pmin.
//   argmax           over a whole dimension: each device's rows; over a split one, on the gathered array.
//   dot_general      the four cases of SHARDING.md §3.3: no split contracting dimension, nothing to do;
//                    one side split on a contracting dimension, that side gathered (all_gather); both split
//                    alike, a partial sum over those axes; both split over one axis in dimensions the result
//                    keeps (each device would hold diagonal blocks only): an argument is gathered (the weight
//                    of fully sharded data parallelism, in the backward pass), else a compile error.
//   anything else    (slice, pad, concatenate, take, ...): its operands gathered whole, then run as written.
//
// Results are brought to their out_shardings: a partial sum by psum (whole) or psum_scatter (split over
// exactly its axes), a split the out_sharding lacks by all_gather, a split it asks for by taking the device's
// block. So a data-parallel gradient gets one all-reduce per parameter, and a Megatron MLP one all-reduce
// forward and one backward, with no annotation inside f. scan and cond are not partitioned (a compile error
// says to use shard_map there). Only the nodes the results need are partitioned.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/all_gather.hpp"
#include "tessel/prim/argmax.hpp"
#include "tessel/prim/axis_index.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/iota.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/prim/family/collective.hpp"
#include "tessel/prim/psum.hpp"
#include "tessel/prim/psum_scatter.hpp"
#include "tessel/transform/shard_map.hpp"

namespace tessel::partition_detail {

// How a global value lies on the mesh.
struct layout {
  std::array<std::uint8_t, ir::max_rank> count{};                           // axes splitting each dimension
  std::array<std::array<std::uint8_t, max_entry_axes>, ir::max_rank> axes{};  // those axes, first major
  std::uint8_t pending = 0;  // axes along which each device holds a partial sum of the value

  constexpr bool same_dim(std::size_t d, const layout& o, std::size_t e) const {
    if (count[d] != o.count[e]) return false;
    for (std::size_t i = 0; i < count[d]; ++i)
      if (axes[d][i] != o.axes[e][i]) return false;
    return true;
  }
  constexpr void copy_dim(std::size_t d, const layout& from, std::size_t e) {
    count[d] = from.count[e];
    axes[d] = from.axes[e];
  }
  constexpr std::uint8_t dim_mask(std::size_t d) const {
    unsigned m = 0;
    for (std::size_t i = 0; i < count[d]; ++i) m |= 1u << axes[d][i];
    return static_cast<std::uint8_t>(m);
  }
  constexpr std::uint8_t split_mask(std::size_t rank) const {
    std::uint8_t m = 0;
    for (std::size_t d = 0; d < rank; ++d) m = static_cast<std::uint8_t>(m | dim_mask(d));
    return m;
  }
};

// A PartitionSpec's layout over M (the spec has been checked).
template <class M, class Spec>
constexpr layout layout_of() {
  layout l;
  for (std::size_t d = 0; d < Spec::rank; ++d)
    for (std::size_t i = 0; i < Spec::entries[d].count; ++i)
      l.axes[d][l.count[d]++] = static_cast<std::uint8_t>(M::index_of(Spec::entries[d].names[i]));
  return l;
}

// A value's type with its layout, as SHARDING.md writes it: f32[8@data,4], f32[8,4@(data,model)]{U:model}.
constexpr message_builder& append_typed(message_builder& m, const ir::mesh_shape& mesh, const ir::node& n, const layout& l) {
  m << ir::name_of(n.dtype) << '[';
  for (std::size_t d = 0; d < n.shape.rank; ++d) {
    m << (d ? "," : "") << static_cast<std::uint64_t>(n.shape.d[d]);
    if (l.count[d] == 1) m << '@' << mesh.name(l.axes[d][0]);
    if (l.count[d] > 1) {
      m << "@(";
      for (std::size_t i = 0; i < l.count[d]; ++i) m << (i ? "," : "") << mesh.name(l.axes[d][i]);
      m << ')';
    }
  }
  m << ']';
  if (l.pending) {
    m << "{U:";
    for (std::size_t a = 0, n = 0; a < mesh.rank; ++a)
      if (l.pending & (1u << a)) m << (n++ ? "," : "") << mesh.name(a);
    m << '}';
  }
  return m;
}

// Emits f's global program again, per device, with the collectives its layouts need.
class partitioner {
 public:
  constexpr partitioner(const ir::graph_builder& global, ir::graph_builder& local)
      : in_(global), out_(local), mesh_(local.mesh), id_(global.size(), -1), lay_(global.size()), scattered_(global.size()) {}

  // A parameter of f: its node in f's graph, its block's node in the body, its in_sharding's layout.
  constexpr void bind(int global, int local, const layout& l) {
    id_[static_cast<std::size_t>(global)] = local;
    lay_[static_cast<std::size_t>(global)] = l;
  }

  // Emits every node the results need (derivative rules make some that nothing uses: a gradient not asked
  // for is neither computed nor partitioned, so its layout cannot fail).
  constexpr void run(const std::vector<int>& results) {
    std::vector<char> live(in_.size(), 0);
    for (int r : results)
      if (r >= 0) live[static_cast<std::size_t>(r)] = 1;
    for (std::size_t i = in_.size(); i-- > 0;)
      if (live[i])
        for (std::size_t k = 0; k < in_[static_cast<int>(i)].arity; ++k) live[static_cast<std::size_t>(in_[static_cast<int>(i)].operands[k])] = 1;
    for (std::size_t i = 0; i < in_.size() && !failed_; ++i)
      if (live[i] && id_[i] < 0) emit(i);
  }

  // Result `global` of f, brought to layout `want` (an out_sharding's). After a failure (reported) any
  // node will do: the trace is not planned, and the report is its one error.
  constexpr int result(int global, const layout& want) {
    if (global < 0) return -1;
    if (failed_) return id_[0];
    return convert(id_[static_cast<std::size_t>(global)], lay_[static_cast<std::size_t>(global)], want);
  }

 private:
  const ir::graph_builder& in_;
  ir::graph_builder& out_;
  const ir::mesh_shape& mesh_;
  std::vector<int> id_;       // f's node -> the body's node holding this device's part of it
  std::vector<layout> lay_;   // how that part lies
  std::vector<layout> scattered_;  // a partial sum's layout after the reduce-scatter one use gave it
  bool failed_ = false;

  constexpr std::size_t splits(const layout& l, std::size_t d) const {
    std::size_t k = 1;
    for (std::size_t i = 0; i < l.count[d]; ++i) k *= mesh_.sizes[l.axes[d][i]];
    return k;
  }
  constexpr ir::dims local_dims(const ir::dims& global, const layout& l) const {
    ir::dims s = global;
    for (std::size_t d = 0; d < s.rank; ++d) s.d[d] /= splits(l, d);
    return s;
  }

  static constexpr ir::attributes over(const std::array<std::uint8_t, max_entry_axes>& axes, std::size_t count) {
    ir::attributes a;
    a.push(static_cast<std::int64_t>(count));
    for (std::size_t i = 0; i < count; ++i) a.push(axes[i]);
    return a;
  }
  static constexpr ir::attributes over_mask(std::uint8_t mask) {
    std::array<std::uint8_t, max_entry_axes> axes{};
    std::size_t count = 0;
    for (std::uint8_t a = 0; a < 8; ++a)
      if (mask & (1u << a)) axes[count++] = a;
    return over(axes, count);
  }

  // ---- moving a value between layouts ----------------------------------------------------------------

  // The partial sums added up along `mask` (psum): the same on every device along those axes.
  constexpr int sum_up(int x, layout& l, std::uint8_t mask) {
    if (mask == 0) return x;
    l.pending = static_cast<std::uint8_t>(l.pending & ~mask);
    return ir::make_node(out_, prim::psum_p, out_[x].dtype, out_[x].shape, {x}, over_mask(mask));
  }
  // Dimension d made whole: every device gets every block (all_gather, tiled, the result the same on
  // every device: JAX's all_gather_invariant).
  constexpr int gather(int x, layout& l, std::size_t d) {
    ir::attributes a = over(l.axes[d], l.count[d]);
    a.push(static_cast<std::int64_t>(d));
    a.push(1);  // tiled
    a.push(1);  // invariant
    ir::dims s = out_[x].shape;
    s.d[d] *= splits(l, d);
    l.count[d] = 0;
    return ir::make_node(out_, prim::all_gather_p, out_[x].dtype, s, {x}, a);
  }
  // Dimension d, whole on this device, cut to this device's block along `axes` (its position along them
  // picks the rows: take at axis_index * block + iota).
  constexpr int block(int x, layout& l, std::size_t d, const layout& to) {
    const ir::dims s = out_[x].shape;
    const std::size_t n = s.d[d] / splits(to, d);
    const int index = ir::make_node(out_, prim::axis_index_p, ir::dtype_code::s32, ir::dims{}, {}, over(to.axes[d], to.count[d]));
    ir::dims rows;
    rows.rank = 1;
    rows.d[0] = n;
    ir::attributes along;
    along.push(0);
    const int iota = ir::make_node(out_, prim::iota_p, ir::dtype_code::s32, rows, {}, along);
    const int first = prim::build::mul(out_, index, prim::build::literal(out_, ir::dtype_code::s32, static_cast<double>(n)));
    const int at = prim::build::add(out_, iota, prim::build::broadcast_in_dim(out_, first, rows, {}));
    l.copy_dim(d, to, d);
    return prim::build::take(out_, x, at, d, prim::build::index_code::clip);
  }

  // x (laid out as `from`) laid out as `to`.
  constexpr int convert(int x, layout from, const layout& to) {
    const std::size_t rank = out_[x].shape.rank;
    const auto extra = static_cast<std::uint8_t>(from.pending & ~to.pending);
    if (extra != 0) {
      // A sum that ends split over exactly its axes: reduce-scatter, half the bytes of an all-reduce.
      std::size_t scatter = rank;
      for (std::size_t d = 0; d < rank; ++d)
        if (from.count[d] == 0 && to.count[d] != 0 && to.dim_mask(d) == extra) scatter = d;
      if (scatter < rank) {
        ir::attributes a = over(to.axes[scatter], to.count[scatter]);
        a.push(static_cast<std::int64_t>(scatter));
        a.push(1);  // tiled
        ir::dims s = out_[x].shape;
        s.d[scatter] /= splits(to, scatter);
        x = ir::make_node(out_, prim::psum_scatter_p, out_[x].dtype, s, {x}, a);
        from.pending = static_cast<std::uint8_t>(from.pending & ~extra);
        from.copy_dim(scatter, to, scatter);
      } else {
        x = sum_up(x, from, extra);
      }
    }
    for (std::size_t d = 0; d < rank; ++d)
      if (!from.same_dim(d, to, d) && from.count[d] != 0) x = gather(x, from, d);
    for (std::size_t d = 0; d < rank; ++d)
      if (!from.same_dim(d, to, d) && to.count[d] != 0) x = block(x, from, d, to);
    return x;
  }

  // f's node `op` laid out as `to`. Two kinds of node are made again at the wanted layout from their
  // operands rather than moved whole, because their operands are smaller or shared:
  //  - a broadcast, from its operand brought to the matching layout (a bias split for storage is gathered as
  //    f32[n], not as the f32[batch,n] it becomes; a whole one is broadcast at the block's shape);
  //  - a partial sum scaled or negated (linear), whose sum is wanted: its partial operand is summed instead,
  //    so that every use of one gradient (optax's mu and nu both read it) shares one reduce-scatter.
  constexpr int operand_as(int op, const layout& to) {
    const auto o = static_cast<std::size_t>(op);
    const ir::node& n = in_[op];
    bool same = lay_[o].pending == to.pending;
    for (std::size_t d = 0; d < n.shape.rank; ++d) same = same && lay_[o].same_dim(d, to, d);
    if (same) return id_[o];
    if (n.prim == &prim::broadcast_in_dim_p && to.pending == 0) {
      const ir::node& src = in_[n.operands[0]];
      layout want;
      std::array<std::int64_t, ir::max_rank> dims{};
      for (std::size_t k = 0; k < n.attr.count; ++k) {
        dims[k] = n.attr.ints[k];
        if (src.shape.d[k] != 1) want.copy_dim(k, to, static_cast<std::size_t>(dims[k]));
      }
      return prim::build::broadcast_in_dim(out_, operand_as(n.operands[0], want), local_dims(n.shape, to), dims);
    }
    if (n.prim == &prim::iota_p && to.pending == 0 && to.count[static_cast<std::size_t>(n.attr.ints[0])] == 0)
      return prim::batching::emit_like(out_, n, {-1, -1, -1}, local_dims(n.shape, to));  // counting along a whole dimension
    std::uint8_t pending = 0;
    if ((lay_[o].pending & ~to.pending) != 0 && n.prim != &prim::add_p && n.prim != &prim::sub_p && linear_in_pending(n, pending)) {
      std::array<int, ir::max_operands> ops{-1, -1, -1};
      for (std::size_t k = 0; k < n.arity; ++k) ops[k] = operand_as(n.operands[k], to);
      return prim::batching::emit_like(out_, n, ops, local_dims(n.shape, to));
    }
    remember_scatter(o, to);
    return convert(id_[o], lay_[o], to);
  }

  // Where a partial sum is reduce-scattered, remember the split it got: a later use that must add the same
  // sum up (a square of a gradient) takes that split rather than all-reducing it again.
  constexpr void remember_scatter(std::size_t o, const layout& to) {
    const layout& from = lay_[o];
    const auto extra = static_cast<std::uint8_t>(from.pending & ~to.pending);
    if (extra == 0 || scattered_[o].split_mask(in_[static_cast<int>(o)].shape.rank) != 0) return;
    for (std::size_t d = 0; d < in_[static_cast<int>(o)].shape.rank; ++d)
      if (from.count[d] == 0 && to.count[d] != 0 && to.dim_mask(d) == extra) {
        scattered_[o] = from;
        scattered_[o].pending = 0;
        scattered_[o].copy_dim(d, to, d);
        return;
      }
  }

  // ---- errors ----------------------------------------------------------------------------------------

  constexpr void fail(const message_builder& m) {
    failed_ = true;
    out_.report_error(m.view());
  }

  // ---- the rules -------------------------------------------------------------------------------------

  constexpr void emit(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    switch (n.prim->kind) {
      case ir::prim_kind::parameter:
        return;  // bound
      case ir::prim_kind::literal:
        return done(i, out_.add(n), layout{});
      case ir::prim_kind::elementwise:
        return elementwise(i);
      case ir::prim_kind::broadcast:
        return broadcast(i);
      case ir::prim_kind::reshape:
        return reshape(i);
      case ir::prim_kind::layout:
        if (n.prim == &prim::transpose_p) return transpose(i);
        return whole(i);
      case ir::prim_kind::reduce:
        if (n.prim == &prim::reduce_sum_p || n.prim == &prim::reduce_max_p || n.prim == &prim::reduce_min_p) return reduction(i);
        if (n.prim == &prim::argmax_p) return local_reduction(i);
        return whole(i);
      case ir::prim_kind::contraction:
        if (n.prim == &prim::dot_general_p) return dot(i);
        return whole(i);
      case ir::prim_kind::region_parameter:
      case ir::prim_kind::control:
        return fail(message_builder{} << "tessel::jit (with shardings): f runs a scan or a cond, which the partitioner does not split "
                                         "over devices; fix: write that part with tessel::shard_map (each device runs the loop on its "
                                         "block, with explicit collectives), or run f with plain jit");
      default:
        return whole(i);
    }
  }

  constexpr void done(std::size_t i, int local, const layout& l) {
    id_[i] = local;
    lay_[i] = l;
  }

  // Its operands whole on every device, then the node as written.
  constexpr void whole(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    std::array<int, ir::max_operands> ops{-1, -1, -1};
    for (std::size_t k = 0; k < n.arity; ++k) ops[k] = operand_as(n.operands[k], layout{});
    done(i, prim::batching::emit_like(out_, n, ops, n.shape), layout{});
  }

  constexpr bool linear_in_pending(const ir::node& n, std::uint8_t& pending) const {
    auto p = [&](std::size_t k) { return lay_[static_cast<std::size_t>(n.operands[k])].pending; };
    if (n.prim == &prim::neg_p) return (pending = p(0)) != 0;
    if ((n.prim == &prim::add_p || n.prim == &prim::sub_p) && p(0) != 0 && p(0) == p(1)) return (pending = p(0)), true;
    if (n.prim == &prim::mul_p && (p(0) == 0) != (p(1) == 0)) return (pending = static_cast<std::uint8_t>(p(0) | p(1))), true;
    if (n.prim == &prim::div_p && p(0) != 0 && p(1) == 0) return (pending = p(0)), true;
    return false;
  }

  constexpr void elementwise(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    const std::size_t rank = n.shape.rank;
    // Computed values' splits first; an argument's (a storage choice) yields to them where they clash, and
    // is gathered there. A clash between two computed values, or two arguments, is ambiguous.
    layout target;
    std::uint8_t computed = 0;  // axes of the target's splits that computed values chose
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t k = 0; k < n.arity; ++k) {
        const bool argument = is_argument(n.operands[k]);
        if (argument != (pass == 1)) continue;
        const layout& l = lay_[static_cast<std::size_t>(n.operands[k])];
        for (std::size_t d = 0; d < rank; ++d) {
          if (l.count[d] == 0 || target.same_dim(d, l, d)) continue;
          const bool open = target.count[d] == 0 && (target.split_mask(rank) & l.dim_mask(d)) == 0;
          if (open) {
            target.copy_dim(d, l, d);
            if (!argument) computed = static_cast<std::uint8_t>(computed | l.dim_mask(d));
            continue;
          }
          const std::uint8_t against = static_cast<std::uint8_t>(target.dim_mask(d) | (target.split_mask(rank) & l.dim_mask(d)));
          if (argument && (against & ~computed) == 0) continue;  // yields: gathered below
          message_builder m;
          m << "tessel::jit (with shardings): " << n.prim->name << " got incompatible shardings: ";
          for (std::size_t j = 0; j < n.arity; ++j)
            append_typed(m << (j ? " and " : ""), mesh_, in_[n.operands[j]], lay_[static_cast<std::size_t>(n.operands[j])]);
          m << " split dimension " << static_cast<std::uint64_t>(d)
            << " differently, and which layout the result takes is ambiguous; fix: give the arguments in_shardings that split "
             "their common dimensions alike (a whole dimension takes either split)";
          return fail(m);
        }
      }
    std::uint8_t pending = 0;
    if (linear_in_pending(n, pending)) {
      target.pending = static_cast<std::uint8_t>(pending & ~target.split_mask(rank));
    } else {
      // A partial sum this operation must add up, which another use has reduce-scattered already: take that
      // split (each device then works on its block) rather than all-reduce the sum a second time.
      for (std::size_t k = 0; k < n.arity; ++k) {
        const layout& s = scattered_[static_cast<std::size_t>(n.operands[k])];
        for (std::size_t d = 0; d < rank; ++d)
          if (s.count[d] != 0 && target.count[d] == 0 && (target.split_mask(rank) & s.dim_mask(d)) == 0) target.copy_dim(d, s, d);
      }
    }
    std::array<int, ir::max_operands> ops{-1, -1, -1};
    for (std::size_t k = 0; k < n.arity; ++k) {
      layout want = target;
      want.pending = lay_[static_cast<std::size_t>(n.operands[k])].pending & target.pending;
      ops[k] = operand_as(n.operands[k], want);
    }
    done(i, prim::batching::emit_like(out_, n, ops, local_dims(n.shape, target)), target);
  }

  constexpr void broadcast(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    const auto op = static_cast<std::size_t>(n.operands[0]);
    const layout& l = lay_[op];
    layout target;
    target.pending = l.pending;
    std::array<std::int64_t, ir::max_rank> dims{};
    int x = id_[op];
    layout from = l;
    for (std::size_t k = 0; k < n.attr.count; ++k) {
      dims[k] = n.attr.ints[k];
      if (in_[n.operands[0]].shape.d[k] != n.shape.d[static_cast<std::size_t>(dims[k])] && from.count[k] != 0) x = gather(x, from, k);
      target.copy_dim(static_cast<std::size_t>(dims[k]), from, k);
    }
    done(i, prim::build::broadcast_in_dim(out_, x, local_dims(n.shape, target), dims), target);
  }

  constexpr void transpose(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    const auto op = static_cast<std::size_t>(n.operands[0]);
    layout target;
    target.pending = lay_[op].pending;
    std::array<std::size_t, ir::max_rank> perm{};
    for (std::size_t d = 0; d < n.shape.rank; ++d) {
      perm[d] = static_cast<std::size_t>(n.attr.ints[d]);
      target.copy_dim(d, lay_[op], perm[d]);
    }
    done(i, prim::build::transpose(out_, id_[op], perm), target);
  }

  // A split dimension d of the operand goes to the result dimension e that starts at the same element
  // (the same product of the dimensions before it) when e is d with dimensions after it merged in, or d's
  // leading part that the split still divides; otherwise it is gathered first.
  constexpr void reshape(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    const auto op = static_cast<std::size_t>(n.operands[0]);
    const ir::dims& from_shape = in_[n.operands[0]].shape;
    layout from = lay_[op];
    int x = id_[op];
    layout target;
    target.pending = from.pending;
    for (std::size_t d = 0; d < from_shape.rank; ++d) {
      if (from.count[d] == 0) continue;
      std::size_t before = 1;
      for (std::size_t j = 0; j < d; ++j) before *= from_shape.d[j];
      const std::size_t k = splits(from, d);
      bool placed = false;
      std::size_t prefix = 1;
      for (std::size_t e = 0; e < n.shape.rank && !placed; prefix *= n.shape.d[e], ++e) {
        if (prefix != before || n.shape.d[e] == 1) continue;
        const std::size_t a = from_shape.d[d], b = n.shape.d[e];
        bool ok = b >= a ? b % a == 0 : a % b == 0 && b % k == 0;
        if (ok && b > a) {  // merged: the dimensions merged in after d must be whole and end exactly at e's end
          std::size_t covered = a;
          std::size_t j = d + 1;
          while (covered < b && j < from_shape.rank) {
            ok = ok && from.count[j] == 0;
            covered *= from_shape.d[j++];
          }
          ok = ok && covered == b;
        }
        if (ok) {
          target.copy_dim(e, from, d);
          placed = true;
        }
      }
      if (!placed) x = gather(x, from, d);
    }
    const ir::dims shape = local_dims(n.shape, target);
    if (shape.size() != out_[x].shape.size()) {  // not expected by the rule above; whole arrays are always right
      for (std::size_t d = 0; d < from_shape.rank; ++d)
        if (from.count[d] != 0) x = gather(x, from, d);
      target = layout{};
      target.pending = from.pending;
    }
    done(i, prim::build::reshape(out_, x, local_dims(n.shape, target)), target);
  }

  constexpr void reduction(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    const auto op = static_cast<std::size_t>(n.operands[0]);
    const std::array<bool, ir::max_rank> reduced = prim::build::reduced_axes(n);
    layout from = lay_[op];
    int x = id_[op];
    const bool sum = n.prim == &prim::reduce_sum_p;
    if (!sum) x = sum_up(x, from, from.pending);
    layout target;
    target.pending = from.pending;
    std::uint8_t across = 0;  // axes of the reduced dimensions: the devices' results still to combine
    std::size_t e = 0;
    for (std::size_t d = 0; d < in_[n.operands[0]].shape.rank; ++d) {
      if (reduced[d]) across = static_cast<std::uint8_t>(across | from.dim_mask(d));
      else target.copy_dim(e++, from, d);
    }
    int r = prim::build::reduce(out_, *n.prim, x, reduced);
    if (sum) {
      target.pending = static_cast<std::uint8_t>(target.pending | across);
    } else if (across != 0) {
      r = ir::make_node(out_, n.prim == &prim::reduce_max_p ? prim::pmax_p : prim::pmin_p, out_[r].dtype, out_[r].shape, {r}, over_mask(across));
    }
    done(i, r, target);
  }

  // A reduction that no sum can combine across devices (argmax): each device's own rows when the reduced
  // dimensions are whole there, else on the whole array.
  constexpr void local_reduction(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    const auto op = static_cast<std::size_t>(n.operands[0]);
    const std::array<bool, ir::max_rank> reduced = prim::build::reduced_axes(n);
    layout target;
    std::size_t e = 0;
    for (std::size_t d = 0; d < in_[n.operands[0]].shape.rank; ++d) {
      if (reduced[d] && lay_[op].count[d] != 0) return whole(i);
      if (!reduced[d]) target.copy_dim(e++, lay_[op], d);
    }
    layout from = lay_[op];
    from.pending = 0;
    done(i, prim::batching::emit_like(out_, n, {operand_as(n.operands[0], from), -1, -1}, local_dims(n.shape, target)), target);
  }

  // An argument of f, maybe transposed, reshaped, broadcast or cast (a bf16 copy of f32 master weights).
  constexpr bool is_argument(int x) const {
    while (in_[x].prim == &prim::transpose_p || in_[x].prim == &prim::reshape_p || in_[x].prim == &prim::convert_element_type_p ||
           in_[x].prim == &prim::broadcast_in_dim_p)
      x = in_[x].operands[0];
    return in_[x].prim->kind == ir::prim_kind::parameter;
  }
  static constexpr std::uint8_t lhs_kept(const layout& l, const prim::build::dot_dims& dd, std::size_t rank) {
    std::uint8_t m = 0;
    for (std::size_t a = 0; a < rank; ++a)
      if (!prim::build::contains(dd.lc, dd.nc, a)) m = static_cast<std::uint8_t>(m | l.dim_mask(a));
    return m;
  }

  constexpr void dot(std::size_t i) {
    const ir::node& n = in_[static_cast<int>(i)];
    const auto lo = static_cast<std::size_t>(n.operands[0]), ro = static_cast<std::size_t>(n.operands[1]);
    dot_after_gather(i, id_[lo], lay_[lo], id_[ro], lay_[ro]);
  }

  // The contraction of l and r (laid out as lf, rf, f's operands of node i or gathered parts of them).
  constexpr void dot_after_gather(std::size_t i, int l, layout lf, int r, layout rf) {
    const ir::node& n = in_[static_cast<int>(i)];
    const prim::build::dot_dims dd = prim::build::dims_of_dot(n);
    const auto lo = static_cast<std::size_t>(n.operands[0]), ro = static_cast<std::size_t>(n.operands[1]);
    l = sum_up(l, lf, lf.pending);
    r = sum_up(r, rf, rf.pending);
    std::uint8_t pending = 0;
    for (std::size_t c = 0; c < dd.nc; ++c) {
      const std::size_t a = dd.lc[c], b = dd.rc[c];
      if (lf.same_dim(a, rf, b)) {
        pending = static_cast<std::uint8_t>(pending | lf.dim_mask(a));  // case 3: each device's share of the sum
        continue;
      }
      if (lf.count[a] != 0) l = gather(l, lf, a);  // case 2 (or two different splits: both gathered)
      if (rf.count[b] != 0) r = gather(r, rf, b);
    }
    for (std::size_t c = 0; c < dd.nb; ++c)
      if (!lf.same_dim(dd.lb[c], rf, dd.rb[c])) {
        if (lf.count[dd.lb[c]] != 0) l = gather(l, lf, dd.lb[c]);
        if (rf.count[dd.rb[c]] != 0) r = gather(r, rf, dd.rb[c]);
      }
    // The result: batch dimensions, lhs free, rhs free.
    layout target;
    target.pending = pending;
    std::size_t e = 0;
    for (std::size_t c = 0; c < dd.nb; ++c) target.copy_dim(e++, lf, dd.lb[c]);
    const ir::node& ln = in_[n.operands[0]];
    const ir::node& rn = in_[n.operands[1]];
    for (std::size_t a = 0; a < ln.shape.rank; ++a)
      if (!prim::build::contains(dd.lc, dd.nc, a) && !prim::build::contains(dd.lb, dd.nb, a)) target.copy_dim(e++, lf, a);
    const std::size_t first_rhs = e;
    for (std::size_t b = 0; b < rn.shape.rank; ++b)
      if (!prim::build::contains(dd.rc, dd.nc, b) && !prim::build::contains(dd.rb, dd.nb, b)) target.copy_dim(e++, rf, b);
    // Case 4: one axis splitting a kept dimension of each side. An argument of f (a weight split for storage,
    // as fully sharded data parallelism does) is gathered, as its use elsewhere needed anyway; between two
    // intermediate values, or two arguments, which to gather is the user's choice.
    for (std::size_t d = first_rhs; d < e; ++d) {
      const std::uint8_t clash = static_cast<std::uint8_t>(target.dim_mask(d) & lhs_kept(lf, dd, ln.shape.rank));
      if (clash == 0) continue;
      const bool left = is_argument(n.operands[0]), right = is_argument(n.operands[1]);
      if (left != right) {
        layout& side = left ? lf : rf;
        int& x = left ? l : r;
        for (std::size_t a = 0; a < (left ? ln : rn).shape.rank; ++a)
          if (side.dim_mask(a) & clash) x = gather(x, side, a);
        return dot_after_gather(i, l, lf, r, rf);
      }
      message_builder msg;
      msg << "tessel::jit (with shardings): dot_general of ";
      append_typed(msg, mesh_, ln, lay_[lo]) << " and ";
      append_typed(msg, mesh_, rn, lay_[ro]) << ": both are split over ";
      prim::collective::append_axes(msg, mesh_, clash)
          << " in dimensions the result keeps, so each device would hold only diagonal blocks of the result; fix: give one "
             "operand an in_sharding that leaves that dimension whole, or split the two over different mesh axes";
      return fail(msg);
    }
    done(i, prim::build::dot_general(out_, l, r, dd), target);
  }
};

}  // namespace tessel::partition_detail
