// sgd: optax's documented example, and single steps of plain, momentum and Nesterov SGD against
// references computed in double from optax's f32 constants.
#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>

#include "reference.hpp"
#include "tessel/ops/reductions.hpp"
#include "tessel/optim/sgd.hpp"
#include "tessel/transform/grad.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::within_ulp;
using vec = tensor<float, shape<3>>;
namespace optim = tessel::optim;

constexpr auto f = [](auto x) { return tessel::sum(x * x); };

// optax.sgd's docstring: five steps on sum(x^2) from [1, 2, 3], the loss printed after each update.
TEST(Sgd, OptaxDocstringExample) {
  const optim::sgd<0.003> solver;
  vec params{1, 2, 3};
  auto state = solver.init(params);
  std::string printed;
  for (int i = 0; i < 5; ++i) {
    const auto grad = tessel::grad(f)(params);
    auto [updates, next] = solver.update(grad, state, params);
    params = optim::apply_updates(params, updates);
    state = std::move(next);
    char line[32];
    std::snprintf(line, sizeof line, "%.2E ", static_cast<double>(tessel::jit(f)(params)[0]));
    printed += line;
  }
  EXPECT_EQ(printed, "1.38E+01 1.37E+01 1.35E+01 1.33E+01 1.32E+01 ");
  EXPECT_EQ(optim::count(state)[0], 5);
}

constexpr double lr = static_cast<float>(0.1);  // optax rounds python floats to f32 where they meet arrays
constexpr double m = static_cast<float>(0.9);
const vec g1{0.5f, -1.0f, 2.0f};
const vec g2{1.5f, 0.25f, -3.0f};

TEST(Sgd, PlainStepIsMinusLearningRateTimesGradient) {
  const optim::sgd<0.1> opt;
  auto state = opt.init(g1);
  static_assert(std::is_same_v<decltype(state), std::tuple<tensor<std::int32_t, shape<>>>>);  // no trace kept
  const auto [u, next] = opt.update(g1, state);
  EXPECT_TRUE(within_ulp(u, [&](std::size_t i) { return -lr * g1[i]; }, 0.5));
  EXPECT_EQ(optim::count(next)[0], 1);
}

TEST(Sgd, MomentumTraceOverTwoSteps) {
  const optim::sgd<0.1, optim::sgd_options{.momentum = 0.9}> opt;
  const auto s0 = opt.init(g1);
  const auto [u1, s1] = opt.update(g1, s0);
  const auto [u2, s2] = opt.update(g2, s1);
  // trace_1 = g1; trace_2 = g2 + m trace_1; u = -lr trace.
  EXPECT_TRUE(within_ulp(u1, [&](std::size_t i) { return -lr * g1[i]; }, 1));
  EXPECT_TRUE(within_ulp(std::get<1>(s2), [&](std::size_t i) { return g2[i] + m * g1[i]; }, 1));
  EXPECT_TRUE(within_ulp(u2, [&](std::size_t i) { return -lr * (g2[i] + m * g1[i]); }, 2));
  EXPECT_EQ(optim::count(s2)[0], 2);
}

TEST(Sgd, NesterovLooksAheadAlongTheNewTrace) {
  const optim::sgd<0.1, optim::sgd_options{.momentum = 0.9, .nesterov = true}> opt;
  const auto s0 = opt.init(g1);
  const auto [u1, s1] = opt.update(g1, s0);
  const auto [u2, s2] = opt.update(g2, s1);
  // u = -lr (g + m trace_new), trace_new = g + m trace.
  EXPECT_TRUE(within_ulp(u1, [&](std::size_t i) { return -lr * (g1[i] + m * g1[i]); }, 2));
  EXPECT_TRUE(within_ulp(u2, [&](std::size_t i) { return -lr * (g2[i] + m * (g2[i] + m * g1[i])); }, 3));
  EXPECT_TRUE(within_ulp(std::get<1>(s2), [&](std::size_t i) { return g2[i] + m * g1[i]; }, 1));
}

TEST(Sgd, ApplyUpdatesAddsLeafByLeaf) {
  const auto p = optim::apply_updates(g1, g2);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(p[i], g1[i] + g2[i]);
}
}  // namespace
