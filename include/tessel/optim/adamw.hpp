#pragma once
// adamw (optax.adamw): Adam with decoupled weight decay, as optax.chain(optax.scale_by_adam(b1, b2,
// eps, eps_root), optax.add_decayed_weights(weight_decay), optax.scale_by_learning_rate(lr)).
//
//   tessel::optim::adamw<1e-3, tessel::optim::adamw_options{.weight_decay = 0.01}> opt;
//   auto state = opt.init(params);                          // (count, mu, nu), as adam
//   auto [updates, next] = opt.update(grads, state, params); // params are needed for the decay
//
//   u = -lr(count) * (adam_direction + weight_decay * params)
// where adam_direction is adam's mu_hat / (sqrt(nu_hat + eps_root) + eps) (optim/adam.hpp): the decay
// is multiplied by the learning rate, as in optax and PyTorch. optax's `mask` is not offered.

#include <tuple>

#include "tessel/core/tree.hpp"
#include "tessel/optim/adam.hpp"
#include "tessel/optim/base.hpp"
#include "tessel/optim/schedule.hpp"
#include "tessel/prim/add.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/jit.hpp"

namespace tessel::optim {

struct adamw_options {
  real b1 = 0.9;
  real b2 = 0.999;
  real eps = 1e-8;
  real eps_root = 0.0;
  real weight_decay = 1e-4;
};

// LearningRate: a number or a schedule of the step count (optim/schedule.hpp).
template <learning_rate LearningRate, adamw_options Options = adamw_options{}>
struct adamw {
  static_assert(detail::check_learning_rate<LearningRate>(), "tessel::optim::adamw: see the message above");

  // count 0, mu = nu = 0 like params.
  template <class P>
  constexpr adam_state<P> init(const P& params) const {
    return {zero_count(params), zeros_like(params), zeros_like(params)};
  }

  // (updates like grads, the next state).
  template <class G, class S, class P>
  constexpr auto update(const G& grads, const S& state, const P& params) const {
    if constexpr (!detail::all_traced<G, S, P>) {
      return jit(detail::update_fn<adamw>{})(grads, state, params);
    } else if constexpr (detail::check_adam_state<S, G>()) {
      constexpr adam_options moments{
          .b1 = Options.b1, .b2 = Options.b2, .eps = Options.eps, .eps_root = Options.eps_root};
      const auto& [count, mu, nu] = state;
      auto [direction, next_count, next_mu, next_nu] =
          detail::scale_by_adam(grads, count, mu, nu, detail::constants_of(moments));
      const auto decay = [](auto u, auto p) { return u + static_cast<double>(Options.weight_decay) * p; };
      // optax skips a zero constant decay
      const G decayed = Options.weight_decay == 0.0 ? direction : tree::map(decay, direction, params);
      return std::make_tuple(detail::scale_by_learning_rate<LearningRate>(decayed, count), S{next_count, next_mu, next_nu});
    }
  }
};

}  // namespace tessel::optim
