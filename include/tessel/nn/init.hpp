#pragma once
// Initialisers (jax.nn.initializers), keyed: the same key gives the same tensor, bit for bit with
// tessel::random (itself bit-exact with JAX's threefry).
//
//   auto w = tessel::nn::glorot_uniform<tessel::shape<784, 256>>(key);   // fan_in 784, fan_out 256

#include <cmath>
#include <cstddef>

#include "tessel/core/tensor.hpp"
#include "tessel/random.hpp"

namespace tessel::nn {

// fan_in and fan_out as JAX computes them: the last axis is out, the one before in, the rest is the
// receptive field (a conv filter HWIO: fan_in = H*W*I, fan_out = H*W*O).
template <class S>
constexpr std::size_t fan_in() {
  std::size_t receptive = 1;
  for (std::size_t i = 0; i + 2 < S::rank; ++i) receptive *= S::dims[i];
  return S::rank >= 2 ? receptive * S::dims[S::rank - 2] : S::dims[0];
}
template <class S>
constexpr std::size_t fan_out() {
  std::size_t receptive = 1;
  for (std::size_t i = 0; i + 2 < S::rank; ++i) receptive *= S::dims[i];
  return receptive * S::dims[S::rank - 1];
}

// variance_scaling(scale, mode, "uniform"): U(-limit, limit), limit = sqrt(3 * scale / fan).
template <class S>
tensor<float, S> variance_scaling_uniform(random::key k, double scale, double fan) {
  const auto limit = static_cast<float>(std::sqrt(3.0 * scale / fan));
  return random::uniform<S>(k, -limit, limit);
}

// glorot_uniform = variance_scaling(1, "fan_avg", "uniform").
template <class S>
tensor<float, S> glorot_uniform(random::key k) {
  return variance_scaling_uniform<S>(k, 1.0, (static_cast<double>(fan_in<S>()) + static_cast<double>(fan_out<S>())) / 2);
}

// he_uniform = variance_scaling(2, "fan_in", "uniform").
template <class S>
tensor<float, S> he_uniform(random::key k) {
  return variance_scaling_uniform<S>(k, 2.0, static_cast<double>(fan_in<S>()));
}

}  // namespace tessel::nn
