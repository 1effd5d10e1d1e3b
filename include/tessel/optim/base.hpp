#pragma once
// What every optimizer shares (optax's base.py and update.py): the optimizer protocol, the step
// count, zeros like a tree, safe_increment and apply_updates. (The learning rate, a number or a
// schedule, is in optim/schedule.hpp.)
//
// An optimizer is an empty type (so that jit, which compiles stateless functions, can call it). Its
// hyper-parameters are template arguments, folded into the program, e.g. adam<1e-3, adam_options{.b2 =
// 0.99}>, or run-time values kept in its state (optim/injected.hpp: injected::adam and the others):
//
//   state            = opt.init(params)                  // a tree: std::tuple of (count, ...)
//   [updates, state] = opt.update(grads, state, params)  // params only where the optimizer needs them
//   params           = tessel::optim::apply_updates(params, updates)
//
// Inside a traced function (leaves are tracers) these build the program; called with tensors they
// are jitted on the spot, like grad. States are std::tuples whose first leaf is the step count (s32[],
// optax's int32 count), so they are jit arguments and results and can be written to checkpoints;
// read them with structured bindings (`auto& [count, mu, nu] = state;`).

#include <bit>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>

#include "tessel/core/real.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/add.hpp"
#include "tessel/prim/broadcast_in_dim.hpp"
#include "tessel/prim/convert_element_type.hpp"
#include "tessel/prim/literal.hpp"
#include "tessel/prim/lt.hpp"
#include "tessel/prim/select.hpp"
#include "tessel/jit.hpp"

namespace tessel::optim {

// Hyper-parameters are template arguments of type real (core/real.hpp): `.b1 = 0.9` converts.
using tessel::real;

// The step count of a state whose parameters are P: s32[], a tracer while P's leaves are tracers.
template <class P>
using count_t = std::conditional_t<tessel::detail::is_traced_tree<P>(), tracer<std::int32_t, shape<>>,
                                   tensor<std::int32_t, shape<>>>;

namespace detail {

template <class... X>
inline constexpr bool all_traced = (tessel::detail::is_traced_tree<X>() && ...);

template <class X>
constexpr ir::graph_builder* graph_of(const X& x) {
  ir::graph_builder* g = nullptr;
  tree::for_each(x, [&](const auto& leaf) {
    if (g == nullptr) g = leaf.graph;
  });
  return g;
}

// Literals made directly: a scalar operand goes through float (prim::as_tracer), which an s32 above
// 2^24 does not survive.
constexpr tracer<float, shape<>> f32(ir::graph_builder* g, double value) { return prim::literal<float>(g, value); }
constexpr tracer<std::int32_t, shape<>> s32(ir::graph_builder* g, std::int32_t value) {
  return prim::literal<std::int32_t>(g, static_cast<double>(value));
}

// x converted to the dtype of leaf L (optax's `.astype(t.dtype)`); a no-op for f32 leaves.
template <class L, Traced X>
constexpr auto as_dtype_of(X x) {
  return tessel::convert_element_type<typename L::value_type>(x);
}

// The jitted forms of update and apply_updates, for calls with tensors: jit needs an empty function.
template <class Opt>
struct update_fn {
  template <class... A>
  constexpr auto operator()(const A&... a) const {
    return Opt{}.update(a...);
  }
};
struct apply_updates_fn {
  template <class P, class U>
  constexpr auto operator()(const P& params, const U& updates) const;
};

}  // namespace detail

// A tree of P's structure with every leaf zero (optax.tree.zeros_like).
template <class P>
constexpr P zeros_like(const P& params) {
  return tree::map(
      [](const auto& leaf) {
        using L = std::remove_cvref_t<decltype(leaf)>;
        if constexpr (Traced<L>)
          return tessel::broadcast_to<typename L::shape_type>(
              prim::literal<typename L::value_type>(leaf.graph, 0.0));
        else
          return L{};  // tensors start zeroed
      },
      params);
}

// count + 1, or count when that would overflow (optax.safe_increment): where(count < max, count + 1, max).
template <Traced C>
constexpr C safe_increment(C count) {
  using T = typename C::value_type;
  const auto max = prim::literal<T>(count.graph, static_cast<double>(std::numeric_limits<T>::max()));
  return tessel::select(count < max, count + prim::literal<T>(count.graph, 1.0), max);
}

// A zero step count for the state of parameters P.
template <class P>
constexpr count_t<P> zero_count(const P& params) {
  if constexpr (detail::all_traced<P>) return detail::s32(detail::graph_of(params), 0);
  else return {};
}

// The step count of an sgd, adam or adamw state (its first leaf).
template <class... S>
constexpr const auto& count(const std::tuple<S...>& state) {
  return std::get<0>(state);
}

// params + updates leaf by leaf, in the parameters' dtype (optax.apply_updates).
template <class P, class U>
constexpr P apply_updates(const P& params, const U& updates) {
  if constexpr (detail::all_traced<P, U>) {
    return tree::map([](auto p, auto u) { return p + detail::as_dtype_of<decltype(p)>(u); }, params, updates);
  } else {
    return jit(detail::apply_updates_fn{})(params, updates);
  }
}

template <class P, class U>
constexpr auto detail::apply_updates_fn::operator()(const P& params, const U& updates) const {
  return optim::apply_updates(params, updates);
}

}  // namespace tessel::optim
