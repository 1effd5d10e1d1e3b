#pragma once
// sgd (optax.sgd): stochastic gradient descent, with optional (Nesterov) momentum.
//
//   tessel::optim::sgd<0.1, tessel::optim::sgd_options{.momentum = 0.9, .nesterov = true}> opt;
//   auto state = opt.init(params);                          // (count, trace)
//   auto [updates, next] = opt.update(grads, state);
//   params = tessel::optim::apply_updates(params, updates);
//
// optax.chain(optax.trace(momentum, nesterov), optax.scale_by_learning_rate(lr)):
//   trace_t = g_t + momentum * trace_{t-1}                  (trace_0 = 0)
//   u_t     = -lr(count) * trace_t                          (nesterov: -lr(count) * (g_t + momentum * trace_t))
// momentum = 0 means optax's momentum=None: no trace is kept and u_t = -lr(count) * g_t.

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "tessel/core/tree.hpp"
#include "tessel/optim/base.hpp"
#include "tessel/optim/schedule.hpp"
#include "tessel/prim/add.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/jit.hpp"

namespace tessel::optim {

struct sgd_options {
  real momentum = 0.0;
  bool nesterov = false;
};

// The state for parameters P: (count) without momentum, (count, trace) with it.
template <class P, sgd_options Options>
using sgd_state = std::conditional_t<Options.momentum == 0.0, std::tuple<count_t<P>>, std::tuple<count_t<P>, P>>;

// LearningRate: a number or a schedule of the step count (optim/schedule.hpp).
template <learning_rate LearningRate, sgd_options Options = sgd_options{}>
struct sgd {
  static_assert(detail::check_learning_rate<LearningRate>(), "tessel::optim::sgd: see the message above");

  // The zero state: count 0 and, with momentum, a zero trace like params.
  template <class P>
  constexpr sgd_state<P, Options> init(const P& params) const {
    if constexpr (Options.momentum == 0.0) return {zero_count(params)};
    else return {zero_count(params), zeros_like(params)};
  }

  // (updates like grads, the next state); params are accepted for optax's signature and unused.
  template <class G, class S, class... P>
    requires(sizeof...(P) <= 1)
  constexpr auto update(const G& grads, const S& state, const P&... params) const {
    if constexpr (!detail::all_traced<G, S, P...>) {
      return jit(detail::update_fn<sgd>{})(grads, state, params...);
    } else {
      static_assert(std::is_same_v<S, sgd_state<G, Options>>,
                    "tessel::optim::sgd::update: the state is not this sgd's state for these gradients; fix: pass "
                    "the state that init(params) or the previous update returned");
      const auto& count = std::get<0>(state);
      if constexpr (Options.momentum == 0.0) {
        return std::make_tuple(detail::scale_by_learning_rate<LearningRate>(grads, count),
                               S{safe_increment(count)});
      } else {
        const auto accumulate = [](auto g, auto t) { return g + static_cast<double>(Options.momentum) * t; };
        const G trace = tree::map(accumulate, grads, std::get<1>(state));
        const G direction = Options.nesterov ? tree::map(accumulate, grads, trace) : trace;
        return std::make_tuple(detail::scale_by_learning_rate<LearningRate>(direction, count),
                               S{safe_increment(count), trace});
      }
    }
  }
};

}  // namespace tessel::optim
