// grad and jvp through an unrolled scan (transform/scan.hpp's unroll): the same derivatives as unroll 1.
#include "tessel/transform/grad.hpp"
#include "unroll_cases.hpp"

namespace {
using namespace unroll_cases;
using tessel::testing::all_close;

// grad and jvp see an ordinary scan (with U copies of the body): the same derivatives as unroll 1, up
// to the order in which the per-step weight gradients are summed.
template <int Unroll, bool Reverse>
constexpr auto unrolled_loss = [](auto s, auto xs, auto gates, auto w, auto u) {
  auto [last, ys] = scanned<Unroll, Reverse>(s, xs, gates, w, u);
  return tessel::sum(last.h * last.m) + tessel::sum(std::get<0>(ys) * std::get<0>(ys)) + tessel::mean(std::get<1>(ys).m);
};

template <int Unroll, bool Reverse>
void expect_same_gradient() {
  const case_inputs in;
  const auto want = tessel::grad<0, 1, 2, 3, 4>(unrolled_loss<1, Reverse>)(in.s0, in.xs, in.gates, in.w, in.u);
  const auto got = tessel::grad<0, 1, 2, 3, 4>(unrolled_loss<Unroll, Reverse>)(in.s0, in.xs, in.gates, in.w, in.u);
  const tessel::tolerance tol{.rtol = 1e-5, .atol = 1e-6};
  EXPECT_TRUE(all_close(std::get<0>(got).h, std::get<0>(want).h, tol)) << "unroll " << Unroll;
  EXPECT_TRUE(all_close(std::get<0>(got).m, std::get<0>(want).m, tol)) << "unroll " << Unroll;
  EXPECT_TRUE(all_close(std::get<1>(got), std::get<1>(want), tol)) << "unroll " << Unroll;
  EXPECT_TRUE(all_close(std::get<2>(got), std::get<2>(want), tol)) << "unroll " << Unroll;
  EXPECT_TRUE(all_close(std::get<3>(got), std::get<3>(want), tol)) << "unroll " << Unroll;
  EXPECT_TRUE(all_close(std::get<4>(got), std::get<4>(want), tol)) << "unroll " << Unroll;
}

// A smaller cell for the other unroll values (the planner's constant evaluation grows with the program;
// clang's default step limit is the bound).
template <int Unroll, bool Reverse>
constexpr auto small_loss = [](auto h, auto xs, auto w) {
  auto [last, hs] = tessel::scan(
      [&](auto h, auto x) {
        auto n = tessel::tanh(tessel::matmul(h, w) + x);
        return std::tuple{n, n};
      },
      h, xs, {.reverse = Reverse, .unroll = Unroll});
  return tessel::sum(last * last) + tessel::sum(hs * xs);
};

template <int Unroll, bool Reverse>
void expect_same_small_gradient() {
  const auto h = random_tensor<float, shape<1, 8>>(51);
  const auto xs = random_tensor<float, shape<L, 1, 8>>(52);
  const auto w = random_tensor<float, shape<8, 8>>(53, -0.5, 0.5);
  const auto [eh, exs, ew] = tessel::grad<0, 1, 2>(small_loss<1, Reverse>)(h, xs, w);
  const auto [gh, gxs, gw] = tessel::grad<0, 1, 2>(small_loss<Unroll, Reverse>)(h, xs, w);
  const tessel::tolerance tol{.rtol = 1e-5, .atol = 1e-6};
  EXPECT_TRUE(all_close(gh, eh, tol)) << "unroll " << Unroll;
  EXPECT_TRUE(all_close(gxs, exs, tol)) << "unroll " << Unroll;
  EXPECT_TRUE(all_close(gw, ew, tol)) << "unroll " << Unroll;
}

TEST(ScanUnroll, GradientMatchesUnroll1) {
  expect_same_gradient<3, true>();          // struct carry: 3 loop iterations and 1 step after
  expect_same_small_gradient<4, false>();   // 2 loop iterations and 2 steps after
  expect_same_small_gradient<5, true>();    // 2 loop iterations, no remainder
  expect_same_small_gradient<16, false>();  // no loop
}

template <int Unroll>
constexpr auto jvp_of_loss = [](auto h, auto xs, auto w, auto th, auto txs, auto tw) {
  return tessel::jvp(small_loss<Unroll, false>, std::tuple{h, xs, w}, std::tuple{th, txs, tw});
};

TEST(ScanUnroll, JvpMatchesUnroll1) {
  const auto h = random_tensor<float, shape<1, 8>>(41);
  const auto xs = random_tensor<float, shape<L, 1, 8>>(42);
  const auto w = random_tensor<float, shape<8, 8>>(43, -0.5, 0.5);
  const auto th = random_tensor<float, shape<1, 8>>(44);
  const auto txs = random_tensor<float, shape<L, 1, 8>>(45);
  const auto tw = random_tensor<float, shape<8, 8>>(46);
  const auto [v1, t1] = tessel::jit(jvp_of_loss<1>)(h, xs, w, th, txs, tw);
  const auto [v4, t4] = tessel::jit(jvp_of_loss<4>)(h, xs, w, th, txs, tw);
  EXPECT_TRUE(bitwise_equal(v4, v1));
  EXPECT_TRUE(all_close(t4, t1, {.rtol = 1e-5, .atol = 1e-6}));
}
}  // namespace
