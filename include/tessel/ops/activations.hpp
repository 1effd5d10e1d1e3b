#pragma once
// Activations written from primitives (jax.nn): relu, sigmoid, gelu (tanh approximation by default,
// as jax.nn.gelu(approximate=True); exact with erf when Approximate is false).

#include <numbers>

#include "tessel/prim/add.hpp"
#include "tessel/prim/erf.hpp"
#include "tessel/prim/logistic.hpp"
#include "tessel/prim/max.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/prim/tanh.hpp"

namespace tessel {

template <Traced X>
constexpr auto relu(X x) {
  return max(x, 0.0f);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto relu(const X& x) {
  return eagerly([](auto x) { return relu(x); }, x);
}

template <Traced X>
constexpr auto sigmoid(X x) {
  return logistic(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto sigmoid(const X& x) {
  return eagerly([](auto x) { return sigmoid(x); }, x);
}

template <bool Approximate = true, Traced X>
constexpr auto gelu(X x) {
  if constexpr (Approximate) {
    constexpr float c = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * x * (1.0f + tanh(c * (x + 0.044715f * (x * x * x))));
  } else {
    return 0.5f * x * (1.0f + erf(x * static_cast<float>(1.0 / std::numbers::sqrt2)));
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <bool Approximate = true, Tensor X>
auto gelu(const X& x) {
  return eagerly([](auto x) { return gelu<Approximate>(x); }, x);
}

}  // namespace tessel
