#pragma once
// Batching rules (vmap) shared by the primitives: value-level helpers that move, add and fold batch
// axes, and the rules of whole families (elementwise, reductions, the NHWC image kernels). A rule sees
// one node of the unbatched program and its operands in the batched one, each with its batch axis
// (-1: unbatched), and emits the batched node (ir::batch_fn in ir/graph.hpp).

#include <array>
#include <cstddef>
#include <cstdint>

#include "tessel/ir/graph.hpp"
#include "tessel/prim/build.hpp"

namespace tessel::prim::batching {

// The batch size: the size of the first batched operand's batch axis.
constexpr std::size_t batch_size(const ir::graph_builder& g, const std::array<int, ir::max_operands>& ops,
                                 const std::array<int, ir::max_operands>& axes, std::size_t arity) {
  for (std::size_t i = 0; i < arity; ++i)
    if (axes[i] >= 0) return g[ops[i]].shape.d[static_cast<std::size_t>(axes[i])];
  return 1;
}
constexpr int first_batched_axis(const std::array<int, ir::max_operands>& axes, std::size_t arity) {
  for (std::size_t i = 0; i < arity; ++i)
    if (axes[i] >= 0) return axes[i];
  return -1;
}

// `s` with a new axis of size n at `axis`.
constexpr ir::dims insert_axis(const ir::dims& s, std::size_t axis, std::size_t n) {
  ir::dims out;
  out.rank = static_cast<std::uint8_t>(s.rank + 1);
  for (std::size_t i = 0, j = 0; i < out.rank; ++i) out.d[i] = i == axis ? n : s.d[j++];
  return out;
}
constexpr ir::dims drop_axis(const ir::dims& s, std::size_t axis) {
  ir::dims out;
  out.rank = static_cast<std::uint8_t>(s.rank - 1);
  for (std::size_t i = 0, j = 0; i < s.rank; ++i)
    if (i != axis) out.d[j++] = s.d[i];
  return out;
}

// x with its axis `from` moved to position `to` (the other axes keep their order).
constexpr int move_axis(ir::graph_builder& g, int x, std::size_t from, std::size_t to) {
  if (from == to) return x;
  const std::size_t rank = g[x].shape.rank;
  std::array<std::size_t, ir::max_rank> perm{};
  for (std::size_t i = 0, j = 0; i < rank; ++i) {
    if (i == to) continue;
    if (j == from) ++j;
    perm[i] = j++;
  }
  perm[to] = from;
  return build::transpose(g, x, perm);
}

// An unbatched x spread over a new batch axis of size n at `axis` (a broadcast of a broadcast is one).
constexpr int broadcast_batch(ir::graph_builder& g, int x, std::size_t axis, std::size_t n) {
  const ir::node& xn = g[x];
  const ir::dims shape = insert_axis(xn.shape, axis, n);
  std::array<std::int64_t, ir::max_rank> dims{};
  if (xn.prim == &broadcast_in_dim_p) {
    const int y = xn.operands[0];
    for (std::size_t i = 0; i < g[y].shape.rank; ++i) {
      const auto d = static_cast<std::size_t>(xn.attr.ints[i]);
      dims[i] = static_cast<std::int64_t>(d < axis ? d : d + 1);
    }
    return build::broadcast_in_dim(g, y, shape, dims);
  }
  for (std::size_t i = 0; i < xn.shape.rank; ++i) dims[i] = static_cast<std::int64_t>(i < axis ? i : i + 1);
  return build::broadcast_in_dim(g, x, shape, dims);
}

// Operand i with its batch axis at `axis` (moved there, or added by broadcasting when unbatched).
constexpr int batched_at(ir::graph_builder& g, int x, int x_axis, std::size_t axis, std::size_t n) {
  if (x_axis < 0) return broadcast_batch(g, x, axis, n);
  return move_axis(g, x, static_cast<std::size_t>(x_axis), axis);
}

// x's batch axis `axis` moved to the front and merged into the (leading) axis after it: [B, N, ...] -> [B*N, ...].
constexpr int fold_into_leading(ir::graph_builder& g, int x, int x_axis, std::size_t n) {
  const int front = batched_at(g, x, x_axis, 0, n);
  ir::dims s = g[front].shape;
  ir::dims merged;
  merged.rank = static_cast<std::uint8_t>(s.rank - 1);
  merged.d[0] = s.d[0] * s.d[1];
  for (std::size_t i = 2; i < s.rank; ++i) merged.d[i - 1] = s.d[i];
  return build::reshape(g, front, merged);
}

// The node `n` emitted again with new operands and shape (its primitive, dtypes and attributes kept).
constexpr int emit_like(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& operands,
                        const ir::dims& shape) {
  ir::node m = n;
  m.operands = operands;
  m.shape = shape;
  return g.add(m);
}

// ---- family rules ---------------------------------------------------------------------------------

// Elementwise (every operand has the result's shape): batched operands meet at the first one's batch
// axis, unbatched ones are broadcast there; the node is applied once to the whole batch.
constexpr int elementwise(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                          const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const std::size_t b = static_cast<std::size_t>(first_batched_axis(axes, n.arity));
  const std::size_t size = batch_size(g, ops, axes, n.arity);
  std::array<int, ir::max_operands> moved{-1, -1, -1};
  for (std::size_t i = 0; i < n.arity; ++i) moved[i] = batched_at(g, ops[i], axes[i], b, size);
  out_axis = static_cast<int>(b);
  return emit_like(g, n, moved, insert_axis(n.shape, b, size));
}

// Reductions over listed axes (reduce_sum, reduce_max, reduce_min): the axes shift past the batch axis.
constexpr int reduction(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                        const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const auto b = static_cast<std::size_t>(axes[0]);
  std::array<bool, ir::max_rank> reduced{};
  std::size_t before = 0;
  for (std::size_t i = 0; i < n.attr.count; ++i) {
    const auto a = static_cast<std::size_t>(n.attr.ints[i]);
    reduced[a < b ? a : a + 1] = true;
    before += a < b;
  }
  out_axis = static_cast<int>(b - before);
  return build::reduce(g, *n.prim, ops[0], reduced);
}

// The NHWC image kernels (conv_general, conv_input_grad, pooling and its derivatives) whose result has
// the leading image axis N: the batch is folded into N ([B, N, ...] -> [B*N, ...]) for the operands
// marked `leading` (all of them must carry N), the node runs once, and N is split again. Operands not
// marked (a filter) must be unbatched; the caller checks that.
constexpr int fold_leading(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                           const std::array<int, ir::max_operands>& axes, const std::array<bool, ir::max_operands>& leading,
                           int& out_axis) {
  const std::size_t size = batch_size(g, ops, axes, n.arity);
  std::array<int, ir::max_operands> folded{-1, -1, -1};
  for (std::size_t i = 0; i < n.arity; ++i) folded[i] = leading[i] ? fold_into_leading(g, ops[i], axes[i], size) : ops[i];
  ir::dims shape = n.shape;
  shape.d[0] *= size;
  const int y = emit_like(g, n, folded, shape);
  out_axis = 0;
  return build::reshape(g, y, insert_axis(n.shape, 0, size));
}

// ---- the general fallback: one node per batch element ------------------------------------------------

// Element i of x's batch axis `axis` (a slice, then the axis dropped).
constexpr int take(ir::graph_builder& g, int x, std::size_t axis, std::size_t i) {
  const ir::dims s = g[x].shape;
  build::offsets start{}, stride{};
  for (std::size_t a = 0; a < s.rank; ++a) stride[a] = 1;
  start[axis] = static_cast<std::int64_t>(i);
  ir::dims one = s;
  one.d[axis] = 1;
  return build::reshape(g, build::slice(g, x, start, stride, one), drop_axis(s, axis));
}

// Applies n to each batch element separately and stacks the results along a new leading axis. Used
// only where no rule maps a whole batch onto one node (a per-example filter of a convolution).
constexpr int unrolled(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                       const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const std::size_t size = batch_size(g, ops, axes, n.arity);
  int result = -1;
  for (std::size_t i = 0; i < size;) {
    std::array<int, ir::max_operands> parts{-1, -1, -1};
    std::size_t count = 0;
    if (result >= 0) parts[count++] = result;
    for (; count < ir::max_operands && i < size; ++i) {
      std::array<int, ir::max_operands> in{-1, -1, -1};
      for (std::size_t k = 0; k < n.arity; ++k) in[k] = axes[k] < 0 ? ops[k] : take(g, ops[k], static_cast<std::size_t>(axes[k]), i);
      parts[count++] = build::reshape(g, emit_like(g, n, in, n.shape), insert_axis(n.shape, 0, 1));
    }
    result = count == 1 ? parts[0] : build::concatenate(g, parts, count, 0);
  }
  out_axis = 0;
  return result;
}

}  // namespace tessel::prim::batching
