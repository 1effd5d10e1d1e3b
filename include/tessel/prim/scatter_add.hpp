#pragma once
// scatter_add<Axis> (x.at[..., indices, ...].add(updates) along one axis, a lax.scatter_add): the
// operand with `updates` added at s32 indices of any shape; the transpose of take.
//
//   scatter_add<0>(zeros, ids, grads)   // f32[256,64], s32[8,128], f32[8,128,64] -> f32[256,64]
//   scatter_add<1>(x, ids, u)           // f32[3,5], s32[2], f32[3,2]: x[i, ids[j]] += u[i, j]
//
// updates has take's result shape: operand.shape[:Axis] + indices.shape + operand.shape[Axis+1:]; the
// result has the operand's. Repeated indices accumulate, in the order of the indices (row-major), so the
// result does not depend on threads. Out-of-range indices (axis of size n), as JAX's scatter modes:
//   index_mode::fill (the default, FILL_OR_DROP): an index in [-n, 0) counts from the end (i + n); the
//     update of any other index outside [0, n) is dropped.
//   index_mode::clip: the index is clamped into [0, n - 1].
// bf16 sums in f32 and rounds once; pred adds as logical or (XLA's add on pred); s32 and u32 wrap.
// Derivatives: the operand's cotangent is the cotangent; the updates' is take of the cotangent (0 at
// out-of-range indices); the indices have none. The tangent is scatter_add of the tangents.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tessel/core/bfloat16.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/prim/take.hpp"

namespace tessel {
namespace prim {

template <class Acc, class Add>
void scatter_rows(const axis_view& v, std::size_t m, const std::int32_t* idx, build::index_code mode, const Acc* u, Acc* y,
                  Add add) {
  for (std::size_t o = 0; o < v.outer; ++o)
    for (std::size_t j = 0; j < m; ++j) {
      const std::ptrdiff_t k = resolve_index(idx[j], v.n, mode);
      if (k < 0) continue;
      Acc* dst = y + (o * v.n + static_cast<std::size_t>(k)) * v.inner;
      const Acc* src = u + (o * m + j) * v.inner;
      for (std::size_t i = 0; i < v.inner; ++i) dst[i] = add(dst[i], src[i]);
    }
}

// attr: axis, index_code (fill or clip).
inline void run_scatter_add(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  const auto mode = static_cast<build::index_code>(n.attr.ints[1]);
  const axis_view v = view_around(n.shape, axis);
  const std::size_t m = operands[1]->shape.size(), total = n.shape.size();
  const auto* idx = static_cast<const std::int32_t*>(in[1]);
  std::memcpy(out, in[0], total * ir::bytes_of(n.dtype));
  const auto plus = [](auto a, auto b) { return static_cast<decltype(a)>(a + b); };
  switch (n.dtype) {
    case ir::dtype_code::f32:
      scatter_rows(v, m, idx, mode, static_cast<const float*>(in[2]), static_cast<float*>(out), plus);
      break;
    case ir::dtype_code::s32:  // wraps, as XLA's s32 add: summed as u32
    case ir::dtype_code::u32:
      scatter_rows(v, m, idx, mode, static_cast<const std::uint32_t*>(in[2]), static_cast<std::uint32_t*>(out), plus);
      break;
    case ir::dtype_code::pred:
      scatter_rows(v, m, idx, mode, static_cast<const bool*>(in[2]), static_cast<bool*>(out),
                   [](bool a, bool b) { return a || b; });
      break;
    case ir::dtype_code::bf16: {
      const auto* x = static_cast<const bfloat16*>(in[0]);
      const auto* u = static_cast<const bfloat16*>(in[2]);
      std::vector<float> acc(total), updates(operands[2]->shape.size());
      for (std::size_t i = 0; i < total; ++i) acc[i] = static_cast<float>(x[i]);
      for (std::size_t i = 0; i < updates.size(); ++i) updates[i] = static_cast<float>(u[i]);
      scatter_rows(v, m, idx, mode, updates.data(), acc.data(), plus);
      auto* y = static_cast<bfloat16*>(out);
      for (std::size_t i = 0; i < total; ++i) y[i] = bfloat16(acc[i]);
      break;
    }
  }
}

constexpr void scatter_add_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = ct;
  out[2] = build::take(g, ct, n.operands[1], static_cast<std::size_t>(n.attr.ints[0]),
                       derivative_mode(static_cast<build::index_code>(n.attr.ints[1])));
}
constexpr int scatter_add_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  if (t[0] < 0 && t[2] < 0) return -1;
  const ir::node n = g[node];
  const int x = t[0] >= 0 ? t[0] : build::zeros_like(g, n.operands[0]);
  const int u = t[2] >= 0 ? t[2] : build::zeros_like(g, n.operands[2]);
  return build::scatter_add(g, x, n.operands[1], u, static_cast<std::size_t>(n.attr.ints[0]),
                            static_cast<build::index_code>(n.attr.ints[1]));
}

// vmap: with shared indices, the operand and the updates meet at a leading batch axis (a shared one is
// broadcast there) and the scatter runs past it; batched indices: one scatter per batch element.
constexpr int scatter_add_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                                const std::array<int, ir::max_operands>& axes, int& out_axis) {
  if (axes[1] >= 0) return batching::unrolled(g, n, ops, axes, out_axis);
  const std::size_t size = batching::batch_size(g, ops, axes, n.arity);
  const int x = batching::batched_at(g, ops[0], axes[0], 0, size);
  const int u = batching::batched_at(g, ops[2], axes[2], 0, size);
  out_axis = 0;
  return build::scatter_add(g, x, ops[1], u, static_cast<std::size_t>(n.attr.ints[0]) + 1,
                            static_cast<build::index_code>(n.attr.ints[1]));
}

// StableHLO: indices resolved as take's (an index still outside the axis is dropped by stablehlo.scatter,
// as fill drops it), the updates added (or, for pred); bf16 summed in f32 and rounded once.
inline void lower_scatter_add(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  const auto mode = static_cast<build::index_code>(n.attr.ints[1]);
  const std::size_t r = w.operand_node(1).shape.rank;
  const ir::hlo_value k = resolved_indices(w, 1, n.shape.d[axis], mode, nullptr);
  const ir::dtype_code acc = n.dtype == ir::dtype_code::bf16 ? ir::dtype_code::f32 : n.dtype;
  auto widened = [&](std::size_t i) { return acc == n.dtype ? w.operand(i) : w.convert(w.operand(i), acc, w.operand_node(i).shape); };
  const std::string scalar = ir::hlo_type(acc, {});
  ir::hlo_region add{{scalar, scalar}, [&](const std::vector<ir::hlo_value>& a) {
                       return std::vector<ir::hlo_value>{w.emit(acc == ir::dtype_code::pred ? "stablehlo.or" : "stablehlo.add", {a[0], a[1]}, {}, scalar)};
                     }};
  ir::hlo_properties p;
  p.add("indices_are_sorted", "false")
      .add("scatter_dimension_numbers", "#stablehlo.scatter<update_window_dims = " + dim_list(axis, r, n.shape.rank) + ", inserted_window_dims = [" +
                                            std::to_string(axis) + "], scatter_dims_to_operand_dims = [" + std::to_string(axis) +
                                            "], index_vector_dim = " + std::to_string(r) + ">")
      .add("unique_indices", "false");
  const ir::hlo_value sum = w.emit("stablehlo.scatter", {widened(0), k, widened(2)}, p, {ir::hlo_type(acc, n.shape)}, {add}).front();
  w.define(acc == n.dtype ? sum : w.convert(sum, n.dtype, n.shape));
}
inline constexpr ir::primitive scatter_add_p{.name = "scatter_add",
                                             .kind = ir::prim_kind::layout,
                                             .run = &run_scatter_add,
                                             .vjp = &scatter_add_vjp,
                                             .jvp = &scatter_add_jvp,
                                             .batch = &scatter_add_batch, .lower = &lower_scatter_add};

// True, or a compile error naming the three operands: the updates must have take's result shape.
template <class X, class I, class U, long Axis, class Want>
consteval bool require_update_shape() {
  constexpr bool ok = std::is_same_v<typename U::shape_type, Want>;
  if constexpr (!ok) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::scatter_add: the updates ";
      append_type<U>(m) << " do not fit ";
      append_type<X>(m) << " indexed by ";
      append_type<I>(m) << " along axis " << static_cast<std::int64_t>(Axis)
                        << " (updates must have the shape operand[:axis] + indices + operand[axis+1:], here ";
      append_type<Want>(m) << "); fix: reshape or broadcast the updates to that shape";
      return m;
    }>()>();
  }
  return ok;
}
}  // namespace prim

// scatter_add<Axis, Mode>(x, indices, updates): x with updates added at the s32 `indices` along Axis
// (see the top of this file).
template <long Axis, index_mode Mode = index_mode::fill, Traced X, Traced I, Traced U>
constexpr auto scatter_add(X x, I indices, U updates) {
  using T = typename X::value_type;
  using S = typename X::shape_type;
  using Want = typename decltype(prim::taken_shape<"tessel::scatter_add", X, I, Axis>())::type;
  if constexpr (!prim::require_s32_indices<"tessel::scatter_add", X, I, Axis>() || X::rank == 0 ||
                Want::rank + 1 != X::rank + I::rank || !require_same_dtype<"tessel::scatter_add", X, U>()) {
    return tracer<T, S>{x.graph, -1};
  } else if constexpr (!prim::require_update_shape<X, I, U, Axis, Want>()) {
    return tracer<T, S>{x.graph, -1};
  } else {
    constexpr std::size_t axis = normalize_axis<"tessel::scatter_add", X, Axis>();
    return tracer<T, S>{x.graph, prim::build::scatter_add(*x.graph, x.id, indices.id, updates.id, axis, prim::code_of(Mode))};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long Axis, index_mode Mode = index_mode::fill, Tensor X, Tensor I, Tensor U>
auto scatter_add(const X& x, const I& indices, const U& updates) {
  return eagerly([](auto x, auto indices, auto updates) { return scatter_add<Axis, Mode>(x, indices, updates); }, x, indices, updates);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
