#pragma once
// Hyper-parameters as run-time values (optax.inject_hyperparams): optim::injected::sgd, adam and adamw
// keep the learning rate (a number or a schedule), the momentum, betas, eps and weight decay as f32[] and
// s32[] leaves of their state. One compiled update serves every value: a sweep, a learning rate read from
// the command line, a schedule changed on resume; none of them recompiles. Inside a traced step the values
// are tracers like the rest of the state.
//
//   tessel::optim::injected::adam opt;   // one object, one program, any values
//   auto state = opt.init(params, {.learning_rate = 1e-3, .b2 = 0.99});    // (count, mu, nu, values)
//   auto [updates, next] = opt.update(grads, state);
//   opt.set(next, {.learning_rate = tessel::optim::cosine_decay_schedule{1e-3, 1000}});  // from the next step
//   float lr = tessel::optim::injected::learning_rate_at(next);           // the rate the next step uses
//
// The leaves hold the numbers that adam<1e-3, ...> folds into its program, computed on the host in double as
// python computes them (1 - b1, a schedule's init - peak, ...), and the update runs the same operations on
// them, so the two give bit-identical updates (tests/optim/injected_test.cpp). Values are checked when
// given, as PyTorch checks them: a learning rate, eps or weight decay that is negative or not finite, a
// beta or momentum outside [0, 1), or an invalid schedule throws std::invalid_argument naming it.

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/optim/adam.hpp"
#include "tessel/optim/base.hpp"
#include "tessel/optim/schedule.hpp"
#include "tessel/prim/add.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/prim/neg.hpp"
#include "tessel/jit.hpp"

namespace tessel::optim {

// A learning rate as leaves, in the form of the warmup + cosine formula, which holds each of
// optim/schedule.hpp's schedules exactly: a number is a cosine decay with alpha 1 (its value at every
// count), a cosine decay has no warmup, a linear schedule is a warmup to its end value followed by that
// value (one whose transition begins after count 0 is not offered).
template <template <class, class> class T = tensor>
struct schedule_values {
  BOOST_HANA_DEFINE_STRUCT(schedule_values, (T<std::int32_t, shape<>>, warmup_steps),
                           (T<float, shape<>>, warmup_rise), (T<float, shape<>>, peak),
                           (T<std::int32_t, shape<>>, warmup_length), (T<float, shape<>>, decay_steps),
                           (T<float, shape<>>, one_minus_alpha), (T<float, shape<>>, alpha),
                           (T<float, shape<>>, exponent));
};

template <template <class, class> class T = tensor>
struct sgd_values {
  BOOST_HANA_DEFINE_STRUCT(sgd_values, (schedule_values<T>, learning_rate), (T<float, shape<>>, momentum));
};

template <template <class, class> class T = tensor>
struct adam_values {
  BOOST_HANA_DEFINE_STRUCT(adam_values, (schedule_values<T>, learning_rate), (T<float, shape<>>, b1),
                           (T<float, shape<>>, one_minus_b1), (T<float, shape<>>, b2),
                           (T<float, shape<>>, one_minus_b2), (T<float, shape<>>, eps),
                           (T<float, shape<>>, eps_root));
};

template <template <class, class> class T = tensor>
struct adamw_values {
  BOOST_HANA_DEFINE_STRUCT(adamw_values, (schedule_values<T>, learning_rate), (T<float, shape<>>, b1),
                           (T<float, shape<>>, one_minus_b1), (T<float, shape<>>, b2),
                           (T<float, shape<>>, one_minus_b2), (T<float, shape<>>, eps),
                           (T<float, shape<>>, eps_root), (T<float, shape<>>, weight_decay));
};

// What a user gives: plain numbers and a learning rate (a number or a schedule, optim/schedule.hpp).
struct sgd_hyperparams {
  tessel::optim::learning_rate learning_rate;
  double momentum = 0.0;
};
struct adam_hyperparams {
  tessel::optim::learning_rate learning_rate;
  double b1 = 0.9, b2 = 0.999, eps = 1e-8, eps_root = 0.0;
};
struct adamw_hyperparams {
  tessel::optim::learning_rate learning_rate;
  double b1 = 0.9, b2 = 0.999, eps = 1e-8, eps_root = 0.0, weight_decay = 1e-4;
};

namespace detail {

// V<tracer> while P's leaves are tracers, V<tensor> otherwise.
template <class P, template <template <class, class> class> class V>
using values_for = std::conditional_t<tessel::detail::is_traced_tree<P>(), V<tracer>, V<tensor>>;

inline tensor<float, shape<>> f32_leaf(double v) {
  tensor<float, shape<>> t;
  t[0] = static_cast<float>(v);
  return t;
}
inline tensor<std::int32_t, shape<>> s32_leaf(std::int32_t v) {
  tensor<std::int32_t, shape<>> t;
  t[0] = v;
  return t;
}

[[noreturn]] inline void invalid_hyperparameter(const char* op, const char* name, double value, const char* rule) {
  throw std::invalid_argument(std::string(op) + ": " + name + " = " + std::to_string(value) + " " + rule);
}
inline void check_nonnegative(const char* op, const char* name, double v) {
  if (!(std::isfinite(v) && v >= 0.0)) invalid_hyperparameter(op, name, v, "must be finite and at least 0");
}
inline void check_decay(const char* op, const char* name, double v) {
  if (!(v >= 0.0 && v < 1.0)) invalid_hyperparameter(op, name, v, "must be in [0, 1)");
}

struct schedule_numbers {
  std::int32_t warmup_steps;
  double warmup_rise, peak;
  std::int32_t warmup_length;
  double decay_steps, one_minus_alpha, alpha, exponent;
};
inline schedule_numbers numbers_of(const constant_schedule& s) { return {0, 0.0, s.value, 1, 1.0, 0.0, 1.0, 1.0}; }
inline schedule_numbers numbers_of(const linear_schedule& s) {
  if (s.transition_steps <= 0) return numbers_of(constant_schedule{s.init_value});
  if (s.transition_begin > 0)
    throw std::invalid_argument(
        "tessel::optim::injected: a linear_schedule whose transition begins after count 0 (transition_begin = " +
        std::to_string(s.transition_begin) + ") is not offered as a run-time schedule; fix: use it as a template "
        "argument (adam<linear_schedule{...}>), or begin the transition at 0");
  return {s.transition_steps, s.init_value - s.end_value, s.end_value, s.transition_steps, 1.0, 0.0, 1.0, 1.0};
}
inline schedule_numbers numbers_of(const cosine_decay_schedule& s) {
  return {0, 0.0, s.init_value, 1, static_cast<double>(s.decay_steps), 1.0 - s.alpha, s.alpha, s.exponent};
}
inline schedule_numbers numbers_of(const warmup_cosine_decay_schedule& s) {
  return {s.warmup_steps,         s.warmup_rise(),   s.warmup_end(), s.warmup_length(),
          static_cast<double>(s.decay_steps - s.warmup_steps), 1.0 - s.alpha(), s.alpha(), s.exponent};
}

// The leaves of a learning rate; throws std::invalid_argument for an invalid schedule or a negative or
// non-finite value.
inline schedule_values<> values_of(const learning_rate& rate, const char* op) {
  if (const char* why = rate.error()) throw std::invalid_argument(why);
  const schedule_numbers n = rate.visit([](const auto& s) { return numbers_of(s); });
  check_nonnegative(op, "the learning rate (at its peak)", n.peak);
  check_nonnegative(op, "the learning rate (where the warmup starts)", n.peak + n.warmup_rise);
  return {s32_leaf(n.warmup_steps),     f32_leaf(n.warmup_rise), f32_leaf(n.peak),  s32_leaf(n.warmup_length),
          f32_leaf(n.decay_steps),      f32_leaf(n.one_minus_alpha), f32_leaf(n.alpha), f32_leaf(n.exponent)};
}

// The learning rate at a count, from its leaves (traced).
template <class V, Traced C>
constexpr auto learning_rate_value(const V& v, C count) {
  return warmup_cosine_value(count, v.warmup_steps, v.warmup_rise, v.peak, v.warmup_length, v.decay_steps,
                             v.one_minus_alpha, v.alpha, v.exponent);
}

// -learning_rate(count) * u, in u's dtype: scale_by_learning_rate with the rate's leaves.
template <class U, class V, Traced C>
constexpr U scale_by_learning_rate_values(const U& updates, const V& rate, C count) {
  const auto step_size = -learning_rate_value(rate, count);
  return tree::map([&](auto u) { return as_dtype_of<decltype(u)>(step_size) * u; }, updates);
}

struct learning_rate_at_fn {
  template <class C, class V>
  constexpr auto operator()(C count, const V& rate) const {
    return learning_rate_value(rate, count);
  }
};

template <class Opt, class S, class G>
consteval bool check_injected_state() {
  static_assert(std::is_same_v<S, typename Opt::template state<G>>,
                "tessel::optim::injected: the state is not this optimizer's state for these gradients; fix: pass "
                "the state that init(params, hyperparams) or the previous update returned");
  return std::is_same_v<S, typename Opt::template state<G>>;
}

template <class P>
consteval bool check_concrete_init() {
  static_assert(!tessel::detail::is_traced_tree<P>(),
                "tessel::optim::injected: init takes tensors (its values are run-time numbers); fix: call init "
                "outside the traced step and pass the state to it as an argument");
  return !tessel::detail::is_traced_tree<P>();
}

}  // namespace detail

namespace injected {

// optax.inject_hyperparams(optax.sgd)(learning_rate, momentum): the state is (count, trace, values); the
// trace is kept for any momentum (0 included, where it equals the gradients), so momentum can change at
// run time. Nesterov, which changes the formula, is a template argument.
template <bool Nesterov = false>
struct sgd {
  template <class P>
  using state = std::tuple<count_t<P>, P, detail::values_for<P, sgd_values>>;

  template <class P>
  state<P> init(const P& params, const sgd_hyperparams& h) const {
    static_assert(detail::check_concrete_init<P>());
    state<P> s{zero_count(params), zeros_like(params), {}};
    set(s, h);
    return s;
  }

  // Replaces the values from the next update on; throws std::invalid_argument for an invalid one.
  template <class P>
  void set(state<P>& s, const sgd_hyperparams& h) const {
    constexpr const char* op = "tessel::optim::injected::sgd";
    detail::check_decay(op, "momentum", h.momentum);
    std::get<2>(s) = {detail::values_of(h.learning_rate, op), detail::f32_leaf(h.momentum)};
  }

  // (updates like grads, the next state), as optim::sgd; params are accepted for optax's signature and unused.
  template <class G, class S, class... P>
    requires(sizeof...(P) <= 1)
  constexpr auto update(const G& grads, const S& s, const P&... params) const {
    if constexpr (!tessel::optim::detail::all_traced<G, S, P...>) {
      return jit(tessel::optim::detail::update_fn<sgd>{})(grads, s, params...);
    } else if constexpr (detail::check_injected_state<sgd, S, G>()) {
      // Named with std::get, not a structured binding: clang 16 cannot read a binding captured by a lambda in
      // constant evaluation.
      const auto& count = std::get<0>(s);
      const auto& trace = std::get<1>(s);
      const auto& values = std::get<2>(s);
      const auto accumulate = [&](auto g, auto t) { return g + detail::hyper_like<decltype(g)>(values.momentum) * t; };
      const G next_trace = tree::map(accumulate, grads, trace);
      const G direction = Nesterov ? tree::map(accumulate, grads, next_trace) : next_trace;
      return std::make_tuple(detail::scale_by_learning_rate_values(direction, values.learning_rate, count),
                             S{safe_increment(count), next_trace, values});
    }
  }
};

// optax.inject_hyperparams(optax.adam): the state is (count, mu, nu, values).
struct adam {
  template <class P>
  using state = std::tuple<count_t<P>, P, P, detail::values_for<P, adam_values>>;

  template <class P>
  state<P> init(const P& params, const adam_hyperparams& h) const {
    static_assert(detail::check_concrete_init<P>());
    state<P> s{zero_count(params), zeros_like(params), zeros_like(params), {}};
    set(s, h);
    return s;
  }

  // Replaces the values from the next update on; throws std::invalid_argument for an invalid one.
  template <class P>
  void set(state<P>& s, const adam_hyperparams& h) const {
    constexpr const char* op = "tessel::optim::injected::adam";
    detail::check_decay(op, "b1", h.b1);
    detail::check_decay(op, "b2", h.b2);
    detail::check_nonnegative(op, "eps", h.eps);
    detail::check_nonnegative(op, "eps_root", h.eps_root);
    std::get<3>(s) = {detail::values_of(h.learning_rate, op), detail::f32_leaf(h.b1), detail::f32_leaf(1.0 - h.b1),
                      detail::f32_leaf(h.b2),  detail::f32_leaf(1.0 - h.b2),       detail::f32_leaf(h.eps),
                      detail::f32_leaf(h.eps_root)};
  }

  // (updates like grads, the next state), as optim::adam; params are accepted for optax's signature and unused.
  template <class G, class S, class... P>
    requires(sizeof...(P) <= 1)
  constexpr auto update(const G& grads, const S& s, const P&... params) const {
    if constexpr (!tessel::optim::detail::all_traced<G, S, P...>) {
      return jit(tessel::optim::detail::update_fn<adam>{})(grads, s, params...);
    } else if constexpr (detail::check_injected_state<adam, S, G>()) {
      const auto& [count, mu, nu, values] = s;
      auto [direction, next_count, next_mu, next_nu] = detail::scale_by_adam(grads, count, mu, nu, values);
      return std::make_tuple(detail::scale_by_learning_rate_values(direction, values.learning_rate, count),
                             S{next_count, next_mu, next_nu, values});
    }
  }
};

// optax.inject_hyperparams(optax.adamw): the state is (count, mu, nu, values); the decay is applied for
// every value (a zero decay adds 0 * params).
struct adamw {
  template <class P>
  using state = std::tuple<count_t<P>, P, P, detail::values_for<P, adamw_values>>;

  template <class P>
  state<P> init(const P& params, const adamw_hyperparams& h) const {
    static_assert(detail::check_concrete_init<P>());
    state<P> s{zero_count(params), zeros_like(params), zeros_like(params), {}};
    set(s, h);
    return s;
  }

  // Replaces the values from the next update on; throws std::invalid_argument for an invalid one.
  template <class P>
  void set(state<P>& s, const adamw_hyperparams& h) const {
    constexpr const char* op = "tessel::optim::injected::adamw";
    detail::check_decay(op, "b1", h.b1);
    detail::check_decay(op, "b2", h.b2);
    detail::check_nonnegative(op, "eps", h.eps);
    detail::check_nonnegative(op, "eps_root", h.eps_root);
    detail::check_nonnegative(op, "weight_decay", h.weight_decay);
    std::get<3>(s) = {detail::values_of(h.learning_rate, op), detail::f32_leaf(h.b1), detail::f32_leaf(1.0 - h.b1),
                      detail::f32_leaf(h.b2),  detail::f32_leaf(1.0 - h.b2),       detail::f32_leaf(h.eps),
                      detail::f32_leaf(h.eps_root), detail::f32_leaf(h.weight_decay)};
  }

  // (updates like grads, the next state), as optim::adamw.
  template <class G, class S, class P>
  constexpr auto update(const G& grads, const S& s, const P& params) const {
    if constexpr (!tessel::optim::detail::all_traced<G, S, P>) {
      return jit(tessel::optim::detail::update_fn<adamw>{})(grads, s, params);
    } else if constexpr (detail::check_injected_state<adamw, S, G>()) {
      const auto& count = std::get<0>(s);
      const auto& values = std::get<3>(s);  // not a structured binding: see sgd
      auto [direction, next_count, next_mu, next_nu] = detail::scale_by_adam(grads, count, std::get<1>(s), std::get<2>(s), values);
      const auto decay = [&](auto u, auto p) { return u + detail::hyper_like<decltype(u)>(values.weight_decay) * p; };
      const G decayed = tree::map(decay, direction, params);
      return std::make_tuple(detail::scale_by_learning_rate_values(decayed, values.learning_rate, count),
                             S{next_count, next_mu, next_nu, values});
    }
  }
};

// The learning rate the next update of an injected optimizer's state uses (its schedule at the state's count).
template <class... S>
float learning_rate_at(const std::tuple<S...>& state) {
  const auto& values = std::get<sizeof...(S) - 1>(state);
  return jit(detail::learning_rate_at_fn{})(std::get<0>(state), values.learning_rate)[0];
}

}  // namespace injected
}  // namespace tessel::optim
