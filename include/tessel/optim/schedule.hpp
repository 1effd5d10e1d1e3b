#pragma once
// Learning-rate schedules with optax's formulas (optax/schedules/_schedule.py), as values that can be
// an optimizer's template argument:
//
//   constexpr tessel::optim::warmup_cosine_decay_schedule lr{
//       .init_value = 0.0, .peak_value = 1e-3, .warmup_steps = 100, .decay_steps = 1000};
//   tessel::optim::adamw<lr> opt;   // the optimizer feeds its step count to lr (see learning_rate below)
//   float now = lr(250);            // a concrete count: the same program, jitted
//
// Called with a traced count (s32[]) a schedule returns an f32[] tracer; called with an integer it
// returns a float computed by exactly the same f32 operations. As in JAX, the count is int32 and the
// arithmetic f32 (python-float hyper-parameters are rounded to f32 where they meet the count).

#include <concepts>
#include <cstdint>
#include <numbers>
#include <stdexcept>

#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/optim/base.hpp"
#include "tessel/prim/convert_element_type.hpp"
#include "tessel/prim/cos.hpp"
#include "tessel/prim/div.hpp"
#include "tessel/prim/max.hpp"
#include "tessel/prim/min.hpp"
#include "tessel/prim/mul.hpp"
#include "tessel/prim/neg.hpp"
#include "tessel/prim/pow.hpp"
#include "tessel/prim/sub.hpp"
#include "tessel/jit.hpp"

namespace tessel::optim {

// A concrete step count: an integer or an s32[] tensor. The schedules take it through templates, so
// that their jitted programs are traced only where a schedule is evaluated on one (tracing the three of
// them cost every translation unit that included this header about a second).
template <class C>
concept ConcreteCount = std::integral<C> || std::same_as<C, tensor<std::int32_t, shape<>>>;

namespace detail {

// The formulas, on tracers only: hyper-parameters arrive as literals (traced count) or as jit
// arguments (concrete count), so both paths run the same f32 operations.

// polynomial_schedule with power 1: (init - end) * (1 - clip(count - begin, 0, steps) / steps) + end.
template <Traced C, Traced F, Traced I>
constexpr auto linear_value(C count, F init_minus_end, F end, I steps, I begin) {
  const auto clipped = tessel::min(tessel::max(count - begin, 0), steps);
  const auto frac =
      1.0 - tessel::convert_element_type<float>(clipped) / tessel::convert_element_type<float>(steps);
  return init_minus_end * frac + end;
}

// init * ((1 - alpha) * (0.5 (1 + cos(pi min(count, steps) / steps)))^exponent + alpha).
template <Traced C, Traced F>
constexpr auto cosine_decay_value(C count, F init, F steps, F one_minus_alpha, F alpha, F exponent) {
  const auto t = tessel::min(tessel::convert_element_type<float>(count), steps);
  const auto cosine = 0.5 * (1.0 + tessel::cos(std::numbers::pi * t / steps));
  return init * (one_minus_alpha * tessel::pow(cosine, exponent) + alpha);
}

// optax.join_schedules([linear warmup, cosine decay], [warmup]).
template <Traced C, Traced F, Traced I>
constexpr auto warmup_cosine_value(C count, I warmup, F init_minus_peak, F peak, I warmup_steps, F cosine_steps,
                                   F one_minus_alpha, F alpha, F exponent) {
  const auto rising = linear_value(count, init_minus_peak, peak, warmup_steps, s32(count.graph, 0));
  const auto decaying = cosine_decay_value(count - warmup, peak, cosine_steps, one_minus_alpha, alpha, exponent);
  return tessel::select(count < warmup, rising, decaying);
}

struct linear_fn {
  template <class... A>
  constexpr auto operator()(A... a) const {
    return linear_value(a...);
  }
};
struct cosine_decay_fn {
  template <class... A>
  constexpr auto operator()(A... a) const {
    return cosine_decay_value(a...);
  }
};
struct warmup_cosine_fn {
  template <class... A>
  constexpr auto operator()(A... a) const {
    return warmup_cosine_value(a...);
  }
};

// A concrete step count, int32 as in JAX (an integer converts to it, as a Python int does).
template <class C>
std::int32_t count_of(const C& count) {
  if constexpr (std::integral<C>) return static_cast<std::int32_t>(count);
  else return count[0];
}

// Reached only in constant evaluation, where calling it stops compilation at the invalid schedule.
inline void invalid_schedule(const char* why) { throw std::invalid_argument(why); }

}  // namespace detail

// optax.constant_schedule(value): value at every count.
struct constant_schedule {
  double value;

  constexpr const char* error() const { return nullptr; }
  template <Traced C>
  constexpr tracer<float, shape<>> operator()(C count) const {
    return detail::f32(count.graph, value);
  }
  template <ConcreteCount C>
  float operator()(const C&) const {
    return static_cast<float>(value);
  }
};

// optax.linear_schedule(init_value, end_value, transition_steps, transition_begin): init_value before
// transition_begin, end_value after transition_begin + transition_steps, linear in between;
// transition_steps <= 0 gives init_value throughout and a negative transition_begin counts as 0 (as optax).
struct linear_schedule {
  double init_value;
  double end_value;
  std::int32_t transition_steps;
  std::int32_t transition_begin = 0;

  constexpr const char* error() const { return nullptr; }
  template <Traced C>
  constexpr tracer<float, shape<>> operator()(C count) const {
    ir::graph_builder* g = count.graph;
    if (transition_steps <= 0) return detail::f32(g, init_value);
    return detail::linear_value(count, detail::f32(g, init_value - end_value), detail::f32(g, end_value),
                                detail::s32(g, transition_steps), detail::s32(g, begin()));
  }
  template <ConcreteCount C>
  float operator()(const C& count) const {
    if (transition_steps <= 0) return static_cast<float>(init_value);
    return jit(detail::linear_fn{})(detail::count_of(count), static_cast<float>(init_value - end_value),
                                    static_cast<float>(end_value), transition_steps, begin())[0];
  }

 private:
  constexpr std::int32_t begin() const { return transition_begin < 0 ? 0 : transition_begin; }
};

// optax.cosine_decay_schedule(init_value, decay_steps, alpha, exponent):
//   init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * min(count, decay_steps) / decay_steps)))^exponent + alpha)
// so init_value at 0 and alpha * init_value from decay_steps on. decay_steps must be positive.
struct cosine_decay_schedule {
  double init_value;
  std::int32_t decay_steps;
  double alpha = 0.0;
  double exponent = 1.0;

  constexpr const char* error() const {
    return decay_steps > 0 ? nullptr
                           : "tessel::optim::cosine_decay_schedule: decay_steps must be positive (optax raises "
                             "ValueError); fix: give the number of steps over which to decay";
  }
  template <Traced C>
  constexpr tracer<float, shape<>> operator()(C count) const {
    if (error() != nullptr) detail::invalid_schedule(error());
    ir::graph_builder* g = count.graph;
    return detail::cosine_decay_value(count, detail::f32(g, init_value), detail::f32(g, decay_steps),
                                      detail::f32(g, 1.0 - alpha), detail::f32(g, alpha), detail::f32(g, exponent));
  }
  template <ConcreteCount C>
  float operator()(const C& count) const {
    if (error() != nullptr) detail::invalid_schedule(error());
    return jit(detail::cosine_decay_fn{})(detail::count_of(count), static_cast<float>(init_value), static_cast<float>(decay_steps),
                                          static_cast<float>(1.0 - alpha), static_cast<float>(alpha),
                                          static_cast<float>(exponent))[0];
  }
};

// optax.warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps, decay_steps, end_value, exponent):
// linear from init_value to peak_value over warmup_steps, then cosine decay from peak_value to end_value
// over the remaining decay_steps - warmup_steps (alpha = end_value / peak_value, 0 when peak_value is 0):
//   count < warmup_steps ? linear(count) : cosine(count - warmup_steps).
// decay_steps counts the warmup; decay_steps - warmup_steps must be positive.
struct warmup_cosine_decay_schedule {
  double init_value;
  double peak_value;
  std::int32_t warmup_steps;
  std::int32_t decay_steps;
  double end_value = 0.0;
  double exponent = 1.0;

  constexpr const char* error() const {
    return decay_steps - warmup_steps > 0
               ? nullptr
               : "tessel::optim::warmup_cosine_decay_schedule: decay_steps must exceed warmup_steps (it counts the "
                 "warmup; optax raises ValueError); fix: decay_steps = warmup_steps + the steps of the cosine decay";
  }
  template <Traced C>
  constexpr tracer<float, shape<>> operator()(C count) const {
    if (error() != nullptr) detail::invalid_schedule(error());
    ir::graph_builder* g = count.graph;
    return detail::warmup_cosine_value(count, detail::s32(g, warmup_steps), detail::f32(g, warmup_rise()),
                                       detail::f32(g, warmup_end()), detail::s32(g, warmup_length()),
                                       detail::f32(g, decay_steps - warmup_steps), detail::f32(g, 1.0 - alpha()),
                                       detail::f32(g, alpha()), detail::f32(g, exponent));
  }
  template <ConcreteCount C>
  float operator()(const C& count) const {
    if (error() != nullptr) detail::invalid_schedule(error());
    return jit(detail::warmup_cosine_fn{})(detail::count_of(count), warmup_steps, static_cast<float>(warmup_rise()),
                                           static_cast<float>(warmup_end()), warmup_length(),
                                           static_cast<float>(decay_steps - warmup_steps),
                                           static_cast<float>(1.0 - alpha()), static_cast<float>(alpha()),
                                           static_cast<float>(exponent))[0];
  }

  // The numbers of the formula (detail::warmup_cosine_value), from the fields above.
  constexpr double alpha() const { return peak_value == 0.0 ? 0.0 : end_value / peak_value; }
  // Without warmup optax's linear part is the constant init_value (never selected for counts >= 0);
  // (init - init) * frac + init over one step is that constant.
  constexpr double warmup_rise() const { return warmup_steps > 0 ? init_value - peak_value : 0.0; }
  constexpr double warmup_end() const { return warmup_steps > 0 ? peak_value : init_value; }
  constexpr std::int32_t warmup_length() const { return warmup_steps > 0 ? warmup_steps : 1; }
};

// An optimizer's learning rate as a template argument: a number (adam<1e-3>) or one of the schedules
// above (adam<cosine_decay_schedule{...}>), both converting. It holds the schedule's hyper-parameters as
// bits (optim::real), since clang 16 takes no double template arguments.
struct learning_rate {
  enum class kind_t : std::uint8_t { constant, linear, cosine_decay, warmup_cosine_decay };
  kind_t kind = kind_t::constant;
  real values[4]{};
  std::int32_t steps[2]{};

  constexpr learning_rate(double value) : kind(kind_t::constant), values{value} {}  // NOLINT: implicit on purpose
  constexpr learning_rate(constant_schedule s) : kind(kind_t::constant), values{s.value} {}  // NOLINT
  constexpr learning_rate(linear_schedule s)  // NOLINT: implicit on purpose
      : kind(kind_t::linear), values{s.init_value, s.end_value}, steps{s.transition_steps, s.transition_begin} {}
  constexpr learning_rate(cosine_decay_schedule s)  // NOLINT: implicit on purpose
      : kind(kind_t::cosine_decay), values{s.init_value, s.alpha, s.exponent}, steps{s.decay_steps} {}
  constexpr learning_rate(warmup_cosine_decay_schedule s)  // NOLINT: implicit on purpose
      : kind(kind_t::warmup_cosine_decay),
        values{s.init_value, s.peak_value, s.end_value, s.exponent},
        steps{s.warmup_steps, s.decay_steps} {}

  // f(the schedule this learning rate holds).
  template <class F>
  constexpr auto visit(F f) const {
    switch (kind) {
      case kind_t::linear: return f(linear_schedule{values[0], values[1], steps[0], steps[1]});
      case kind_t::cosine_decay: return f(cosine_decay_schedule{values[0], steps[0], values[1], values[2]});
      case kind_t::warmup_cosine_decay:
        return f(warmup_cosine_decay_schedule{values[0], values[1], steps[0], steps[1], values[2], values[3]});
      case kind_t::constant: break;
    }
    return f(constant_schedule{values[0]});
  }
  // The value at a traced count (f32[]) or a concrete one (float).
  template <class C>
  constexpr auto operator()(C count) const {
    return visit([&](const auto& schedule) { return schedule(count); });
  }
  constexpr const char* error() const {
    return visit([](const auto& schedule) { return schedule.error(); });
  }
};

namespace detail {

template <learning_rate LearningRate>
consteval bool check_learning_rate() {
  if constexpr (LearningRate.error() != nullptr) {
    raise<fit<[] { return message_builder{} << LearningRate.error(); }>()>();
    return false;
  } else {
    return true;
  }
}

// -learning_rate(count) * u, in u's dtype (optax.scale_by_learning_rate: scale(-lr) for a number,
// scale_by_schedule(lambda count: -lr(count)) for a schedule, evaluated at the count before the step).
template <learning_rate LearningRate, class U, Traced C>
constexpr U scale_by_learning_rate(const U& updates, C count) {
  if constexpr (LearningRate.kind == learning_rate::kind_t::constant) {
    return tree::map([](auto u) { return -static_cast<double>(LearningRate.values[0]) * u; }, updates);
  } else {
    const auto step_size = -LearningRate(count);
    return tree::map([&](auto u) { return as_dtype_of<decltype(u)>(step_size) * u; }, updates);
  }
}

}  // namespace detail
}  // namespace tessel::optim
