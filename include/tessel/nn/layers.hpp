#pragma once
// Layers written from primitives: dense, conv2d, flatten, layer_norm, dropout (keyed: the mask drawn in
// the step from a key argument; or with a given mask). Pooling is tessel::max_pool and tessel::avg_pool
// (prim/reduce_window.hpp).

#include "tessel/core/real.hpp"
#include "tessel/ops.hpp"
#include "tessel/prim/conv_general.hpp"
#include "tessel/random/traced.hpp"

namespace tessel::nn {

// x [..., in] . w [in, out] + b [out].
template <Traced X, Traced W, Traced B>
constexpr auto dense(X x, W w, B b) {
  return matmul(x, w) + b;
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X, Tensor W, Tensor B>
auto dense(const X& x, const W& w, const B& b) {
  return eagerly([](auto x, auto w, auto b) { return dense(x, w, b); }, x, w, b);
}

// x [N, H, W, C] * k [KH, KW, C, O] + b [O] (flax's Conv: NHWC, 'SAME' padding by default). The bias
// add (and an activation applied to the result) fuses into the convolution's blocks.
template <class Strides = stride<1, 1>, class Padding = padding::same, Traced X, Traced K, Traced B>
constexpr auto conv2d(X x, K k, B b) {
  return conv_general<Strides, Padding>(x, k) + b;
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class Strides = stride<1, 1>, class Padding = padding::same, Tensor X, Tensor K, Tensor B>
auto conv2d(const X& x, const K& k, const B& b) {
  return eagerly([](auto x, auto k, auto b) { return conv2d<Strides, Padding>(x, k, b); }, x, k, b);
}

// [N, ...] -> [N, prod(...)].
template <Traced X>
constexpr auto flatten(X x) {
  using S = typename X::shape_type;
  return reshape<shape<S::dims[0], S::size / (S::dims[0] == 0 ? 1 : S::dims[0])>>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto flatten(const X& x) {
  return eagerly([](auto x) { return flatten(x); }, x);
}

// Normalises over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta (flax's LayerNorm, eps 1e-6).
template <Traced X, Traced G, Traced B>
constexpr auto layer_norm(X x, G gamma, B beta) {
  auto mu = broadcast_reduced<-1>(mean<-1>(x), x);
  auto centered = x - mu;
  auto inv = rsqrt(broadcast_reduced<-1>(mean<-1>(centered * centered), x) + 1e-6f);
  return centered * inv * gamma + beta;
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X, Tensor G, Tensor B>
auto layer_norm(const X& x, const G& gamma, const B& beta) {
  return eagerly([](auto x, auto gamma, auto beta) { return layer_norm(x, gamma, beta); }, x, gamma, beta);
}

// Inverted dropout: keep where `keep` (pred, drawn with probability 1 - rate, e.g. by
// tessel::random::bernoulli) and scale the kept values by 1 / (1 - rate).
template <real Rate, Traced X, Traced M>
  requires(!random::TracedKey<M>)
constexpr auto dropout(X x, M keep) {
  static_assert(Rate >= 0 && Rate < 1, "tessel::nn::dropout: the rate must be in [0, 1)");
  return select(keep, x / static_cast<float>(1.0 - Rate), 0.0f);  // flax: inputs / keep_prob
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <real Rate, Tensor X, Tensor M>
auto dropout(const X& x, const M& keep) {
  return eagerly([](auto x, auto keep) { return dropout<Rate>(x, keep); }, x, keep);
}

// Keyed dropout (flax's Dropout): the mask is drawn inside the step from a key argument (key_words, see
// random/traced.hpp), as jax.random.bernoulli(key, 1 - rate, x.shape); it fuses into x's loop.
template <real Rate, Traced X, random::TracedKey K>
constexpr auto dropout(X x, K key) {
  static_assert(Rate >= 0 && Rate < 1, "tessel::nn::dropout: the rate must be in [0, 1)");
  return dropout<Rate>(x, random::bernoulli<typename X::shape_type>(key, static_cast<float>(1.0 - Rate)));
}

}  // namespace tessel::nn
