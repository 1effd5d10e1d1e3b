// custom_vjp: the user's reverse rule replaces the derivative of the function's nodes; values, forward
// mode and composition (jit, grad of grad) keep working.
#include "gradcheck.hpp"
#include "tessel/dump.hpp"
#include "tessel/transform/custom_vjp.hpp"
#include "tessel/transform/remat.hpp"
#include "tessel/transform/scan.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

// softplus with a rule that reuses exp(x) from the forward pass.
constexpr auto softplus = tessel::custom_vjp([](auto x) { return tessel::log(1.0f + tessel::exp(x)); },
                                             [](auto x) {
                                               auto e = tessel::exp(x);
                                               return std::make_tuple(tessel::log(1.0f + e), e);
                                             },
                                             [](auto e, auto ct) { return std::make_tuple(ct * e / (1.0f + e)); });

TEST(CustomVjp, ValueIsTheFunctionsAndGradientMatchesFiniteDifferences) {
  const auto x = random_tensor<float, shape<4, 5>>(1, -3, 3);
  const auto w = random_tensor<float, shape<4, 5>>(2);
  const auto y = tessel::jit([](auto v) { return softplus(v); })(x);
  for (std::size_t i = 0; i < 20; ++i) EXPECT_NEAR(y[i], std::log1p(std::exp(static_cast<double>(x[i]))), 1e-6);
  tessel::testing::check_gradient([](auto v, auto u) { return tessel::sum(softplus(v) * u); },
                                  [](const std::vector<std::vector<double>>& a) {
                                    double s = 0;
                                    for (std::size_t i = 0; i < a[0].size(); ++i) s += std::log1p(std::exp(a[0][i])) * a[1][i];
                                    return s;
                                  },
                                  x, w);
}

// A deliberately different rule shows that bwd, not the function's nodes, is differentiated.
constexpr auto clipped_identity = tessel::custom_vjp([](auto x) { return x * 1.0f; },
                                                     [](auto x) { return std::make_tuple(x * 1.0f, std::tuple<>{}); },
                                                     [](std::tuple<>, auto ct) { return std::make_tuple(ct * 0.25f); });

TEST(CustomVjp, TheRuleIsUsedNotTheFunction) {
  const auto x = random_tensor<float, shape<3>>(3);
  const auto g = tessel::grad([](auto v) { return tessel::sum(clipped_identity(v) * 2.0f); })(x);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(g[i], 0.5f);
}

// Two arguments; the rule's cotangents go to each, and a shared argument accumulates.
constexpr auto scaled_product = tessel::custom_vjp([](auto a, auto b) { return a * b; },
                                                   [](auto a, auto b) { return std::make_tuple(a * b, std::make_tuple(a, b)); },
                                                   [](auto res, auto ct) {
                                                     auto [a, b] = res;
                                                     return std::make_tuple(ct * b * 3.0f, ct * a * 5.0f);
                                                   });

TEST(CustomVjp, SeveralArgumentsAndAccumulation) {
  const auto a = random_tensor<float, shape<2, 3>>(4);
  const auto b = random_tensor<float, shape<2, 3>>(5);
  const auto [ga, gb] = tessel::grad<0, 1>([](auto x, auto y) { return tessel::sum(scaled_product(x, y)); })(a, b);
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(ga[i], 3 * b[i]);
    EXPECT_FLOAT_EQ(gb[i], 5 * a[i]);
  }
  // f(x, x): both cotangents reach x.
  const auto gx = tessel::grad([](auto x) { return tessel::sum(scaled_product(x, x)); })(a);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(gx[i], 8 * a[i], 1e-6);
}

TEST(CustomVjp, ForwardModeDifferentiatesTheFunction) {
  const auto x = random_tensor<float, shape<3>>(6);
  const auto v = random_tensor<float, shape<3>>(7);
  const auto [y, t] = tessel::jit([](auto p, auto d) { return tessel::jvp(clipped_identity, std::make_tuple(p), std::make_tuple(d)); })(x, v);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(y[i], x[i]);
    EXPECT_FLOAT_EQ(t[i], v[i]);
  }
}

TEST(CustomVjp, GradOfGradDifferentiatesTheRule) {
  // d/dx sum(softplus'(x)) = sigmoid'(x) = s (1 - s): the second derivative comes from bwd's nodes.
  const auto x = random_tensor<float, shape<5>>(8, -2, 2);
  const auto h = tessel::grad([](auto v) { return tessel::sum(tessel::grad([](auto u) { return tessel::sum(softplus(u)); })(v)); })(x);
  for (std::size_t i = 0; i < 5; ++i) {
    const double s = 1 / (1 + std::exp(-static_cast<double>(x[i])));
    EXPECT_NEAR(h[i], s * (1 - s), 1e-5);
  }
}

constexpr auto tree_sum = tessel::custom_vjp([](auto p) { return std::get<0>(p) + std::get<1>(p); },
                                        [](auto p) { return std::make_tuple(std::get<0>(p) + std::get<1>(p), std::tuple<>{}); },
                                        [](std::tuple<>, auto ct) { return std::make_tuple(std::make_tuple(ct * 2.0f, ct * 7.0f)); });

TEST(CustomVjp, TreeArgument) {
  using p_t = std::tuple<tensor<float, shape<3>>, tensor<float, shape<3>>>;
  p_t p{random_tensor<float, shape<3>>(9), random_tensor<float, shape<3>>(10)};
  const auto g = tessel::grad([](auto q) { return tessel::sum(tree_sum(q)); })(p);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(std::get<0>(g)[i], 2.0f);
    EXPECT_FLOAT_EQ(std::get<1>(g)[i], 7.0f);
  }
}
// In a scan body, alone or under checkpoint, the rule reads each step's own residuals: the backward
// step's copies, not the forward body's nodes (which hold only the last step's values).
constexpr auto plain_softplus = [](auto x) { return tessel::log(1.0f + tessel::exp(x)); };
template <class Softplus, bool Remat>
constexpr auto scanned_softplus = [](auto c, auto xs) {
  auto [last, ys] = tessel::scan(
      [](auto carry, auto x) {
        constexpr auto step = [](auto carry, auto x) { return Softplus{}(carry * 0.5f + x) * 0.75f; };
        auto next = [&] {
          if constexpr (Remat) return tessel::checkpoint(step, tessel::checkpoint_policies::nothing_saveable)(carry, x);
          else return step(carry, x);
        }();
        return std::tuple{next, next};
      },
      c, xs);
  return tessel::sum(last * last) + tessel::sum(ys * ys * 0.5f);
};

template <bool Remat>
void expect_scanned_rule_matches_plain() {
  const auto c = random_tensor<float, shape<5>>(11, -1, 1);
  const auto xs = random_tensor<float, shape<4, 5>>(12, -2, 2);
  const auto [gc, gx] = tessel::grad<0, 1>(scanned_softplus<decltype(softplus), Remat>)(c, xs);
  const auto [ec, ex] = tessel::grad<0, 1>(scanned_softplus<decltype(plain_softplus), Remat>)(c, xs);
  for (std::size_t i = 0; i < gc.size; ++i) EXPECT_NEAR(gc[i], ec[i], 1e-5 * (1 + std::abs(ec[i]))) << i;
  for (std::size_t i = 0; i < gx.size; ++i) EXPECT_NEAR(gx[i], ex[i], 1e-5 * (1 + std::abs(ex[i]))) << i;
}

TEST(CustomVjp, InAScanBodyEachStepReadsItsOwnResiduals) { expect_scanned_rule_matches_plain<false>(); }
TEST(CustomVjp, UnderCheckpointInAScanBodyEachStepReadsItsOwnResiduals) {
  expect_scanned_rule_matches_plain<true>();
  // Under nothing_saveable the rule's residual (exp) is recomputed in the backward step, as every other
  // value of the function: the forward scan stores what it stores for the plain function.
  using custom = decltype(tessel::jit(tessel::grad<0, 1>(scanned_softplus<decltype(softplus), true>)));
  using plain = decltype(tessel::jit(tessel::grad<0, 1>(scanned_softplus<decltype(plain_softplus), true>)));
  using c_t = tensor<float, shape<5>>;
  using xs_t = tensor<float, shape<4, 5>>;
  constexpr std::size_t custom_bytes = custom::traced_for<c_t, xs_t>::plan.arena_bytes;
  constexpr std::size_t plain_bytes = plain::traced_for<c_t, xs_t>::plan.arena_bytes;
  EXPECT_EQ(custom_bytes, plain_bytes);
}
// A call's result that a contraction reads whole is its operand's bytes, not a copy of them: with the
// function's value also read by another kernel, the plan has as many kernels as without custom_vjp.
TEST(CustomVjp, TheCallsResultIsItsOperandsBuffer) {
  using x_t = tensor<float, shape<8, 16>>;
  using w_t = tensor<float, shape<16, 4>>;
  constexpr auto custom = [](auto x, auto w, auto v) { return tessel::matmul(softplus(x), w) + tessel::matmul(plain_softplus(x), v); };
  constexpr auto plain = [](auto x, auto w, auto v) { return tessel::matmul(plain_softplus(x), w) + tessel::matmul(plain_softplus(x), v); };
  constexpr int custom_kernels = decltype(tessel::jit(custom))::traced_for<x_t, w_t, w_t>::plan.kernel_count;
  constexpr int plain_kernels = decltype(tessel::jit(plain))::traced_for<x_t, w_t, w_t>::plan.kernel_count;
  EXPECT_EQ(custom_kernels, plain_kernels);
  const auto x = random_tensor<float, shape<8, 16>>(13);
  const auto w = random_tensor<float, shape<16, 4>>(14);
  const auto v = random_tensor<float, shape<16, 4>>(15);
  EXPECT_TRUE(tessel::testing::all_close(tessel::jit(custom)(x, w, v), tessel::jit(plain)(x, w, v), {.rtol = 0, .atol = 0}));
}
}  // namespace
