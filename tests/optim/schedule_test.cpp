// Schedules: optax's formulas at chosen counts against double references, the traced and concrete
// paths agreeing, invalid hyper-parameters rejected, and a schedule as an optimizer's learning rate.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <stdexcept>

#include "reference.hpp"
#include "tessel/optim/schedule.hpp"
#include "tessel/optim/sgd.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::ulp_error;
namespace optim = tessel::optim;

constexpr optim::cosine_decay_schedule cosine{.init_value = 0.1, .decay_steps = 10, .alpha = 0.05};
constexpr optim::warmup_cosine_decay_schedule warmup{
    .init_value = 1e-4, .peak_value = 1e-3, .warmup_steps = 4, .decay_steps = 12, .end_value = 1e-4};
constexpr optim::linear_schedule linear{
    .init_value = 1.0, .end_value = 0.25, .transition_steps = 6, .transition_begin = 2};

double cosine_reference(double init, double steps, double alpha, double count) {
  const double c = std::min(count, steps);
  return init * ((1 - alpha) * 0.5 * (1 + std::cos(std::numbers::pi * c / steps)) + alpha);
}

// f32 arithmetic (and tessel's cos, about 1 ULP) against a double reference.
constexpr double max_ulp = 8;

TEST(Schedule, CosineDecay) {
  for (int count : {0, 1, 3, 5, 9, 10, 15}) {
    SCOPED_TRACE(count);
    EXPECT_LE(ulp_error(cosine(count), cosine_reference(0.1, 10, 0.05, count)), max_ulp);
  }
  EXPECT_FLOAT_EQ(cosine(0), 0.1f);
  EXPECT_FLOAT_EQ(cosine(10), 0.005f);  // alpha * init_value from decay_steps on
}

TEST(Schedule, WarmupThenCosineDecay) {
  for (int count = 0; count <= 14; ++count) {
    SCOPED_TRACE(count);
    // optax's linear part, (init - peak) * frac + peak, with f32 constants: their rounding is amplified
    // by the cancellation at count 0, and optax has it too.
    const double rise = static_cast<float>(1e-4 - 1e-3), peak = static_cast<float>(1e-3);
    const double expected = count < 4 ? rise * (1 - count / 4.0) + peak : cosine_reference(1e-3, 8, 0.1, count - 4);
    EXPECT_LE(ulp_error(warmup(count), expected), max_ulp);
  }
  EXPECT_FLOAT_EQ(warmup(4), 1e-3f);
  EXPECT_FLOAT_EQ(warmup(12), 1e-4f);
}

TEST(Schedule, LinearWithTransitionBegin) {
  const double expected[] = {1.0, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.25, 0.25};
  for (int count = 0; count <= 10; ++count) {
    EXPECT_FLOAT_EQ(linear(count), static_cast<float>(expected[count])) << count;
  }
  constexpr optim::linear_schedule flat{.init_value = 0.5, .end_value = 0.0, .transition_steps = 0};
  EXPECT_EQ(flat(7), 0.5f);  // no transition: init_value throughout, as optax
  EXPECT_EQ(optim::constant_schedule{.value = 0.02}(123), 0.02f);
}

TEST(Schedule, TracedCountGivesTheConcreteValues) {
  const auto all = tessel::jit([](auto count) {
    return std::make_tuple(cosine(count), warmup(count), linear(count), optim::learning_rate(warmup)(count));
  });
  for (std::int32_t count : {0, 2, 5, 11, 40}) {
    const auto [c, w, l, as_learning_rate] = all(count);
    EXPECT_EQ(as_learning_rate[0], w[0]);
    EXPECT_FLOAT_EQ(c[0], cosine(count)) << count;
    EXPECT_FLOAT_EQ(w[0], warmup(count)) << count;
    EXPECT_FLOAT_EQ(l[0], linear(count)) << count;
  }
}

TEST(Schedule, InvalidHyperParametersAreRejected) {
  constexpr optim::cosine_decay_schedule no_steps{.init_value = 0.1, .decay_steps = 0};
  static_assert(no_steps.error() != nullptr);
  EXPECT_THROW((void)no_steps(3), std::invalid_argument);
  constexpr optim::warmup_cosine_decay_schedule all_warmup{
      .init_value = 0, .peak_value = 1, .warmup_steps = 10, .decay_steps = 10};
  EXPECT_THROW((void)all_warmup(3), std::invalid_argument);
  static_assert(optim::learning_rate(no_steps).error() != nullptr);
}

// The optimizer evaluates its schedule at the count before the step (optax.scale_by_schedule).
TEST(Schedule, AsLearningRateOfSgd) {
  const optim::sgd<cosine> opt;
  const tensor<float, shape<2>> g{2.0f, -0.5f};
  auto state = opt.init(g);
  for (int step = 0; step < 4; ++step) {
    auto [u, next] = opt.update(g, state);
    for (std::size_t i = 0; i < 2; ++i) EXPECT_FLOAT_EQ(u[i], -cosine(step) * g[i]) << step;
    state = std::move(next);
  }
  EXPECT_EQ(optim::count(state)[0], 4);
}
}  // namespace
