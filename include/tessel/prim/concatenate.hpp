#pragma once
// concatenate (lax.concatenate): operands of one dtype joined along an axis; every other dim must match.
//
//   concatenate<0>(a, b)        // f32[2,3] and f32[4,3] -> f32[6,3]
//   concatenate<-1>(a, b, c)    // along the last axis
//
// A node joins two or three operands (a node's operand limit); longer lists nest. VJP: each operand
// gets its slice of the cotangent.

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/prim/family/layout.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {

// attr: the axis.
inline void run_concatenate(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  box_side to = dense_side(n.shape);
  for (std::size_t k = 0; k < n.arity; ++k) {
    const ir::dims& s = operands[k]->shape;
    copy_box(n.dtype, s.d, s.rank, dense_side(s), in[k], to, out);
    to.start[axis] += static_cast<std::ptrdiff_t>(s.d[axis]);
  }
}

constexpr void concatenate_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  build::offsets start{}, stride{};
  for (std::size_t a = 0; a < n.shape.rank; ++a) stride[a] = 1;
  for (std::size_t k = 0; k < n.arity; ++k) {
    const ir::dims s = g[n.operands[k]].shape;
    out[k] = build::slice(g, ct, start, stride, s);
    start[axis] += static_cast<std::int64_t>(s.d[axis]);
  }
}
constexpr int concatenate_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  std::array<int, ir::max_operands> parts{-1, -1, -1};
  for (std::size_t k = 0; k < n.arity; ++k) parts[k] = t[k] >= 0 ? t[k] : build::zeros_like(g, n.operands[k]);
  return build::concatenate(g, parts, n.arity, static_cast<std::size_t>(n.attr.ints[0]));
}

// vmap: the operands meet at one batch axis (unbatched ones broadcast there); the joined axis shifts past it.
constexpr int concatenate_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                                const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const auto b = static_cast<std::size_t>(batching::first_batched_axis(axes, n.arity));
  const std::size_t size = batching::batch_size(g, ops, axes, n.arity);
  std::array<int, ir::max_operands> moved{-1, -1, -1};
  for (std::size_t k = 0; k < n.arity; ++k) moved[k] = batching::batched_at(g, ops[k], axes[k], b, size);
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  out_axis = static_cast<int>(b);
  return build::concatenate(g, moved, n.arity, axis < b ? axis : axis + 1);
}

inline void lower_concatenate(ir::stablehlo_writer& w) {
  w.lower_as("stablehlo.concatenate", ir::hlo_properties{}.i64("dimension", w.current().attr.ints[0]));
}
inline constexpr ir::primitive concatenate_p{.name = "concatenate",
                                             .kind = ir::prim_kind::layout,
                                             .run = &run_concatenate,
                                             .vjp = &concatenate_vjp,
                                             .jvp = &concatenate_jvp,
                                             .batch = &concatenate_batch,
                                             .flops_per_element = 0, .lower = &lower_concatenate};
}  // namespace prim

// Two operands, or three, as one node.
template <long Axis, Traced A, Traced B, Traced... C>
  requires(sizeof...(C) <= 1)
constexpr auto concatenate(A a, B b, C... c) {
  using T = typename A::value_type;
  using AB = tensor_type<T, concat_t<Axis, A, B>>;
  using S = typename decltype([] {
    if constexpr (sizeof...(C) == 0) return std::type_identity<typename AB::shape_type>{};
    else return std::type_identity<concat_t<Axis, AB, std::tuple_element_t<0, std::tuple<C...>>>>{};
  }())::type;
  if constexpr (!(require_same_dtype<"tessel::concatenate", A, B>() && (require_same_dtype<"tessel::concatenate", A, C>() && ...)) ||
                S::rank != A::rank) {
    return tracer<T, S>{a.graph, -1};
  } else {
    constexpr std::size_t axis = normalize_axis<"tessel::concatenate", A, Axis>();
    return tracer<T, S>{a.graph, prim::build::concatenate(*a.graph, {a.id, b.id, c.id...}, 2 + sizeof...(C), axis)};
  }
}

// Four or more: the first three joined, then the rest.
template <long Axis, Traced A, Traced B, Traced C, Traced D, Traced... Rest>
constexpr auto concatenate(A a, B b, C c, D d, Rest... rest) {
  return concatenate<Axis>(concatenate<Axis>(a, b, c), d, rest...);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long Axis, Tensor A, Tensor... Rest>
auto concatenate(const A& a, const Rest&... rest) {
  return eagerly([](auto a, auto... rest) { return concatenate<Axis>(a, rest...); }, a, rest...);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
