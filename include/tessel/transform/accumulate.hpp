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
// Traced, it is a scan over the micro-batches (transform/scan.hpp; JAX's recipe): each batch leaf
// [B, ...] is viewed as [M, B / M, ...], the carry is (loss sum, gradient tree sum), starting at zero,
// and the body is value_and_grad of loss on one micro-batch, added into the carry. So the program holds
// one micro-batch's forward and backward whatever M is (its size does not grow with M), the activations
// in the arena are a micro-batch's, not the batch's (`dump` shows it), and the GEMMs see M-times-smaller
// row counts. The sums are those of the loop written out (0 + v is v exactly), in micro-batch order.
// M = 1 is value_and_grad itself (no loop). The batch viewed as [M, B / M, ...] costs nothing (the
// planner stores a reshape of a parameter in the parameter's bytes). What it does cost: the running sums
// are a gradient tree in the arena (one buffer per leaf: the zero init is written into it and the final
// sum read from it) next to one micro-batch's gradient, so accumulation saves memory when a batch's
// activations outweigh the parameters (examples/grad_accumulation.cpp prints both peaks).
// Called with tensors, it is jitted like grad.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessel/core/error.hpp"
#include "tessel/prim/reshape.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/transform/scan.hpp"

namespace tessel {

enum class loss_reduction { mean, sum };

namespace accumulate_detail {

template <class X>
consteval bool splittable(std::size_t m) {
  if constexpr (Traced<X>) return X::rank >= 1 && X::shape_type::dims[0] % m == 0;
  else if constexpr (is_tuple_v<X>) return []<class... P>(std::type_identity<std::tuple<P...>>, std::size_t k) consteval {
    return (splittable<P>(k) && ...);
  }(std::type_identity<X>{}, m);
  else return false;
}

template <std::size_t M, class S>
struct split_shape;
template <std::size_t M, std::size_t B, std::size_t... D>
struct split_shape<M, shape<B, D...>> {
  using type = shape<M, B / M, D...>;
};

// Every leaf [B, ...] viewed as M micro-batches [M, B / M, ...] (micro-batch i: rows i B / M ..).
template <std::size_t M, class X>
constexpr auto split(const X& x) {
  if constexpr (Traced<X>) return reshape<typename split_shape<M, typename X::shape_type>::type>(x);
  else return std::apply([](const auto&... p) { return std::make_tuple(split<M>(p)...); }, x);
}

// A tree of X's type with every leaf zero (the accumulators' start).
template <class X>
constexpr X zeros_of(const X& like) {
  X out = like;
  tree::for_each(out, [](auto& leaf) { leaf.id = prim::build::zeros_like(*leaf.graph, leaf.id); });
  return out;
}

}  // namespace accumulate_detail

template <std::size_t M, loss_reduction Reduction, class Loss>
struct accumulate_fn : detail::jit_when_concrete<accumulate_fn<M, Reduction, Loss>> {
 private:
  friend detail::jit_when_concrete<accumulate_fn>;
  template <class P, class... B>
  constexpr auto traced(const P& params, const B&... batch) const {
    static_assert(M >= 1, "tessel::accumulate_gradients: at least one micro-batch");
    if constexpr (!(accumulate_detail::splittable<B>(M) && ...)) {
      raise<"tessel::accumulate_gradients: every batch argument (the arguments after the parameters) must be a tensor "
            "or a std::tuple of tensors whose leading axis divides into the number of micro-batches; fix: choose M "
            "dividing the batch size", P>();
      return std::make_tuple(tracer<float, shape<>>{}, params);
    } else {
      auto micro_step = [&params](const auto&... micro) { return value_and_grad(Loss{})(params, micro...); };
      if constexpr (M == 1) {
        return micro_step(batch...);
      } else {
        using value_t = std::remove_cvref_t<decltype(Loss{}(
            params, std::declval<typename control_detail::sliced<decltype(accumulate_detail::split<M>(batch))>::type>()...))>;
        // The accumulators start at zero: 0 + v is v exactly, so the sums are those of the unrolled loop.
        value_t value{};
        value.graph = control_detail::graph_of(params);
        value.id = prim::build::literal(*value.graph, ir::code_of<typename value_t::value_type>(), 0.0);
        const auto init = std::tuple{value, accumulate_detail::zeros_of(params)};
        const auto [sums, none] = scan(
            [&micro_step](const auto& acc, const auto& micro) {
              const auto [v, g] = std::apply(micro_step, micro);
              auto grads = tree_map([](auto a, auto b) { return a + b; }, std::get<1>(acc), g);
              return std::tuple{std::tuple{std::get<0>(acc) + v, grads}, std::tuple<>{}};
            },
            init, std::make_tuple(accumulate_detail::split<M>(batch)...));
        (void)none;
        auto [total, grads] = sums;
        if constexpr (Reduction == loss_reduction::mean) {
          constexpr float scale = 1.0f / static_cast<float>(M);
          return std::make_tuple(total * scale, tree_map([](auto a) { return a * scale; }, grads));
        } else {
          return std::make_tuple(total, grads);
        }
      }
    }
  }
};

// value_and_grad of loss with respect to its first argument, over M micro-batches of the others.
template <std::size_t M, loss_reduction Reduction = loss_reduction::mean, class Loss>
constexpr accumulate_fn<M, Reduction, Loss> accumulate_gradients(Loss) {
  return {};
}

}  // namespace tessel
