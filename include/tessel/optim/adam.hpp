#pragma once
// adam (optax.adam): Adam, as optax.chain(optax.scale_by_adam(b1, b2, eps, eps_root),
// optax.scale_by_learning_rate(lr)).
//
//   tessel::optim::adam<1e-3> opt;         // or adam<1e-3, tessel::optim::adam_options{.b2 = 0.99}>
//   auto state = opt.init(params);                          // (count, mu, nu)
//   auto [updates, next] = opt.update(grads, state);
//   params = tessel::optim::apply_updates(params, updates);
//
// With g the gradient and count the state's count (0 at first):
//   mu     = (1 - b1) * g + b1 * mu
//   nu     = (1 - b2) * g^2 + b2 * nu
//   count' = safe_increment(count)                          incremented before the bias correction
//   mu_hat = mu / (1 - b1^count'),  nu_hat = nu / (1 - b2^count')
//   u      = -lr(count) * mu_hat / (sqrt(nu_hat + eps_root) + eps)
// The bias corrections 1 - b^count' are computed in f32 (optax: a python float to the power of an
// int32 count), and (1 - b) in double, then rounded to f32, as python does.

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "tessel/core/tree.hpp"
#include "tessel/optim/base.hpp"
#include "tessel/optim/schedule.hpp"
#include "tessel/prim/add.hpp"
#include "tessel/prim/convert_element_type.hpp"
#include "tessel/prim/div.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/prim/pow.hpp"
#include "tessel/prim/sqrt.hpp"
#include "tessel/prim/sub.hpp"
#include "tessel/jit.hpp"

namespace tessel::optim {

struct adam_options {
  real b1 = 0.9;        // decay of the first moment
  real b2 = 0.999;      // decay of the second moment
  real eps = 1e-8;      // added to the denominator outside the square root
  real eps_root = 0.0;  // added inside the square root
};

// The state for parameters P: (count, mu, nu), mu and nu like P.
template <class P>
using adam_state = std::tuple<count_t<P>, P, P>;

namespace detail {

// optax.scale_by_adam's update on traced trees: (mu_hat / (sqrt(nu_hat + eps_root) + eps), next state).
template <adam_options O, class G>
constexpr auto scale_by_adam(const G& grads, const adam_state<G>& state) {
  const auto& [count, mu, nu] = state;
  const auto first = [](auto g, auto m) { return (1.0 - O.b1) * g + static_cast<double>(O.b1) * m; };
  const auto second = [](auto g, auto v) { return (1.0 - O.b2) * (g * g) + static_cast<double>(O.b2) * v; };
  const G next_mu = tree::map(first, grads, mu);
  const G next_nu = tree::map(second, grads, nu);
  const auto next_count = safe_increment(count);
  const auto t = tessel::convert_element_type<float>(next_count);
  const auto correction1 = 1.0 - tessel::pow(static_cast<double>(O.b1), t);
  const auto correction2 = 1.0 - tessel::pow(static_cast<double>(O.b2), t);
  const G updates = tree::map(
      [&](auto m, auto v) {
        const auto m_hat = m / as_dtype_of<decltype(m)>(correction1);
        const auto v_hat = v / as_dtype_of<decltype(v)>(correction2);
        const double eps = O.eps, eps_root = O.eps_root;
        return m_hat / (tessel::sqrt(v_hat + eps_root) + eps);
      },
      next_mu, next_nu);
  return std::make_tuple(updates, adam_state<G>{next_count, next_mu, next_nu});
}

template <class S, class G>
consteval bool check_adam_state() {
  static_assert(std::is_same_v<S, adam_state<G>>,
                "tessel::optim::adam/adamw::update: the state is not (count, mu, nu) for these gradients; fix: pass "
                "the state that init(params) or the previous update returned");
  return std::is_same_v<S, adam_state<G>>;
}

}  // namespace detail

// LearningRate: a number or a schedule of the step count (optim/schedule.hpp).
template <learning_rate LearningRate, adam_options Options = adam_options{}>
struct adam {
  static_assert(detail::check_learning_rate<LearningRate>(), "tessel::optim::adam: see the message above");

  // count 0, mu = nu = 0 like params.
  template <class P>
  constexpr adam_state<P> init(const P& params) const {
    return {zero_count(params), zeros_like(params), zeros_like(params)};
  }

  // (updates like grads, the next state); params are accepted for optax's signature and unused.
  template <class G, class S, class... P>
    requires(sizeof...(P) <= 1)
  constexpr auto update(const G& grads, const S& state, const P&... params) const {
    if constexpr (!detail::all_traced<G, S, P...>) {
      return jit(detail::update_fn<adam>{})(grads, state, params...);
    } else if constexpr (detail::check_adam_state<S, G>()) {
      auto [updates, next] = detail::scale_by_adam<Options>(grads, state);
      return std::make_tuple(detail::scale_by_learning_rate<LearningRate>(updates, std::get<0>(state)), next);
    }
  }
};

}  // namespace tessel::optim
