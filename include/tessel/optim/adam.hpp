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

// A hyper-parameter where it meets a leaf x: a number stays a number (a literal rounded to x's dtype, as
// optax's python floats are), a run-time value (an f32[] tracer, optim/injected.hpp) is converted to x's dtype.
template <class X, class H>
constexpr auto hyper_like(const H& h) {
  if constexpr (Traced<H>) return as_dtype_of<X>(h);
  else return static_cast<double>(h);
}

// The numbers adam<..., O> folds into its program, in the form scale_by_adam takes them: 1 - b in double,
// rounded to f32 where it meets a leaf, as python computes it.
struct adam_constants {
  double b1, one_minus_b1, b2, one_minus_b2, eps, eps_root;
};
constexpr adam_constants constants_of(const adam_options& o) {
  return {o.b1, 1.0 - o.b1, o.b2, 1.0 - o.b2, o.eps, o.eps_root};
}

// optax.scale_by_adam's update on traced trees: (mu_hat / (sqrt(nu_hat + eps_root) + eps), next count, mu,
// nu). H holds b1, 1 - b1, b2, 1 - b2, eps and eps_root: numbers (adam_constants) or f32[] tracers
// (run-time hyper-parameters), run through the same operations.
template <class G, class C, class H>
constexpr auto scale_by_adam(const G& grads, const C& count, const G& mu, const G& nu, const H& h) {
  const auto first = [&](auto g, auto m) {
    using X = decltype(g);
    return hyper_like<X>(h.one_minus_b1) * g + hyper_like<X>(h.b1) * m;
  };
  const auto second = [&](auto g, auto v) {
    using X = decltype(g);
    return hyper_like<X>(h.one_minus_b2) * (g * g) + hyper_like<X>(h.b2) * v;
  };
  const G next_mu = tree::map(first, grads, mu);
  const G next_nu = tree::map(second, grads, nu);
  const auto next_count = safe_increment(count);
  const auto t = tessel::convert_element_type<float>(next_count);
  const auto correction1 = 1.0 - tessel::pow(h.b1, t);
  const auto correction2 = 1.0 - tessel::pow(h.b2, t);
  const G updates = tree::map(
      [&](auto m, auto v) {
        using X = decltype(m);
        const auto m_hat = m / as_dtype_of<X>(correction1);
        const auto v_hat = v / as_dtype_of<X>(correction2);
        return m_hat / (tessel::sqrt(v_hat + hyper_like<X>(h.eps_root)) + hyper_like<X>(h.eps));
      },
      next_mu, next_nu);
  return std::make_tuple(updates, next_count, next_mu, next_nu);
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
      const auto& [count, mu, nu] = state;
      auto [updates, next_count, next_mu, next_nu] = detail::scale_by_adam(grads, count, mu, nu, detail::constants_of(Options));
      return std::make_tuple(detail::scale_by_learning_rate<LearningRate>(updates, count), S{next_count, next_mu, next_nu});
    }
  }
};

}  // namespace tessel::optim
