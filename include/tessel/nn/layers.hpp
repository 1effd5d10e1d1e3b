#pragma once
// Layers written from primitives: dense, flatten, layer_norm, dropout (with a mask drawn outside the
// traced step, so the step stays a pure function of its arguments).

#include "tessel/ops.hpp"

namespace tessel::nn {

// x [..., in] . w [in, out] + b [out].
template <Traced X, Traced W, Traced B>
constexpr auto dense(X x, W w, B b) {
  return matmul(x, w) + b;
}

// [N, ...] -> [N, prod(...)].
template <Traced X>
constexpr auto flatten(X x) {
  using S = typename X::shape_type;
  return reshape<shape<S::dims[0], S::size / (S::dims[0] == 0 ? 1 : S::dims[0])>>(x);
}

// Normalises over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta (flax's LayerNorm, eps 1e-6).
template <Traced X, Traced G, Traced B>
constexpr auto layer_norm(X x, G gamma, B beta) {
  auto mu = broadcast_reduced<-1>(mean<-1>(x), x);
  auto centered = x - mu;
  auto inv = rsqrt(broadcast_reduced<-1>(mean<-1>(centered * centered), x) + 1e-6f);
  return centered * inv * gamma + beta;
}

// Inverted dropout: keep where `keep` (pred, drawn with probability 1 - rate, e.g. by
// tessel::random::bernoulli) and scale the kept values by 1 / (1 - rate).
template <float Rate, Traced X, Traced M>
constexpr auto dropout(X x, M keep) {
  static_assert(Rate >= 0 && Rate < 1, "tessel::nn::dropout: the rate must be in [0, 1)");
  return select(keep, x * (1.0f / (1.0f - Rate)), 0.0f);
}

}  // namespace tessel::nn
