#pragma once
// broadcast_in_dim (lax.broadcast_in_dim): operand axis i becomes result axis Dims[i]; each operand dim
// equals its result dim or is 1. It moves no data: kernels read through it as an index map.
//
//   broadcast_in_dim<shape<4, 3>, 1>(b)     // f32[3] -> f32[4,3], b along the last axis
//   broadcast_to<shape<4, 3>>(b)            // the NumPy rule: axes aligned from the right

#include <array>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {

// The cotangent sums over every result axis the operand was spread along (new axes and size-1 axes).
constexpr void broadcast_in_dim_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const ir::dims operand = g[n.operands[0]].shape;
  std::array<bool, ir::max_rank> summed{};
  for (std::size_t i = 0; i < n.shape.rank; ++i) summed[i] = true;
  for (std::size_t i = 0; i < operand.rank; ++i) {
    const auto axis = static_cast<std::size_t>(n.attr.ints[i]);
    summed[axis] = operand.d[i] != n.shape.d[axis];
  }
  out[0] = build::reshape(g, build::reduce(g, reduce_sum_p, ct, summed), operand);
}
constexpr int broadcast_in_dim_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  if (t[0] < 0) return -1;
  const ir::node n = g[node];
  std::array<std::int64_t, ir::max_rank> dims{};
  for (std::size_t i = 0; i < n.attr.count; ++i) dims[i] = n.attr.ints[i];
  return build::broadcast_in_dim(g, t[0], n.shape, dims);
}

// vmap: the batch axis goes right after the result axis of the operand axis before it, so the
// broadcast dimensions stay increasing and no transpose is needed.
constexpr int broadcast_in_dim_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                                     const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const auto b = static_cast<std::size_t>(axes[0]);
  const std::size_t size = g[ops[0]].shape.d[b];
  const std::size_t p = b == 0 ? 0 : static_cast<std::size_t>(n.attr.ints[b - 1]) + 1;
  std::array<std::int64_t, ir::max_rank> dims{};
  for (std::size_t i = 0; i < n.attr.count; ++i) {
    const auto d = static_cast<std::size_t>(n.attr.ints[i]);
    dims[i < b ? i : i + 1] = static_cast<std::int64_t>(d < p ? d : d + 1);
  }
  dims[b] = static_cast<std::int64_t>(p);
  out_axis = static_cast<int>(p);
  return build::broadcast_in_dim(g, ops[0], batching::insert_axis(n.shape, p, size), dims);
}

inline void lower_broadcast_in_dim(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  w.lower_as("stablehlo.broadcast_in_dim", ir::hlo_properties{}.i64s("broadcast_dimensions", {n.attr.ints.data(), n.attr.count}));
}
inline constexpr ir::primitive broadcast_in_dim_p{.name = "broadcast_in_dim",
                                                  .kind = ir::prim_kind::broadcast,
                                                  .vjp = &broadcast_in_dim_vjp,
                                                  .jvp = &broadcast_in_dim_jvp,
                                                  .batch = &broadcast_in_dim_batch,
                                                  .flops_per_element = 0, .lower = &lower_broadcast_in_dim};

template <class X, class Out, std::size_t... Dims>
consteval bool check_broadcast_in_dim() {
  using in = typename X::shape_type;
  constexpr std::array<std::size_t, sizeof...(Dims)> d{Dims...};
  constexpr bool ok = [] {
    constexpr std::array<std::size_t, sizeof...(Dims)> dd{Dims...};
    if (dd.size() != in::rank) return false;
    for (std::size_t i = 0; i < dd.size(); ++i) {
      if (dd[i] >= Out::rank || (i > 0 && dd[i] <= dd[i - 1])) return false;
      if (in::dims[i] != 1 && in::dims[i] != Out::dims[dd[i]]) return false;
    }
    return true;
  }();
  if constexpr (!ok) {
    raise<fit<[] {
      constexpr std::array<std::size_t, sizeof...(Dims)> dd{Dims...};
      message_builder m;
      m << "tessel::broadcast_in_dim: cannot broadcast ";
      append_type<X>(m) << " to ";
      append_dims<Out::rank>(m, Out::dims) << " with broadcast_dimensions (";
      for (std::size_t i = 0; i < dd.size(); ++i) m << (i ? "," : "") << static_cast<std::uint64_t>(dd[i]);
      m << ") (one strictly increasing result axis per operand axis, each operand dim equal to its result dim "
           "or 1); fix: list the result axis of every operand axis";
      return m;
    }>()>();
  }
  (void)d;
  return ok;
}

template <class Out, std::size_t... Dims, Traced X>
constexpr auto broadcast_in_dim_unchecked(X x) {
  ir::attributes a;
  (a.push(static_cast<std::int64_t>(Dims)), ...);
  return ir::emit<typename X::value_type, Out>(x.graph, broadcast_in_dim_p, {x.id}, a);
}

template <class Out, Traced X, std::size_t... I>
constexpr auto broadcast_trailing(X x, std::index_sequence<I...>) {
  return broadcast_in_dim_unchecked<Out, (Out::rank - X::rank + I)...>(x);
}

}  // namespace prim

template <class Out, std::size_t... Dims, Traced X>
constexpr auto broadcast_in_dim(X x) {
  static_assert(Shape<Out>, "tessel::broadcast_in_dim<Out, Dims...>: Out must be a tessel::shape<...>");
  if constexpr (prim::check_broadcast_in_dim<X, Out, Dims...>())
    return prim::broadcast_in_dim_unchecked<Out, Dims...>(x);
  else
    return tracer<typename X::value_type, Out>{x.graph, x.id};
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class Out, std::size_t... Dims, Tensor X>
auto broadcast_in_dim(const X& x) {
  return eagerly([](auto x) { return broadcast_in_dim<Out, Dims...>(x); }, x);
}

// NumPy's broadcast_to: axes aligned from the right. A no-op when the shape already matches.
template <class Out, Traced X>
constexpr auto broadcast_to(X x) {
  if constexpr (std::is_same_v<typename X::shape_type, Out>) {
    return x;
  } else if constexpr (broadcastable_to_v<typename X::shape_type, Out>) {
    return prim::broadcast_trailing<Out>(x, std::make_index_sequence<X::rank>{});
  } else {
    return tracer<typename X::value_type, Out>{x.graph, x.id};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class Out, Tensor X>
auto broadcast_to(const X& x) {
  return eagerly([](auto x) { return broadcast_to<Out>(x); }, x);
}

}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
