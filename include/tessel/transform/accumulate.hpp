#pragma once
// Gradient accumulation over micro-batches: the gradient of a large batch computed as M smaller ones.
//
//   auto loss = [](auto p, auto x, auto y) { return tessel::mean(nn::softmax_cross_entropy(model(p, x), y)); };
//   auto [value, grads] = tessel::accumulate_gradients<4>(loss)(params, x, y);   // x: f32[512,784] in 4 x 128
//
// Every batch argument (all arguments after the first, tensors or std::tuples of them) is split along
// its leading axis into M equal micro-batches; value_and_grad of loss(params, micro-batch...) is taken
// for each, and the values and gradients are combined: averaged for a loss that is a mean over its
// examples (loss_reduction::mean, the default; the result equals the big batch's mean loss and its
// gradient), summed for a loss that is a sum (loss_reduction::sum). The gradient is params' tree.
//
// Traced, the micro-batches are unrolled in order — forward, backward, accumulate, next — so the
// planner's buffer lifetimes hold one micro-batch's activations at a time: the arena peak is about a
// micro-batch's, not the batch's (`dump` shows it), while the GEMMs see M-times-smaller row counts.
// Called with tensors, it is jitted like grad.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessel/core/error.hpp"
#include "tessel/prim/materialize.hpp"
#include "tessel/prim/slice.hpp"
#include "tessel/transform/grad.hpp"

namespace tessel {

enum class loss_reduction { mean, sum };

namespace accumulate_detail {

template <class X>
consteval bool splittable(std::size_t m) {
  if constexpr (Traced<X>) return X::rank >= 1 && X::shape_type::dims[0] % m == 0;
  else if constexpr (is_tuple_v<X>) return []<class... P>(std::type_identity<std::tuple<P...>>, std::size_t k) {
    return (splittable<P>(k) && ...);
  }(std::type_identity<X>{}, m);
  else return false;
}

// Micro-batch I of M: rows [I * n / M, (I + 1) * n / M) of every leaf.
template <std::size_t M, std::size_t I, class X>
constexpr auto micro(const X& x) {
  if constexpr (Traced<X>) {
    constexpr long rows = static_cast<long>(X::shape_type::dims[0] / M);
    return slice_in_dim<0, static_cast<long>(I) * rows, static_cast<long>(I + 1) * rows>(x);
  } else {
    return std::apply([](const auto&... p) { return std::make_tuple(micro<M, I>(p)...); }, x);
  }
}

}  // namespace accumulate_detail

template <std::size_t M, loss_reduction Reduction, class Loss>
struct accumulate_fn {
  template <class P, class... B>
  constexpr auto operator()(const P& params, const B&... batch) const {
    if constexpr (detail::is_traced_tree<P>() && (detail::is_traced_tree<B>() && ...)) return traced(params, batch...);
    else return jit(*this)(params, batch...);
  }

 private:
  template <class P, class... B>
  constexpr auto traced(const P& params, const B&... batch) const {
    static_assert(M >= 1, "tessel::accumulate_gradients: at least one micro-batch");
    if constexpr (!(accumulate_detail::splittable<B>(M) && ...)) {
      raise<"tessel::accumulate_gradients: every batch argument (the arguments after the parameters) must be a tensor "
            "or a std::tuple of tensors whose leading axis divides into the number of micro-batches; fix: choose M "
            "dividing the batch size", P>();
      return std::make_tuple(tracer<float, shape<>>{}, params);
    } else {
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        using value_t = std::remove_cvref_t<decltype(std::get<0>(value_and_grad(Loss{})(params, accumulate_detail::micro<M, 0>(batch)...)))>;
        value_t value{};
        P grads{};
        bool first = true;
        auto step = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
          const auto [v, g] = value_and_grad(Loss{})(params, accumulate_detail::micro<M, K>(batch)...);
          if (first) {
            value = v;
            grads = g;
            first = false;
          } else {  // summed now, into one buffer (not fused into one sum of M live gradients at the end)
            value = materialize(value + v);
            grads = tree_map([](auto a, auto b) { return materialize(a + b); }, grads, g);
          }
        };
        (step(std::integral_constant<std::size_t, I>{}), ...);
        if constexpr (Reduction == loss_reduction::mean && M > 1) {
          constexpr float scale = 1.0f / static_cast<float>(M);
          value = value * scale;
          grads = tree_map([](auto a) { return a * scale; }, grads);
        }
        return std::make_tuple(value, grads);
      }(std::make_index_sequence<M>{});
    }
  }
};

// value_and_grad of loss with respect to its first argument, over M micro-batches of the others.
template <std::size_t M, loss_reduction Reduction = loss_reduction::mean, class Loss>
constexpr accumulate_fn<M, Reduction, Loss> accumulate_gradients(Loss) {
  return {};
}

}  // namespace tessel
