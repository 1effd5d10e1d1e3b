// adam and adamw: optax's documented examples, and the first two steps (bias correction with count 1
// and 2) against references computed in double from optax's f32 constants.
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>

#include "reference.hpp"
#include "tessel/ops/reductions.hpp"
#include "tessel/optim/adam.hpp"
#include "tessel/optim/adamw.hpp"
#include "tessel/transform/grad.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::within_ulp;
using vec = tensor<float, shape<3>>;
namespace optim = tessel::optim;

constexpr auto f = [](auto x) { return tessel::sum(x * x); };

// The loop of optax's docstrings: five steps on sum(x^2) from [1, 2, 3], the loss printed after each update.
template <class Solver>
std::string optax_example(Solver solver) {
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
  return printed;
}

TEST(Adam, OptaxDocstringExample) {
  EXPECT_EQ(optax_example(optim::adam<0.003>{}), "1.40E+01 1.39E+01 1.39E+01 1.39E+01 1.38E+01 ");
}

TEST(Adamw, OptaxDocstringExample) {
  EXPECT_EQ(optax_example(optim::adamw<0.003>{}), "1.40E+01 1.39E+01 1.39E+01 1.39E+01 1.38E+01 ");
}

// Python floats become f32 where they meet arrays; 1 - b is taken in double first, 1 - b^count in f32.
constexpr double f32(double x) { return static_cast<float>(x); }

struct adam_reference {
  double lr, b1, b2, eps, wd;
  double mu[3]{}, nu[3]{};
  int count = 0;
  // One step's update for gradient g (and parameters p for the decay), advancing mu, nu and count.
  void step(const vec& g, const vec& p, double* u) {
    ++count;
    const double c1 = 1.0 - std::pow(static_cast<float>(b1), static_cast<float>(count));  // f32 pow, exact 1 - x
    const double c2 = 1.0 - std::pow(static_cast<float>(b2), static_cast<float>(count));
    for (int i = 0; i < 3; ++i) {
      mu[i] = f32(1.0 - b1) * g[i] + f32(b1) * mu[i];
      nu[i] = f32(1.0 - b2) * g[i] * g[i] + f32(b2) * nu[i];
      u[i] = -f32(lr) * (mu[i] / c1 / (std::sqrt(nu[i] / c2) + f32(eps)) + f32(wd) * p[i]);
    }
  }
};

const vec g1{0.5f, -1.0f, 2.0f};
const vec g2{1.5f, 0.25f, -3.0f};
const vec p0{0.3f, -0.7f, 1.1f};

TEST(Adam, FirstTwoStepsWithBiasCorrection) {
  const optim::adam<0.01> opt;
  adam_reference ref{.lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0.0};
  double u[3];
  const auto s0 = opt.init(g1);
  const auto [u1, s1] = opt.update(g1, s0);
  ref.step(g1, p0, u);
  EXPECT_TRUE(within_ulp(u1, [&](std::size_t i) { return u[i]; }, 4));
  const auto [u2, s2] = opt.update(g2, s1);
  ref.step(g2, p0, u);
  EXPECT_TRUE(within_ulp(u2, [&](std::size_t i) { return u[i]; }, 4));
  const auto& [count, mu, nu] = s2;
  EXPECT_EQ(count[0], 2);
  EXPECT_TRUE(within_ulp(mu, [&](std::size_t i) { return ref.mu[i]; }, 2));
  EXPECT_TRUE(within_ulp(nu, [&](std::size_t i) { return ref.nu[i]; }, 2));
}

TEST(Adamw, FirstTwoStepsDecayScaledByTheLearningRate) {
  const optim::adamw<0.01, optim::adamw_options{.b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .weight_decay = 0.05}> opt;
  adam_reference ref{.lr = 0.01, .b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .wd = 0.05};
  double u[3];
  const auto s0 = opt.init(p0);
  const auto [u1, s1] = opt.update(g1, s0, p0);
  ref.step(g1, p0, u);
  EXPECT_TRUE(within_ulp(u1, [&](std::size_t i) { return u[i]; }, 4));
  const auto p1 = optim::apply_updates(p0, u1);
  const auto [u2, s2] = opt.update(g2, s1, p1);
  ref.step(g2, p1, u);
  EXPECT_TRUE(within_ulp(u2, [&](std::size_t i) { return u[i]; }, 4));
  EXPECT_EQ(optim::count(s2)[0], 2);
}
}  // namespace
