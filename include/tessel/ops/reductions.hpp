#pragma once
// NumPy-style reductions written from primitives: sum, max, min, mean, var over Axes... (all axes when
// none are given), logsumexp (numerically stable), and broadcast_reduced to spread a reduced value back.
//
//   sum(x)            // f32[4,3] -> f32[]
//   mean<0>(x)        // f32[4,3] -> f32[3]
//   var<-1>(x)        // population variance (ddof = 0, as jnp.var)

#include <array>
#include <cstddef>
#include <limits>
#include <utility>

#include "tessel/prim/add.hpp"
#include "tessel/prim/broadcast_in_dim.hpp"
#include "tessel/prim/div.hpp"
#include "tessel/prim/exp.hpp"
#include "tessel/prim/log.hpp"
#include "tessel/prim/lt.hpp"
#include "tessel/prim/abs.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/prim/reduce_max.hpp"
#include "tessel/prim/reduce_min.hpp"
#include "tessel/prim/reduce_sum.hpp"
#include "tessel/prim/select.hpp"
#include "tessel/prim/stop_gradient.hpp"
#include "tessel/prim/sub.hpp"

namespace tessel {
namespace ops_detail {

template <class X, std::size_t... I>
constexpr auto reduce_all_sum(X x, std::index_sequence<I...>) {
  return reduce_sum<static_cast<long>(I)...>(x);
}
template <class X, std::size_t... I>
constexpr auto reduce_all_max(X x, std::index_sequence<I...>) {
  return reduce_max<static_cast<long>(I)...>(x);
}
template <class X, std::size_t... I>
constexpr auto reduce_all_min(X x, std::index_sequence<I...>) {
  return reduce_min<static_cast<long>(I)...>(x);
}

// The axes of a rank-R shape that survive reducing Axes (normalised), in order.
template <std::size_t R, long... Axes>
constexpr auto kept_axes() {
  std::array<bool, R + 1> dropped{};
  for (long a : {(Axes < 0 ? Axes + static_cast<long>(R) : Axes)...})
    if (a >= 0 && a < static_cast<long>(R)) dropped[static_cast<std::size_t>(a)] = true;
  std::array<std::size_t, R - sizeof...(Axes)> kept{};
  for (std::size_t i = 0, j = 0; i < R && j < kept.size(); ++i)
    if (!dropped[i]) kept[j++] = i;
  return kept;
}

template <class S, auto Kept, Traced X, std::size_t... I>
constexpr auto broadcast_kept(X x, std::index_sequence<I...>) {
  return broadcast_in_dim<S, Kept[I]...>(x);
}

}  // namespace ops_detail

// `reduced` (the result of reducing Axes of a `Like`-shaped value; no Axes: all of them) broadcast
// back to Like's shape (NumPy's keepdims followed by broadcasting).
template <long... Axes, Traced R, Traced Like>
constexpr auto broadcast_reduced(R reduced, Like) {
  using S = typename Like::shape_type;
  if constexpr (sizeof...(Axes) == 0) {
    return broadcast_in_dim<S>(reduced);
  } else {
    constexpr auto kept = ops_detail::kept_axes<S::rank, Axes...>();
    return ops_detail::broadcast_kept<S, kept>(reduced, std::make_index_sequence<kept.size()>{});
  }
}

template <long... Axes, Traced X>
constexpr auto sum(X x) {
  if constexpr (sizeof...(Axes) == 0) return ops_detail::reduce_all_sum(x, std::make_index_sequence<X::rank>{});
  else return reduce_sum<Axes...>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto sum(const X& x) {
  return eagerly([](auto x) { return sum<Axes...>(x); }, x);
}
template <long... Axes, Traced X>
constexpr auto max(X x) {
  if constexpr (sizeof...(Axes) == 0) return ops_detail::reduce_all_max(x, std::make_index_sequence<X::rank>{});
  else return reduce_max<Axes...>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto max(const X& x) {
  return eagerly([](auto x) { return max<Axes...>(x); }, x);
}
template <long... Axes, Traced X>
constexpr auto min(X x) {
  if constexpr (sizeof...(Axes) == 0) return ops_detail::reduce_all_min(x, std::make_index_sequence<X::rank>{});
  else return reduce_min<Axes...>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto min(const X& x) {
  return eagerly([](auto x) { return min<Axes...>(x); }, x);
}

// The number of elements a reduction over Axes folds into each result.
template <class S, long... Axes>
constexpr std::size_t reduced_size() {
  if constexpr (sizeof...(Axes) == 0) {
    return S::size;
  } else {
    std::size_t n = 1;
    for (long a : {Axes...}) n *= S::dims[static_cast<std::size_t>(a < 0 ? a + static_cast<long>(S::rank) : a)];
    return n;
  }
}

template <long... Axes, Traced X>
constexpr auto mean(X x) {
  return sum<Axes...>(x) / static_cast<float>(reduced_size<typename X::shape_type, Axes...>());
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto mean(const X& x) {
  return eagerly([](auto x) { return mean<Axes...>(x); }, x);
}

// Population variance: mean((x - mean)^2).
template <long... Axes, Traced X>
constexpr auto var(X x) {
  auto centered = x - broadcast_reduced<Axes...>(mean<Axes...>(x), x);
  return mean<Axes...>(centered * centered);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto var(const X& x) {
  return eagerly([](auto x) { return var<Axes...>(x); }, x);
}

// log(sum(exp(x))) over Axes, computed as max + log(sum(exp(x - max))); a row that is all -inf gives
// -inf (the shift is 0 where the max is not finite, as jax.nn.logsumexp does).
template <long... Axes, Traced X>
constexpr auto logsumexp(X x) {
  auto m = max<Axes...>(x);
  // Under stop_gradient, as jax.nn.logsumexp: the result does not depend on the shift (ops/softmax.hpp).
  auto shift = stop_gradient(select(abs(m) < std::numeric_limits<float>::infinity(), m, 0.0f));
  auto shifted = x - broadcast_reduced<Axes...>(shift, x);
  return log(sum<Axes...>(exp(shifted))) + shift;
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long... Axes, Tensor X>
auto logsumexp(const X& x) {
  return eagerly([](auto x) { return logsumexp<Axes...>(x); }, x);
}

}  // namespace tessel
