#pragma once
// softmax, log_softmax over Axis (the last by default), numerically stable (the max is subtracted
// first), as jax.nn.softmax / log_softmax. The planner fuses each into one pass over every row.
// As JAX, the max is under stop_gradient: the result does not depend on the shift, so its gradient
// through the max is zero, and differentiating max (which elements won, how many tied) is work for
// nothing; the backward pass is then the softmax's own rule alone.

#include "tessel/ops/reductions.hpp"

namespace tessel {

template <long Axis = -1, Traced X>
constexpr auto softmax(X x) {
  auto shifted = x - broadcast_reduced<Axis>(stop_gradient(max<Axis>(x)), x);
  auto e = exp(shifted);
  return e / broadcast_reduced<Axis>(sum<Axis>(e), x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long Axis = -1, Tensor X>
auto softmax(const X& x) {
  return eagerly([](auto x) { return softmax<Axis>(x); }, x);
}

template <long Axis = -1, Traced X>
constexpr auto log_softmax(X x) {
  auto shifted = x - broadcast_reduced<Axis>(stop_gradient(max<Axis>(x)), x);
  return shifted - broadcast_reduced<Axis>(log(sum<Axis>(exp(shifted))), x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long Axis = -1, Tensor X>
auto log_softmax(const X& x) {
  return eagerly([](auto x) { return log_softmax<Axis>(x); }, x);
}

}  // namespace tessel
