#pragma once
// reshape<To> (lax.reshape): the same elements in row-major order under a shape of equal size.
// It moves no data: a materialised operand is reused as the result's buffer.

#include <array>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {
constexpr void reshape_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = build::reshape(g, ct, g[n.operands[0]].shape);
}
constexpr int reshape_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  return t[0] < 0 ? -1 : build::reshape(g, t[0], g[node].shape);
}

// vmap: the batch axis to the front, then every element's reshape at once.
constexpr int reshape_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                            const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const auto b = static_cast<std::size_t>(axes[0]);
  const std::size_t size = g[ops[0]].shape.d[b];
  out_axis = 0;
  return build::reshape(g, batching::move_axis(g, ops[0], b, 0), batching::insert_axis(n.shape, 0, size));
}

inline void lower_reshape(ir::stablehlo_writer& w) { w.lower_as("stablehlo.reshape"); }
inline constexpr ir::primitive reshape_p{.name = "reshape", .kind = ir::prim_kind::reshape, .vjp = &reshape_vjp,
                                         .jvp = &reshape_jvp, .batch = &reshape_batch, .flops_per_element = 0, .lower = &lower_reshape};
}  // namespace prim

template <class To, Traced X>
constexpr auto reshape(X x) {
  static_assert(Shape<To>, "tessel::reshape<To>: To must be a tessel::shape<...>");
  using T = typename X::value_type;
  if constexpr (std::is_same_v<typename X::shape_type, To>) {
    return x;
  } else if constexpr (reshapable_v<X, To>) {
    return ir::emit<T, To>(x.graph, prim::reshape_p, {x.id});
  } else {
    return tracer<T, To>{x.graph, x.id};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class To, Tensor X>
auto reshape(const X& x) {
  return eagerly([](auto x) { return reshape<To>(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
