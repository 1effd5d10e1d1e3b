#pragma once
// take<Axis> (jnp.take along one axis, a lax.gather): the operand's slices at s32 indices of any shape.
//
//   take<0>(table, ids)     // f32[256,64] and s32[8,128] -> f32[8,128,64]  (an embedding lookup)
//   take<1>(x, ids)         // f32[3,5] and s32[2] -> f32[3,2]: result[i, j] = x[i, ids[j]]
//   take<0, index_mode::clip>(x, ids)
//
// Result shape: operand.shape[:Axis] + indices.shape + operand.shape[Axis+1:]. Out-of-range indices,
// for an axis of size n, as jnp.take (checked in tests/backend/gather_test.cpp):
//   index_mode::fill (the default, JAX's mode=None / "fill"): an index in [-n, 0) counts from the end
//     (i + n); any other index outside [0, n) gives the fill value: NaN for f32 and bf16, the lowest
//     s32 (-2^31), the largest u32, true for pred (jnp.take's defaults).
//   index_mode::clip: the index is clamped into [0, n - 1] (a negative one gives element 0, as NumPy's clip).
// Derivatives (as JAX's gather): the operand's cotangent is scatter_add of the cotangent into zeros of
// the operand's shape (an out-of-range index sends nothing back; clip sends it to the clamped element);
// the tangent is take of the tangent with 0 at out-of-range indices. The indices have no derivative.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {

// What take and scatter_add do with an index outside its axis (prim/build.hpp's index_code documents both).
enum class index_mode : std::uint8_t { fill, clip };

namespace prim {

// The element an index names along an axis of size n, or -1 (filled, or its update dropped).
constexpr std::ptrdiff_t resolve_index(std::int32_t i, std::size_t n, build::index_code mode) {
  const auto size = static_cast<std::ptrdiff_t>(n);
  std::ptrdiff_t k = i;
  if (mode == build::index_code::clip) return k < 0 ? 0 : k >= size ? size - 1 : k;
  if (k < 0) k += size;
  return k >= 0 && k < size ? k : -1;
}

// The operand viewed as [outer, n, inner] around the axis.
struct axis_view {
  std::size_t outer = 1, n = 1, inner = 1;
};
constexpr axis_view view_around(const ir::dims& s, std::size_t axis) {
  axis_view v;
  for (std::size_t a = 0; a < axis; ++a) v.outer *= s.d[a];
  v.n = s.d[axis];
  for (std::size_t a = axis + 1; a < s.rank; ++a) v.inner *= s.d[a];
  return v;
}

// What an out-of-range index gives: JAX's invalid value per dtype (NaN, the lowest s32, the largest u32,
// true), or zero in the derivative rules' mode. run_take writes it, the lowering selects it.
inline double fill_value(ir::dtype_code dtype, build::index_code mode) {
  if (mode != build::index_code::fill) return 0;
  switch (dtype) {
    case ir::dtype_code::f32:
    case ir::dtype_code::bf16: return std::numeric_limits<double>::quiet_NaN();
    case ir::dtype_code::s32: return std::numeric_limits<std::int32_t>::min();
    case ir::dtype_code::u32: return std::numeric_limits<std::uint32_t>::max();
    case ir::dtype_code::pred: return 1;
  }
  return 0;
}

// The bytes of one fill element (a quiet NaN converts to 0x7fc00000 in f32, 0x7fc0 in bf16).
inline void fill_element(ir::dtype_code dtype, build::index_code mode, unsigned char* out) {
  const double value = fill_value(dtype, mode);
  visit_dtype(dtype, [&]<class T>(T) {
    const T element = static_cast<T>(value);
    std::memcpy(out, &element, sizeof(T));
  });
}

// attr: axis, index_code. Each index copies one contiguous row of `inner` elements.
inline void run_take(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  const auto mode = static_cast<build::index_code>(n.attr.ints[1]);
  const axis_view v = view_around(operands[0]->shape, axis);
  const std::size_t m = operands[1]->shape.size();
  const std::size_t bytes = ir::bytes_of(n.dtype), row = v.inner * bytes;
  const auto* x = static_cast<const unsigned char*>(in[0]);
  const auto* idx = static_cast<const std::int32_t*>(in[1]);
  auto* y = static_cast<unsigned char*>(out);
  unsigned char fill[4];
  fill_element(n.dtype, mode, fill);
  for (std::size_t o = 0; o < v.outer; ++o)
    for (std::size_t j = 0; j < m; ++j) {
      unsigned char* dst = y + (o * m + j) * row;
      const std::ptrdiff_t k = resolve_index(idx[j], v.n, mode);
      if (k >= 0) {
        std::memcpy(dst, x + (o * v.n + static_cast<std::size_t>(k)) * row, row);
      } else {
        for (std::size_t i = 0; i < v.inner; ++i) std::memcpy(dst + i * bytes, fill, bytes);
      }
    }
}

// The derivative rules' mode: fill becomes fill_zero (nothing flows through an out-of-range index).
constexpr build::index_code derivative_mode(build::index_code mode) {
  return mode == build::index_code::clip ? build::index_code::clip : build::index_code::fill_zero;
}

constexpr void take_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  const int zeros = build::zeros_like(g, n.operands[0]);
  out[0] = build::scatter_add(g, zeros, n.operands[1], ct, axis, static_cast<build::index_code>(n.attr.ints[1]));
}
constexpr int take_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  if (t[0] < 0) return -1;
  const ir::node n = g[node];
  return build::take(g, t[0], n.operands[1], static_cast<std::size_t>(n.attr.ints[0]),
                     derivative_mode(static_cast<build::index_code>(n.attr.ints[1])));
}

// vmap: a batched operand (indices shared) takes along the axis past its batch axis, moved to the front;
// batched indices (operand shared) put the batch among the index dims; both batched: one take per
// batch element (each element's indices address its own operand).
constexpr int take_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                         const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  const auto mode = static_cast<build::index_code>(n.attr.ints[1]);
  if (axes[0] >= 0 && axes[1] >= 0) return batching::unrolled(g, n, ops, axes, out_axis);
  if (axes[0] >= 0) {
    const int x = batching::move_axis(g, ops[0], static_cast<std::size_t>(axes[0]), 0);
    out_axis = 0;
    return build::take(g, x, ops[1], axis + 1, mode);
  }
  out_axis = static_cast<int>(axis) + axes[1];
  return build::take(g, ops[0], ops[1], axis, mode);
}

// ---- export: indices resolved as above, then one stablehlo.gather (or scatter) of rows along the axis ---

// The s32 indices as the gather reads them: counted from the end where negative (fill), clamped (clip),
// with one index vector axis of size 1 at the end. `valid` is set to where fill keeps the row (null: clip).
inline ir::hlo_value resolved_indices(ir::stablehlo_writer& w, std::size_t operand, std::size_t n, build::index_code mode, ir::hlo_value* valid) {
  constexpr ir::dtype_code s32 = ir::dtype_code::s32, pred = ir::dtype_code::pred;
  const ir::dims is = w.operand_node(operand).shape;
  const std::string t = ir::hlo_type(s32, is), p = ir::hlo_type(pred, is);
  const ir::hlo_value idx = w.operand(operand);
  const auto size = static_cast<double>(n);
  ir::hlo_value k;
  if (mode == build::index_code::clip) {
    k = w.emit("stablehlo.clamp", {w.constant(s32, 0), idx, w.constant(s32, size - 1)}, {}, t);
  } else {
    const ir::hlo_value negative = w.compare(idx, w.constant(s32, 0, is), s32, "LT", p);
    k = w.emit("stablehlo.select", {negative, w.emit("stablehlo.add", {idx, w.constant(s32, size, is)}, {}, t), idx}, {}, t);
    if (valid)
      *valid = w.emit("stablehlo.and", {w.compare(k, w.constant(s32, 0, is), s32, "GE", p), w.compare(k, w.constant(s32, size, is), s32, "LT", p)}, {}, p);
  }
  ir::dims vector = is;
  vector.d[vector.rank++] = 1;
  return w.emit("stablehlo.reshape", {k}, {}, ir::hlo_type(s32, vector));
}
inline std::string dim_list(std::size_t axis, std::size_t index_rank, std::size_t rank) {  // every axis but the indices'
  std::string s = "[";
  for (std::size_t a = 0, first = 1; a < rank + index_rank - 1; ++a)
    if (a < axis || a >= axis + index_rank) s += (first-- ? "" : ", ") + std::to_string(a);
  return s + "]";
}
inline void lower_take(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const ir::node& x = w.operand_node(0);
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  const auto mode = static_cast<build::index_code>(n.attr.ints[1]);
  const std::size_t r = w.operand_node(1).shape.rank;
  ir::hlo_value valid;
  const ir::hlo_value k = resolved_indices(w, 1, x.shape.d[axis], mode, mode == build::index_code::clip ? nullptr : &valid);
  std::array<std::int64_t, ir::max_rank> sizes{};
  for (std::size_t a = 0; a < x.shape.rank; ++a) sizes[a] = a == axis ? 1 : static_cast<std::int64_t>(x.shape.d[a]);
  ir::hlo_properties p;
  p.add("dimension_numbers", "#stablehlo.gather<offset_dims = " + dim_list(axis, r, x.shape.rank) + ", collapsed_slice_dims = [" +
                                 std::to_string(axis) + "], start_index_map = [" + std::to_string(axis) + "], index_vector_dim = " + std::to_string(r) + ">")
      .add("indices_are_sorted", "false")
      .i64s("slice_sizes", {sizes.data(), x.shape.rank});
  const ir::hlo_value rows = w.emit("stablehlo.gather", {w.operand(0), k}, p, w.result_type());
  if (mode == build::index_code::clip) return w.define(rows);
  std::array<std::int64_t, ir::max_rank> at{};
  for (std::size_t a = 0; a < r; ++a) at[a] = static_cast<std::int64_t>(axis + a);
  const ir::hlo_value kept = w.emit("stablehlo.broadcast_in_dim", {valid}, ir::hlo_properties{}.i64s("broadcast_dimensions", {at.data(), r}),
                                    ir::hlo_type(ir::dtype_code::pred, n.shape));
  w.define(w.emit("stablehlo.select", {kept, rows, w.constant(n.dtype, fill_value(n.dtype, mode), n.shape)}, {}, w.result_type()));
}
inline constexpr ir::primitive take_p{.name = "take",
                                      .kind = ir::prim_kind::layout,
                                      .run = &run_take,
                                      .vjp = &take_vjp,
                                      .jvp = &take_jvp,
                                      .batch = &take_batch,
                                      .flops_per_element = 0, .lower = &lower_take};

// The shape rule shared by take and scatter_add: X's dims around the axis with I's dims in its place.
template <fixed_string Op, class X, class I, long Axis>
consteval bool require_s32_indices() {
  constexpr bool ok = std::is_same_v<typename I::value_type, std::int32_t>;
  if constexpr (!ok) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": the indices ";
      append_type<I>(m) << " into ";
      append_type<X>(m) << " along axis " << static_cast<std::int64_t>(Axis)
                        << " are not s32 (indices must be s32); fix: convert_element_type<std::int32_t>(indices)";
      return m;
    }>()>();
  }
  return ok;
}

template <class X, class I, std::size_t AxisIndex>
consteval auto taken_dims() {
  using S = typename X::shape_type;
  using IS = typename I::shape_type;
  dims_t<S::rank - 1 + IS::rank> out{};
  std::size_t r = 0;
  for (std::size_t a = 0; a < AxisIndex; ++a) out[r++] = S::dims[a];
  for (std::size_t a = 0; a < IS::rank; ++a) out[r++] = IS::dims[a];
  for (std::size_t a = AxisIndex + 1; a < S::rank; ++a) out[r++] = S::dims[a];
  return out;
}

// The result shape of take<Axis>(X, I) (a compile error, naming the shapes, if the axis is out of range
// or the operand is a scalar).
template <fixed_string Op, class X, class I, long Axis>
consteval auto taken_shape() {
  if constexpr (X::rank == 0) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": cannot index the scalar ";
      append_type<X>(m) << " along axis " << static_cast<std::int64_t>(Axis)
                        << " (the operand needs at least one axis); fix: reshape it to [1] first";
      return m;
    }>()>();
    return std::type_identity<typename I::shape_type>{};
  } else {
    constexpr std::size_t axis = normalize_axis<Op, X, Axis>();
    if constexpr (axis >= X::rank) return std::type_identity<typename I::shape_type>{};
    else return std::type_identity<shape_from<taken_dims<X, I, axis>()>>{};
  }
}

constexpr build::index_code code_of(index_mode mode) {
  return mode == index_mode::clip ? build::index_code::clip : build::index_code::fill;
}
}  // namespace prim

// take<Axis, Mode>(x, indices): x's slices at the s32 `indices` along Axis (see the top of this file).
template <long Axis, index_mode Mode = index_mode::fill, Traced X, Traced I>
constexpr auto take(X x, I indices) {
  using T = typename X::value_type;
  using S = typename decltype(prim::taken_shape<"tessel::take", X, I, Axis>())::type;
  if constexpr (!prim::require_s32_indices<"tessel::take", X, I, Axis>() || X::rank == 0 ||
                S::rank + 1 != X::rank + I::rank) {
    return tracer<T, S>{x.graph, -1};
  } else {
    constexpr std::size_t axis = normalize_axis<"tessel::take", X, Axis>();
    return tracer<T, S>{x.graph, prim::build::take(*x.graph, x.id, indices.id, axis, prim::code_of(Mode))};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long Axis, index_mode Mode = index_mode::fill, Tensor X, Tensor I>
auto take(const X& x, const I& indices) {
  return eagerly([](auto x, auto indices) { return take<Axis, Mode>(x, indices); }, x, indices);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
