// Run-time hyper-parameters (optim/injected.hpp): each injected optimizer against the compile-time one
// with the same numbers, step by step, bit for bit (the compile-time ones match optax: sgd_test, adam_test,
// schedule_test), one object serving two learning rates, a schedule changed at run time, the update
// inside a traced step, and invalid values.
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>

#include "reference.hpp"
#include "tessel/ops/reductions.hpp"
#include "tessel/optim/adam.hpp"
#include "tessel/optim/adamw.hpp"
#include "tessel/optim/injected.hpp"
#include "tessel/optim/sgd.hpp"
#include "tessel/transform/grad.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
using vec = tensor<float, shape<16>>;
namespace optim = tessel::optim;
namespace injected = tessel::optim::injected;

// Gradients that change from step to step: x^3 - 1 elementwise.
constexpr auto loss = [](auto x) { return tessel::sum(x * x * x * x) * 0.25f - tessel::sum(x); };

// Steps the compile-time optimizer and the injected one from the same parameters; every step's
// parameters must be identical.
template <class Compiled, class Injected, class Hyper>
void expect_same_steps(const Compiled& compiled, const Injected& inj, const Hyper& hyper, int steps) {
  vec p = random_tensor<float, shape<16>>(11, -1.5, 1.5), q = p;
  auto s = compiled.init(p);
  auto t = inj.init(q, hyper);
  for (int i = 0; i < steps; ++i) {
    auto [u, next_s] = compiled.update(tessel::grad(loss)(p), s, p);
    auto [v, next_t] = inj.update(tessel::grad(loss)(q), t, q);
    p = optim::apply_updates(p, u);
    q = optim::apply_updates(q, v);
    s = std::move(next_s);
    t = std::move(next_t);
    ASSERT_EQ(p, q) << "step " << i << ":\n" << p << "\n" << q;
  }
}

TEST(Injected, SgdMatchesTheCompiledOne) {
  expect_same_steps(optim::sgd<0.05>{}, injected::sgd<>{}, optim::sgd_hyperparams{.learning_rate = 0.05}, 12);
  expect_same_steps(optim::sgd<0.05, optim::sgd_options{.momentum = 0.9}>{}, injected::sgd<>{},
                    optim::sgd_hyperparams{.learning_rate = 0.05, .momentum = 0.9}, 12);
  expect_same_steps(optim::sgd<0.05, optim::sgd_options{.momentum = 0.9, .nesterov = true}>{}, injected::sgd<true>{},
                    optim::sgd_hyperparams{.learning_rate = 0.05, .momentum = 0.9}, 12);
}

TEST(Injected, AdamAndAdamwMatchTheCompiledOnes) {
  expect_same_steps(optim::adam<0.01>{}, injected::adam{}, optim::adam_hyperparams{.learning_rate = 0.01}, 15);
  expect_same_steps(optim::adam<0.003, optim::adam_options{.b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .eps_root = 1e-9}>{},
                    injected::adam{},
                    optim::adam_hyperparams{.learning_rate = 0.003, .b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .eps_root = 1e-9},
                    15);
  expect_same_steps(optim::adamw<0.01, optim::adamw_options{.weight_decay = 0.05}>{}, injected::adamw{},
                    optim::adamw_hyperparams{.learning_rate = 0.01, .weight_decay = 0.05}, 15);
}

TEST(Injected, EverySchedule) {
  constexpr optim::cosine_decay_schedule cosine{.init_value = 0.02, .decay_steps = 10, .alpha = 0.1, .exponent = 2.0};
  constexpr optim::warmup_cosine_decay_schedule warmup{
      .init_value = 0.0, .peak_value = 0.02, .warmup_steps = 3, .decay_steps = 12, .end_value = 0.001};
  constexpr optim::linear_schedule linear{.init_value = 0.1, .end_value = 0.01, .transition_steps = 5};
  expect_same_steps(optim::adam<cosine>{}, injected::adam{}, optim::adam_hyperparams{.learning_rate = cosine}, 14);
  expect_same_steps(optim::adam<warmup>{}, injected::adam{}, optim::adam_hyperparams{.learning_rate = warmup}, 16);
  expect_same_steps(optim::sgd<linear>{}, injected::sgd<>{}, optim::sgd_hyperparams{.learning_rate = linear}, 8);
  expect_same_steps(optim::sgd<optim::constant_schedule{0.07}>{}, injected::sgd<>{},
                    optim::sgd_hyperparams{.learning_rate = optim::constant_schedule{0.07}}, 4);
}

// One object and one compiled update; the learning rate is a run-time number.
TEST(Injected, OneObjectServesTwoLearningRates) {
  const injected::adam opt;
  volatile double chosen[2] = {0.1, 0.01};  // as if read from a command line
  expect_same_steps(optim::adam<0.1>{}, opt, optim::adam_hyperparams{.learning_rate = chosen[0]}, 6);
  expect_same_steps(optim::adam<0.01>{}, opt, optim::adam_hyperparams{.learning_rate = chosen[1]}, 6);
}

// Four steps at 0.05, then a cosine decay from the fifth: the same as adam<0.05> for four steps and
// adam<cosine> from its state on.
TEST(Injected, ScheduleChangedAtRunTime) {
  constexpr optim::cosine_decay_schedule cosine{.init_value = 0.05, .decay_steps = 8};
  const injected::adam opt;
  vec p = random_tensor<float, shape<16>>(12, -1.5, 1.5), q = p;
  auto s = optim::adam<0.05>{}.init(p);
  auto t = opt.init(q, {.learning_rate = 0.05});
  for (int i = 0; i < 10; ++i) {
    if (i == 4) {
      opt.set(t, {.learning_rate = cosine});
      EXPECT_EQ(injected::learning_rate_at(t), cosine(4));
    }
    auto [u, next_s] = i < 4 ? optim::adam<0.05>{}.update(tessel::grad(loss)(p), s)
                             : optim::adam<cosine>{}.update(tessel::grad(loss)(p), s);
    auto [v, next_t] = opt.update(tessel::grad(loss)(q), t);
    p = optim::apply_updates(p, u);
    q = optim::apply_updates(q, v);
    s = std::move(next_s);
    t = std::move(next_t);
    ASSERT_EQ(p, q) << "step " << i;
  }
  EXPECT_EQ(std::get<0>(t)[0], 10);
}

// Inside a jitted train step the values are tracers: one program runs both learning rates.
TEST(Injected, InsideATracedStep) {
  const auto step = tessel::jit([](auto p, auto s) {
    auto [u, next] = injected::adam{}.update(tessel::grad(loss)(p), s);
    return std::make_tuple(optim::apply_updates(p, u), next);
  });
  const auto compiled_step = tessel::jit([](auto p, auto s) {
    auto [u, next] = optim::adam<0.02>{}.update(tessel::grad(loss)(p), s);
    return std::make_tuple(optim::apply_updates(p, u), next);
  });
  vec p = random_tensor<float, shape<16>>(13, -1.5, 1.5), q = p, r = p;
  auto s = optim::adam<0.02>{}.init(p);
  auto t = injected::adam{}.init(q, {.learning_rate = 0.02});
  auto t2 = injected::adam{}.init(r, {.learning_rate = 0.002});
  for (int i = 0; i < 5; ++i) {
    std::tie(p, s) = compiled_step(p, s);
    std::tie(q, t) = step(q, t);
    std::tie(r, t2) = step(r, t2);
    ASSERT_EQ(p, q) << "step " << i;
  }
  EXPECT_FALSE(p == r);
  EXPECT_NEAR(injected::learning_rate_at(t2), 0.002f, 0);
}

template <class F>
std::string thrown_by(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(Injected, InvalidValuesThrowNamingThem) {
  const vec p{};
  EXPECT_EQ(thrown_by([&] { (void)injected::adam{}.init(p, {.learning_rate = 1e-3, .b1 = 1.0}); }),
            "tessel::optim::injected::adam: b1 = 1.000000 must be in [0, 1)");
  EXPECT_EQ(thrown_by([&] { (void)injected::sgd<>{}.init(p, {.learning_rate = -0.1}); }),
            "tessel::optim::injected::sgd: the learning rate (at its peak) = -0.100000 must be finite and at least 0");
  EXPECT_NE(thrown_by([&] { (void)injected::adamw{}.init(p, {.learning_rate = NAN}); }).find("must be finite"),
            std::string::npos);
  EXPECT_NE(thrown_by([&] { (void)injected::adamw{}.init(p, {.learning_rate = 1e-3, .weight_decay = -1}); })
                .find("weight_decay = -1.000000"),
            std::string::npos);
  EXPECT_NE(thrown_by([&] {
              (void)injected::adam{}.init(p, {.learning_rate = optim::cosine_decay_schedule{.init_value = 1, .decay_steps = 0}});
            }).find("decay_steps must be positive"),
            std::string::npos);
  EXPECT_NE(thrown_by([&] {
              (void)injected::sgd<>{}.init(p, {.learning_rate = optim::linear_schedule{1, 0, 10, 5}});
            }).find("transition_begin = 5"),
            std::string::npos);
  // A failed set leaves the state as it was.
  auto s = injected::adam{}.init(p, {.learning_rate = 0.5});
  EXPECT_THROW(injected::adam{}.set(s, {.learning_rate = 1e-3, .b2 = -0.5}), std::invalid_argument);
  EXPECT_EQ(injected::learning_rate_at(s), 0.5f);
}
}  // namespace
