#pragma once
// Losses and metrics written from primitives (optax / JAX semantics), so they fuse and differentiate.
//
//   softmax_cross_entropy(logits, one_hot_labels)              // f32[B] per example (optax)
//   softmax_cross_entropy_with_integer_labels(logits, labels)  // labels s32[B]
//   mean_squared_error(pred, target), accuracy(logits, labels) // scalars

#include <cstdint>
#include <limits>

#include "tessel/ops.hpp"

namespace tessel::nn {

// -sum(labels * log_softmax(logits), axis=-1), per example, as optax.softmax_cross_entropy.
template <Traced L, Traced Y>
constexpr auto softmax_cross_entropy(L logits, Y labels) {
  return -sum<-1>(labels * log_softmax(logits));
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor L, Tensor Y>
auto softmax_cross_entropy(const L& logits, const Y& labels) {
  return eagerly([](auto logits, auto labels) { return softmax_cross_entropy(logits, labels); }, logits, labels);
}

// logsumexp(logits) - logits[label], per example, as optax.softmax_cross_entropy_with_integer_labels.
// The label's logit is selected, as optax gathers it, not multiplied out by a one-hot row: a masked
// logit (-inf) times 0 would be NaN. Labels are read as optax's jnp.take_along_axis reads them: a negative
// label counts from the last class, and a label outside [-classes, classes) gives NaN (its fill value).
template <Traced L, Traced Y>
constexpr auto softmax_cross_entropy_with_integer_labels(L logits, Y labels) {
  static_assert(std::is_same_v<typename Y::value_type, std::int32_t>,
                "tessel::nn::softmax_cross_entropy_with_integer_labels: labels must be s32");
  constexpr std::size_t classes = L::shape_type::dims[L::rank - 1];
  constexpr auto count = static_cast<std::int32_t>(classes);
  using T = typename L::value_type;
  const auto label = select(labels < 0, labels + count, labels);
  const auto picked = sum<-1>(select(one_hot<classes, bool>(label), logits, T(0)));
  const auto nan = T(std::numeric_limits<float>::quiet_NaN());
  return logsumexp<-1>(logits) - select(label >= 0, select(label < count, picked, nan), nan);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor L, Tensor Y>
auto softmax_cross_entropy_with_integer_labels(const L& logits, const Y& labels) {
  return eagerly([](auto logits, auto labels) { return softmax_cross_entropy_with_integer_labels(logits, labels); }, logits, labels);
}

template <Traced P, Traced Y>
constexpr auto mean_squared_error(P pred, Y target) {
  auto d = pred - target;
  return mean(d * d);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor P, Tensor Y>
auto mean_squared_error(const P& pred, const Y& target) {
  return eagerly([](auto pred, auto target) { return mean_squared_error(pred, target); }, pred, target);
}

// The fraction of examples whose largest logit is the label (f32[]).
template <Traced L, Traced Y>
constexpr auto accuracy(L logits, Y labels) {
  return mean(convert_element_type<float>(argmax<-1>(logits) == labels));
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor L, Tensor Y>
auto accuracy(const L& logits, const Y& labels) {
  return eagerly([](auto logits, auto labels) { return accuracy(logits, labels); }, logits, labels);
}

}  // namespace tessel::nn
