#pragma once
// Value-level constructors: what transform rules (VJP, JVP, batching) use to emit nodes whose shapes
// are known only as values during tracing. The primitives that rules name are declared here and defined
// in their own files, so a rule can name any of them without include cycles (sin's rule uses cos and
// cos's uses sin; broadcast_in_dim's uses reduce_sum and the reverse); a primitive no other rule names
// need not be. Rules only take addresses; the descriptors are read when a program is planned.
//
// Each primitive's header ends by including prim/all.hpp, which includes them all: an inline variable must be
// defined in every translation unit that declares it (C++20 [dcl.inline]/6, no diagnostic required), so
// a program that includes one primitive's header sees every definition. At its end, the header's own
// descriptor is defined, and the others need only its address.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "tessel/ir/graph.hpp"

namespace tessel::prim {

extern const ir::primitive abs_p, add_p, argmax_p, broadcast_in_dim_p, concatenate_p, conv_filter_grad_p, conv_general_p,
    conv_input_grad_p, convert_element_type_p, cos_p, div_p, dot_general_p, eq_p, erf_p, erf_inv_p, exp_p, expm1_p,
    floor_p, ge_p, gt_p, iota_p, le_p, literal_p, log_p, log1p_p, logistic_p, lt_p, max_p, min_p, mul_p, ne_p, neg_p,
    pad_p, parameter_p, pow_p, reduce_max_p, reduce_min_p, reduce_sum_p, reduce_window_max_p, reduce_window_sum_p,
    reduce_window_sum_transpose_p, reshape_p, rsqrt_p, scatter_add_p, select_and_gather_add_p, select_and_scatter_add_p,
    select_p, sign_p, sin_p, slice_p, sqrt_p, sub_p, take_p, tanh_p, transpose_p, stop_gradient_p, optimization_barrier_p,
    remat_p, region_parameter_p, control_p, materialize_p, psum_p, pvary_p, pmax_p, pmin_p, all_gather_p, psum_scatter_p,
    ppermute_p, all_to_all_p, axis_index_p;

namespace build {

constexpr const ir::node& at(const ir::graph_builder& g, int id) { return g[id]; }

// The literal a node stands for (a literal or a broadcast of one), or -1.
constexpr int literal_behind(const ir::graph_builder& g, int id) {
  const ir::node& n = g[id];
  if (n.prim == &literal_p) return id;
  if (n.prim == &broadcast_in_dim_p && g[n.operands[0]].prim == &literal_p) return n.operands[0];
  return -1;
}

constexpr int literal(ir::graph_builder& g, ir::dtype_code dtype, double value);
constexpr int scalar_like(ir::graph_builder& g, int x, double value);

// Arithmetic on two constants is done here, at trace time (derivative rules produce much of it).
constexpr bool fold(const ir::primitive& p, double a, double b, double& out) {
  if (&p == &add_p) out = a + b;
  else if (&p == &sub_p) out = a - b;
  else if (&p == &mul_p) out = a * b;
  else if (&p == &div_p && b != 0) out = a / b;
  else return false;
  return true;
}

// Elementwise on operands of one shape; the result has the first operand's dtype and shape.
constexpr int unary(ir::graph_builder& g, const ir::primitive& p, int x) {
  if (&p == &neg_p && ir::is_floating(g[x].dtype) && literal_behind(g, x) >= 0)
    return scalar_like(g, x, -g[literal_behind(g, x)].attr.scalar);
  return ir::make_node(g, p, g[x].dtype, g[x].shape, {x});
}
constexpr int binary(ir::graph_builder& g, const ir::primitive& p, int a, int b) {
  const int la = literal_behind(g, a), lb = literal_behind(g, b);
  double folded = 0;
  if (la >= 0 && lb >= 0 && ir::is_floating(g[a].dtype) && fold(p, g[la].attr.scalar, g[lb].attr.scalar, folded))
    return scalar_like(g, a, g[a].dtype == ir::dtype_code::f32 ? static_cast<double>(static_cast<float>(folded)) : folded);
  // x * 1 and 1 * x are x.
  if (&p == &mul_p && lb >= 0 && g[lb].attr.scalar == 1.0) return a;
  if (&p == &mul_p && la >= 0 && g[la].attr.scalar == 1.0) return b;
  return ir::make_node(g, p, g[a].dtype, g[a].shape, {a, b});
}
constexpr int compare(ir::graph_builder& g, const ir::primitive& p, int a, int b) {
  return ir::make_node(g, p, ir::dtype_code::pred, g[a].shape, {a, b});
}

constexpr int literal(ir::graph_builder& g, ir::dtype_code dtype, double value) {
  ir::attributes a;
  a.scalar = value;
  return ir::make_node(g, literal_p, dtype, ir::dims{}, {}, a);
}

// x broadcast to `shape`: operand axis i becomes result axis dims[i].
constexpr int broadcast_in_dim(ir::graph_builder& g, int x, const ir::dims& shape, const std::array<std::int64_t, ir::max_rank>& dims) {
  if (g[x].shape == shape) return x;
  ir::attributes a;
  for (std::size_t i = 0; i < g[x].shape.rank; ++i) a.push(dims[i]);
  return ir::make_node(g, broadcast_in_dim_p, g[x].dtype, shape, {x}, a);
}

// A scalar of x's dtype spread over x's shape.
constexpr int scalar_like(ir::graph_builder& g, int x, double value) {
  // x's shape copied first: literal() adds a node, which may move the table that a reference into it
  // points to, and a call's arguments are evaluated in no fixed order.
  const ir::dims shape = g[x].shape;
  const int one = literal(g, g[x].dtype, value);
  return broadcast_in_dim(g, one, shape, {});
}

constexpr int add(ir::graph_builder& g, int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return binary(g, add_p, a, b);
}
constexpr int sub(ir::graph_builder& g, int a, int b) { return binary(g, sub_p, a, b); }
constexpr int mul(ir::graph_builder& g, int a, int b) { return binary(g, mul_p, a, b); }
constexpr int div(ir::graph_builder& g, int a, int b) { return binary(g, div_p, a, b); }
constexpr int neg(ir::graph_builder& g, int a) { return unary(g, neg_p, a); }
constexpr int scale(ir::graph_builder& g, int a, double factor) { return mul(g, a, scalar_like(g, a, factor)); }
constexpr int select(ir::graph_builder& g, int p, int a, int b) { return ir::make_node(g, select_p, g[a].dtype, g[a].shape, {p, a, b}, {}, ir::dtype_code::pred); }
constexpr int zeros_like(ir::graph_builder& g, int x) { return scalar_like(g, x, 0.0); }

constexpr int convert(ir::graph_builder& g, int x, ir::dtype_code to) {
  if (g[x].dtype == to) return x;
  return ir::make_node(g, convert_element_type_p, to, g[x].shape, {x});
}

constexpr int reshape(ir::graph_builder& g, int x, const ir::dims& shape) {
  if (g[x].shape == shape) return x;
  return ir::make_node(g, reshape_p, g[x].dtype, shape, {x});
}

// Result axis i is x's axis perm[i].
constexpr int transpose(ir::graph_builder& g, int x, const std::array<std::size_t, ir::max_rank>& perm) {
  const ir::dims& s = g[x].shape;
  bool identity = true;
  ir::dims out;
  out.rank = s.rank;
  ir::attributes a;
  for (std::size_t i = 0; i < s.rank; ++i) {
    identity = identity && perm[i] == i;
    out.d[i] = s.d[perm[i]];
    a.push(static_cast<std::int64_t>(perm[i]));
  }
  if (identity) return x;
  return ir::make_node(g, transpose_p, g[x].dtype, out, {x}, a);
}

// Sum over `axes` (a set, any order); no axes: x itself.
constexpr int reduce(ir::graph_builder& g, const ir::primitive& p, int x, std::array<bool, ir::max_rank> reduced) {
  const ir::dims& s = g[x].shape;
  ir::dims out;
  ir::attributes a;
  for (std::size_t i = 0; i < s.rank; ++i) {
    if (reduced[i]) a.push(static_cast<std::int64_t>(i));
    else out.d[out.rank++] = s.d[i];
  }
  if (a.count == 0) return x;
  return ir::make_node(g, p, g[x].dtype, out, {x}, a);
}

// Spreads r (x reduced over `reduced` axes) back over x's shape.
constexpr int unreduce(ir::graph_builder& g, int r, const ir::dims& shape, const std::array<bool, ir::max_rank>& reduced) {
  std::array<std::int64_t, ir::max_rank> dims{};
  std::size_t j = 0;
  for (std::size_t i = 0; i < shape.rank; ++i)
    if (!reduced[i]) dims[j++] = static_cast<std::int64_t>(i);
  return broadcast_in_dim(g, r, shape, dims);
}

// The reduced-axes set a reduce node's attributes name.
constexpr std::array<bool, ir::max_rank> reduced_axes(const ir::node& n) {
  std::array<bool, ir::max_rank> r{};
  for (std::size_t i = 0; i < n.attr.count; ++i) r[static_cast<std::size_t>(n.attr.ints[i])] = true;
  return r;
}

// ---- slice, pad, concatenate at value level ---------------------------------------------------

using offsets = std::array<std::int64_t, ir::max_rank>;

// Elements start[a] + i * stride[a] of x along every axis a, giving `shape` (lax.slice).
constexpr int slice(ir::graph_builder& g, int x, const offsets& start, const offsets& stride, const ir::dims& shape) {
  const ir::dims& s = g[x].shape;
  bool identity = shape == s;
  ir::attributes a;
  for (std::size_t i = 0; i < s.rank; ++i) {
    identity = identity && start[i] == 0;
    a.push(start[i]);
  }
  for (std::size_t i = 0; i < s.rank; ++i) a.push(stride[i]);
  if (identity) return x;
  return ir::make_node(g, slice_p, g[x].dtype, shape, {x}, a);
}

// x spread into `shape` with `value` (a scalar node) around and between: element i of axis a lands at
// lo[a] + i * (interior[a] + 1); a negative lo crops (lax.pad; the high padding follows from `shape`).
constexpr int pad(ir::graph_builder& g, int x, int value, const offsets& lo, const offsets& interior, const ir::dims& shape) {
  const ir::dims& s = g[x].shape;
  bool identity = shape == s;
  ir::attributes a;
  for (std::size_t i = 0; i < s.rank; ++i) {
    identity = identity && lo[i] == 0 && interior[i] == 0;
    a.push(lo[i]);
  }
  for (std::size_t i = 0; i < s.rank; ++i) a.push(interior[i]);
  if (identity) return x;
  return ir::make_node(g, pad_p, g[x].dtype, shape, {x, value}, a);
}

// Two or three operands joined along `axis` (lax.concatenate; longer lists nest).
constexpr int concatenate(ir::graph_builder& g, const std::array<int, ir::max_operands>& xs, std::size_t count, std::size_t axis) {
  ir::dims shape = g[xs[0]].shape;
  for (std::size_t k = 1; k < count; ++k) shape.d[axis] += g[xs[k]].shape.d[axis];
  ir::attributes a;
  a.push(static_cast<std::int64_t>(axis));
  if (count == 2) return ir::make_node(g, concatenate_p, g[xs[0]].dtype, shape, {xs[0], xs[1]}, a);
  return ir::make_node(g, concatenate_p, g[xs[0]].dtype, shape, {xs[0], xs[1], xs[2]}, a);
}

// ---- take and scatter_add at value level -----------------------------------------------------------

// How take and scatter_add treat an index outside [0, n) of an axis of size n (attr.ints[1]).
// fill: an index in [-n, 0) counts from the end (i + n); any other out-of-range index takes the fill
//   value (take) or drops its update (scatter_add). fill_zero: the same with 0 as the fill value (the
//   derivative rules' take). clip: the index is clamped into [0, n - 1] (negative ones become 0).
enum class index_code : std::int64_t { fill = 0, clip = 1, fill_zero = 2 };

// x's elements at `indices` (s32, any shape) along `axis`: x.shape[:axis] + indices.shape + x.shape[axis+1:].
constexpr int take(ir::graph_builder& g, int x, int indices, std::size_t axis, index_code mode) {
  const ir::dims& s = g[x].shape;
  const ir::dims& is = g[indices].shape;
  ir::dims out;
  for (std::size_t a = 0; a < axis; ++a) out.d[out.rank++] = s.d[a];
  for (std::size_t a = 0; a < is.rank; ++a) out.d[out.rank++] = is.d[a];
  for (std::size_t a = axis + 1; a < s.rank; ++a) out.d[out.rank++] = s.d[a];
  ir::attributes a;
  a.push(static_cast<std::int64_t>(axis));
  a.push(static_cast<std::int64_t>(mode));
  return ir::make_node(g, take_p, g[x].dtype, out, {x, indices}, a);
}

// x with `updates` (shaped as take's result) added at `indices` along `axis`; repeated indices add up.
// mode: fill (an update whose index is out of range is dropped) or clip.
constexpr int scatter_add(ir::graph_builder& g, int x, int indices, int updates, std::size_t axis, index_code mode) {
  ir::attributes a;
  a.push(static_cast<std::int64_t>(axis));
  a.push(static_cast<std::int64_t>(mode == index_code::clip ? index_code::clip : index_code::fill));
  return ir::make_node(g, scatter_add_p, g[x].dtype, g[x].shape, {x, indices, updates}, a);
}

// ---- dot_general at value level: the shape rule and the GEMM-readable layouts ---------------------

struct dot_dims {
  std::array<std::size_t, ir::max_rank> lc{}, rc{}, lb{}, rb{};
  std::size_t nc = 0, nb = 0;
};

constexpr bool contains(const std::array<std::size_t, ir::max_rank>& a, std::size_t n, std::size_t v) {
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] == v) return true;
  return false;
}

// [batch..., free..., contracting...] when contract_last, else [batch..., contracting..., free...].
constexpr std::array<std::size_t, ir::max_rank> canonical_order(std::size_t rank, const std::array<std::size_t, ir::max_rank>& batch,
                                                                 std::size_t nb, const std::array<std::size_t, ir::max_rank>& contract,
                                                                 std::size_t nc, bool contract_last) {
  std::array<std::size_t, ir::max_rank> order{};
  std::size_t j = 0;
  for (std::size_t i = 0; i < nb; ++i) order[j++] = batch[i];
  if (contract_last)
    for (std::size_t a = 0; a < rank; ++a)
      if (!contains(contract, nc, a) && !contains(batch, nb, a)) order[j++] = a;
  for (std::size_t i = 0; i < nc; ++i) order[j++] = contract[i];
  if (!contract_last)
    for (std::size_t a = 0; a < rank; ++a)
      if (!contains(contract, nc, a) && !contains(batch, nb, a)) order[j++] = a;
  return order;
}

constexpr bool is_identity(const std::array<std::size_t, ir::max_rank>& p, std::size_t rank) {
  for (std::size_t i = 0; i < rank; ++i)
    if (p[i] != i) return false;
  return true;
}

// The result shape: batch dims, lhs free dims, rhs free dims.
constexpr ir::dims dot_result_shape(const ir::dims& l, const ir::dims& r, const dot_dims& d) {
  ir::dims out;
  for (std::size_t i = 0; i < d.nb; ++i) out.d[out.rank++] = l.d[d.lb[i]];
  for (std::size_t a = 0; a < l.rank; ++a)
    if (!contains(d.lc, d.nc, a) && !contains(d.lb, d.nb, a)) out.d[out.rank++] = l.d[a];
  for (std::size_t a = 0; a < r.rank; ++a)
    if (!contains(d.rc, d.nc, a) && !contains(d.rb, d.nb, a)) out.d[out.rank++] = r.d[a];
  return out;
}

// What is wrong with contracting l and r with these axes (dot_general's one shape rule, with
// dot_result_shape: the typed check in prim/dot_general.hpp reports it at the user's call, naming the
// shapes). 0: nothing; 2: an axis is out of range or named twice; 3: contracting sizes differ; 4: batch
// sizes differ. (1, lhs and rhs naming different numbers of axes, cannot be written as a dot_dims.)
constexpr int dot_problem(const ir::dims& l, const ir::dims& r, const dot_dims& d) {
  std::array<bool, ir::max_rank> lu{}, ru{};
  auto use = [](std::array<bool, ir::max_rank>& used, std::size_t axis, std::size_t rank) {
    if (axis >= rank || used[axis]) return false;
    used[axis] = true;
    return true;
  };
  for (std::size_t i = 0; i < d.nc; ++i)
    if (!use(lu, d.lc[i], l.rank)) return 2;
  for (std::size_t i = 0; i < d.nb; ++i)
    if (!use(lu, d.lb[i], l.rank)) return 2;
  for (std::size_t i = 0; i < d.nc; ++i)
    if (!use(ru, d.rc[i], r.rank)) return 2;
  for (std::size_t i = 0; i < d.nb; ++i)
    if (!use(ru, d.rb[i], r.rank)) return 2;
  for (std::size_t i = 0; i < d.nc; ++i)
    if (l.d[d.lc[i]] != r.d[d.rc[i]]) return 3;
  for (std::size_t i = 0; i < d.nb; ++i)
    if (l.d[d.lb[i]] != r.d[d.rb[i]]) return 4;
  return 0;
}

// Whether an operand of this rank with these batch and contracting axes is a strided GEMM view.
constexpr bool gemm_view(std::size_t rank, const std::array<std::size_t, ir::max_rank>& batch, std::size_t nb,
                         const std::array<std::size_t, ir::max_rank>& contract, std::size_t nc) {
  return is_identity(canonical_order(rank, batch, nb, contract, nc, false), rank) ||
         is_identity(canonical_order(rank, batch, nb, contract, nc, true), rank);
}

// The operand `id` of a dot with these batch and contracting axes read through its source, when it is a
// transpose (XLA's transpose folding): the axes are renamed to the source's, in place, and the source
// returned, when the source is then a strided GEMM view and the free axes keep their order (so the
// result's layout is the same); otherwise id. matmul(transpose(a), b) then reads a with no transposed
// copy: AMD EPYC (Zen 4), 1 thread, a 1024 x 512 A^T B by 1024 x 128 ran at 0.46x oneDNN with the
// copy, 0.88x without.
constexpr int read_through_transpose(const ir::graph_builder& g, int id, std::array<std::size_t, ir::max_rank>& batch,
                                     std::size_t nb, std::array<std::size_t, ir::max_rank>& contract, std::size_t nc) {
  const ir::node& t = g[id];
  if (t.prim != &transpose_p) return id;
  const std::size_t rank = t.shape.rank;
  auto source_axis = [&](std::size_t a) { return static_cast<std::size_t>(t.attr.ints[a]); };  // result axis a is source axis perm[a]
  std::array<std::size_t, ir::max_rank> b{}, c{};
  for (std::size_t i = 0; i < nb; ++i) b[i] = source_axis(batch[i]);
  for (std::size_t i = 0; i < nc; ++i) c[i] = source_axis(contract[i]);
  for (std::size_t a = 0, next = 0; a < rank; ++a) {  // the free axes, in order, must stay in order
    if (contains(batch, nb, a) || contains(contract, nc, a)) continue;
    if (source_axis(a) < next) return id;
    next = source_axis(a) + 1;
  }
  if (!gemm_view(rank, b, nb, c, nc)) return id;
  batch = b;
  contract = c;
  return t.operands[0];
}

// Emits dot_general(lhs, rhs), transposing an operand first when no strided GEMM view of it exists.
// attr: [nb, nc, lhs batch..., rhs batch..., lhs contracting..., rhs contracting...] after any transpose.
constexpr int dot_general(ir::graph_builder& g, int lhs_in, int rhs_in, const dot_dims& given) {
  dot_dims d = given;
  const int lhs = read_through_transpose(g, lhs_in, d.lb, d.nb, d.lc, d.nc);
  const int rhs = read_through_transpose(g, rhs_in, d.rb, d.nb, d.rc, d.nc);
  const ir::dims out = dot_result_shape(g[lhs].shape, g[rhs].shape, d);
  const std::size_t lr = g[lhs].shape.rank, rr = g[rhs].shape.rank;
  auto lp = canonical_order(lr, d.lb, d.nb, d.lc, d.nc, false);
  if (!is_identity(lp, lr)) lp = canonical_order(lr, d.lb, d.nb, d.lc, d.nc, true);
  auto rp = canonical_order(rr, d.rb, d.nb, d.rc, d.nc, true);
  if (!is_identity(rp, rr)) rp = canonical_order(rr, d.rb, d.nb, d.rc, d.nc, false);
  const int l = transpose(g, lhs, lp);
  const int r = transpose(g, rhs, rp);
  auto moved = [](const std::array<std::size_t, ir::max_rank>& order, std::size_t rank, std::size_t axis) {
    for (std::size_t p = 0; p < rank; ++p)
      if (order[p] == axis) return static_cast<std::int64_t>(p);
    return std::int64_t{-1};
  };
  ir::attributes a;
  a.push(static_cast<std::int64_t>(d.nb));
  a.push(static_cast<std::int64_t>(d.nc));
  for (std::size_t i = 0; i < d.nb; ++i) a.push(moved(lp, lr, d.lb[i]));
  for (std::size_t i = 0; i < d.nb; ++i) a.push(moved(rp, rr, d.rb[i]));
  for (std::size_t i = 0; i < d.nc; ++i) a.push(moved(lp, lr, d.lc[i]));
  for (std::size_t i = 0; i < d.nc; ++i) a.push(moved(rp, rr, d.rc[i]));
  return ir::make_node(g, dot_general_p, g[lhs].dtype, out, {l, r}, a);
}

// The dimension numbers a dot_general node was emitted with (in its operands' current layout).
constexpr dot_dims dims_of_dot(const ir::node& n) {
  dot_dims d;
  d.nb = static_cast<std::size_t>(n.attr.ints[0]);
  d.nc = static_cast<std::size_t>(n.attr.ints[1]);
  for (std::size_t i = 0; i < d.nb; ++i) d.lb[i] = static_cast<std::size_t>(n.attr.ints[2 + i]);
  for (std::size_t i = 0; i < d.nb; ++i) d.rb[i] = static_cast<std::size_t>(n.attr.ints[2 + d.nb + i]);
  for (std::size_t i = 0; i < d.nc; ++i) d.lc[i] = static_cast<std::size_t>(n.attr.ints[2 + 2 * d.nb + i]);
  for (std::size_t i = 0; i < d.nc; ++i) d.rc[i] = static_cast<std::size_t>(n.attr.ints[2 + 2 * d.nb + d.nc + i]);
  return d;
}

}  // namespace build
}  // namespace tessel::prim
