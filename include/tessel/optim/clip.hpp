#pragma once
// global_norm and clip_by_global_norm (optax.tree.norm, optax.clip_by_global_norm).
//
//   auto n = tessel::optim::global_norm(grads);             // sqrt of the sum of every leaf's squares
//   tessel::optim::chain<tessel::optim::clip_by_global_norm<1.0>, tessel::optim::adam<1e-3>> opt;
//
// clip_by_global_norm<max_norm> rescales a whole tree at once, so the leaves keep their proportions:
//   u = norm < max_norm ? g : (g / norm) * max_norm        (lax.select, as optax, norm = global_norm(g))
// Its state is empty (std::tuple<>); it is meant to come first in a chain (optim/chain.hpp).

#include <tuple>
#include <type_traits>

#include "tessel/core/tree.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/ops/reductions.hpp"
#include "tessel/optim/base.hpp"
#include "tessel/prim/add.hpp"
#include "tessel/prim/convert_element_type.hpp"
#include "tessel/prim/div.hpp"
#include "tessel/prim/lt.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/prim/select.hpp"
#include "tessel/prim/sqrt.hpp"
#include "tessel/jit.hpp"

namespace tessel::optim {
namespace detail {
struct global_norm_fn {
  template <class G>
  constexpr auto operator()(const G& updates) const;
};
}  // namespace detail

// sqrt(sum over leaves of sum(leaf * leaf)), leaves summed in tree order in f32: an f32[] tracer inside
// a traced function, a float for a tree of tensors.
template <class G>
constexpr auto global_norm(const G& updates) {
  if constexpr (detail::all_traced<G>) {
    tracer<float, shape<>> total{};
    bool first = true;
    tree::for_each(updates, [&](const auto& leaf) {
      const auto squares = tessel::convert_element_type<float>(tessel::sum(leaf * leaf));
      total = first ? squares : total + squares;
      first = false;
    });
    return tessel::sqrt(total);
  } else {
    return jit(detail::global_norm_fn{})(updates)[0];
  }
}

template <class G>
constexpr auto detail::global_norm_fn::operator()(const G& updates) const {
  return optim::global_norm(updates);
}

// A transformation (no learning rate): updates clipped to global norm MaxNorm.
template <real MaxNorm>
struct clip_by_global_norm {
  template <class P>
  constexpr std::tuple<> init(const P&) const {
    return {};
  }

  // (the clipped updates, the unchanged empty state).
  template <class G, class... P>
    requires(sizeof...(P) <= 1)
  constexpr auto update(const G& grads, const std::tuple<>& state, const P&... params) const {
    if constexpr (!detail::all_traced<G, P...>) {
      return jit(detail::update_fn<clip_by_global_norm>{})(grads, state, params...);
    } else {
      const auto norm = global_norm(grads);
      const double max_norm = MaxNorm;
      const auto trigger = norm < max_norm;
      const G clipped = tree::map(
          [&](auto g) { return tessel::select(trigger, g, (g / detail::as_dtype_of<decltype(g)>(norm)) * max_norm); },
          grads);
      return std::make_tuple(clipped, state);
    }
  }
};

}  // namespace tessel::optim
