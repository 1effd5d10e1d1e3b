// checkpoint (remat): same gradients under every policy; the plan keeps less memory alive and does more
// work when forward values are recomputed (dump's peak and flops), and everything_saveable is the plain plan.
#include "gradcheck.hpp"
#include "tessel/dump.hpp"
#include "tessel/transform/remat.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
namespace policies = tessel::checkpoint_policies;

using x_t = tensor<float, shape<64, 96>>;
using w_t = tensor<float, shape<96, 96>>;
using params = std::tuple<w_t, w_t, w_t, w_t, w_t, w_t>;

constexpr auto block = [](auto h, auto wa, auto wb) {
  return tessel::tanh(tessel::matmul(tessel::tanh(tessel::matmul(h, wa)) * 1.5f, wb)) + h;
};

template <class Block>
struct chain_loss {
  constexpr auto operator()(auto p, auto x) const {
    auto h = Block{}(x, std::get<0>(p), std::get<1>(p));
    h = Block{}(h, std::get<2>(p), std::get<3>(p));
    h = Block{}(h, std::get<4>(p), std::get<5>(p));
    return tessel::mean(h * h);
  }
};
using plain = chain_loss<decltype(block)>;
using nothing = chain_loss<decltype(tessel::checkpoint(block, policies::nothing_saveable))>;
using dots = chain_loss<decltype(tessel::checkpoint(block, policies::dots_saveable))>;
using everything = chain_loss<decltype(tessel::checkpoint(block, policies::everything_saveable))>;

params make_params() {
  auto w = [](std::uint32_t s) { return random_tensor<float, shape<96, 96>>(s, -0.15, 0.15); };
  return {w(1), w(2), w(3), w(4), w(5), w(6)};
}

template <class Loss>
constexpr const auto& plan_of() {
  return decltype(tessel::jit(tessel::value_and_grad(Loss{})))::template traced_for<params, x_t>::plan;
}

template <class P>
int contractions(const P& p) {
  int n = 0;
  for (int k = 0; k < p.kernel_count; ++k) n += p.kernels[static_cast<std::size_t>(k)].kind == tessel::plan::kernel_kind::contraction;
  return n;
}

template <class Loss>
void expect_same_gradient() {
  const params p = make_params();
  const auto x = random_tensor<float, shape<64, 96>>(7);
  const auto [want_value, want] = tessel::value_and_grad(plain{})(p, x);
  const auto [value, got] = tessel::value_and_grad(Loss{})(p, x);
  EXPECT_FLOAT_EQ(value[0], want_value[0]);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto one = [&](auto i) {
      EXPECT_TRUE(tessel::testing::all_close(std::get<i()>(got), std::get<i()>(want), {.rtol = 1e-4, .atol = 1e-6})) << "weight " << i();
    };
    (one(std::integral_constant<std::size_t, I>{}), ...);
  }(std::make_index_sequence<6>{});
}

TEST(Remat, NothingSaveableGivesTheSameGradient) { expect_same_gradient<nothing>(); }
TEST(Remat, DotsSaveableGivesTheSameGradient) { expect_same_gradient<dots>(); }
TEST(Remat, EverythingSaveableGivesTheSameGradient) { expect_same_gradient<everything>(); }

TEST(Remat, GradientMatchesFiniteDifferences) {
  const auto x = random_tensor<float, shape<3, 4>>(8);
  const auto w = random_tensor<float, shape<4, 4>>(9, -0.5, 0.5);
  constexpr auto f = [](auto wa, auto h) { return tessel::sum(tessel::checkpoint(block)(h, wa, wa)); };
  tessel::testing::check_gradient(f,
                                  [](const std::vector<std::vector<double>>& a) {
                                    const auto& w = a[0];
                                    const auto& h = a[1];
                                    double s = 0;
                                    for (std::size_t i = 0; i < 3; ++i) {
                                      double t[4];
                                      for (std::size_t j = 0; j < 4; ++j) {
                                        double m = 0;
                                        for (std::size_t k = 0; k < 4; ++k) m += h[i * 4 + k] * w[k * 4 + j];
                                        t[j] = std::tanh(m) * 1.5;
                                      }
                                      for (std::size_t j = 0; j < 4; ++j) {
                                        double m = 0;
                                        for (std::size_t k = 0; k < 4; ++k) m += t[k] * w[k * 4 + j];
                                        s += std::tanh(m) + h[i * 4 + j];
                                      }
                                    }
                                    return s;
                                  },
                                  w, x);
}

TEST(Remat, PoliciesTradeMemoryForRecomputation) {
  constexpr auto& base = plan_of<plain>();
  constexpr auto& all = plan_of<everything>();
  constexpr auto& d = plan_of<dots>();
  constexpr auto& none = plan_of<nothing>();
  // everything_saveable is the plan without checkpoint.
  EXPECT_EQ(all.arena_bytes, base.arena_bytes);
  EXPECT_EQ(all.kernel_count, base.kernel_count);
  // nothing_saveable recomputes each block's two forward GEMMs; dots_saveable none. The block's last
  // tanh reads the second GEMM in its epilogue, so without checkpoint that result is never stored; saving
  // GEMM results (dots_saveable) costs memory here, recomputing everything saves it.
  EXPECT_EQ(contractions(none), contractions(base) + 6);
  EXPECT_EQ(contractions(d), contractions(base));
  EXPECT_LT(none.arena_bytes, base.arena_bytes);
  EXPECT_LT(none.arena_bytes, d.arena_bytes);
  const params p = make_params();
  const x_t x{};
  auto total_flops = [](const std::string& text) { return std::stod(text.substr(text.find("total: ") + 7)); };
  const std::string plain_text = tessel::dump(tessel::value_and_grad(plain{}), p, x);
  const std::string none_text = tessel::dump(tessel::value_and_grad(nothing{}), p, x);
  EXPECT_NE(none_text.find("optimization_barrier"), std::string::npos);
  EXPECT_GT(total_flops(none_text), total_flops(plain_text));
  EXPECT_EQ(none_text.find("peak: " + std::to_string(none.arena_bytes) + " bytes"), none_text.find("peak: "));
  std::printf("peak arena bytes: no checkpoint %zu, dots_saveable %zu, nothing_saveable %zu; contraction kernels %d / %d / %d; "
              "flops %g / %g (nothing_saveable)\n",
              base.arena_bytes, d.arena_bytes, none.arena_bytes, contractions(base), contractions(d), contractions(none),
              total_flops(plain_text), total_flops(none_text));
}

TEST(Remat, CheckpointAloneIsTheFunction) {
  const auto x = random_tensor<float, shape<64, 96>>(10);
  const params p = make_params();
  const auto want = tessel::jit(block)(x, std::get<0>(p), std::get<1>(p));
  const auto got = tessel::checkpoint(block)(x, std::get<0>(p), std::get<1>(p));
  EXPECT_TRUE(tessel::testing::all_close(got, want, {.rtol = 0, .atol = 0}));
  EXPECT_EQ((decltype(tessel::jit(block))::traced_for<x_t, w_t, w_t>::plan.kernel_count),
            (decltype(tessel::jit(tessel::checkpoint(block)))::traced_for<x_t, w_t, w_t>::plan.kernel_count));
}

constexpr auto checkpointed_sum = [](auto v) { return tessel::sum(tessel::checkpoint([](auto u) { return tessel::sin(u) * u; })(v)); };

TEST(Remat, GradOfGradThroughCheckpoint) {
  const auto x = random_tensor<float, shape<5>>(11);
  const auto h = tessel::grad([](auto v) { return tessel::sum(tessel::grad(checkpointed_sum)(v)); })(x);
  for (std::size_t i = 0; i < 5; ++i) {
    const double u = x[i];
    EXPECT_NEAR(h[i], 2 * std::cos(u) - u * std::sin(u), 1e-5);
  }
}
}  // namespace
