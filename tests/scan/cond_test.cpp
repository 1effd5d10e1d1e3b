// cond and switch_: a run-time value chooses the branch that runs; gradients flow through it.
#include <tuple>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/transform/cond.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/jit.hpp"
#include "tessel_test.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::all_close;
using tessel::testing::random_tensor;

constexpr auto pick = [](auto x, auto w) {
  // Which branch runs depends on the data: sum(x) > 0.
  return tessel::cond(tessel::sum(x) > 0.0f, [&](auto v) { return tessel::tanh(tessel::matmul(v, w)); },
                      [](auto v) { return v * v * -1.0f; }, x);
};

TEST(Cond, RunTimePredicateChoosesTheBranch) {
  const auto w = random_tensor<float, shape<4, 4>>(1);
  tensor<float, shape<1, 4>> pos, neg;
  for (std::size_t i = 0; i < 4; ++i) pos[i] = 0.5f + static_cast<float>(i), neg[i] = -pos[i];
  const auto f = tessel::jit(pick);
  const auto a = f(pos, w);
  const auto b = f(neg, w);
  const auto expect_a = tessel::jit([](auto v, auto w) { return tessel::tanh(tessel::matmul(v, w)); })(pos, w);
  EXPECT_TRUE(all_close(a, expect_a, {.rtol = 0, .atol = 0}));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(b[i], -(neg[i] * neg[i]));
}

TEST(Cond, GradientFlowsThroughTheTakenBranch) {
  const auto w = random_tensor<float, shape<4, 4>>(2);
  tensor<float, shape<1, 4>> pos, neg;
  for (std::size_t i = 0; i < 4; ++i) pos[i] = 0.25f + static_cast<float>(i), neg[i] = -pos[i];
  auto loss = [](auto x, auto w) { return tessel::sum(pick(x, w)); };
  const auto [dx, dw] = tessel::grad<0, 1>(loss)(pos, w);
  const auto [ex, ew] = tessel::grad<0, 1>([](auto v, auto w) { return tessel::sum(tessel::tanh(tessel::matmul(v, w))); })(pos, w);
  EXPECT_TRUE(all_close(dx, ex, {.rtol = 1e-6, .atol = 1e-7}));
  EXPECT_TRUE(all_close(dw, ew, {.rtol = 1e-6, .atol = 1e-7}));
  const auto [nx, nw] = tessel::grad<0, 1>(loss)(neg, w);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(nx[i], -2.0f * neg[i]);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(nw[i], 0.0f);  // the false branch does not read w
}

constexpr auto pick_sum = [](auto x, auto w) { return tessel::sum(pick(x, w)); };

TEST(Cond, JvpThroughTheTakenBranch) {
  const auto w = random_tensor<float, shape<4, 4>>(12);
  const auto tw = random_tensor<float, shape<4, 4>>(13);
  const auto tx = random_tensor<float, shape<1, 4>>(14);
  tensor<float, shape<1, 4>> pos;
  for (std::size_t i = 0; i < 4; ++i) pos[i] = 0.25f + static_cast<float>(i);
  const auto [value, tangent] = tessel::jit([](auto x, auto w, auto tx, auto tw) {
    return tessel::jvp(pick_sum, std::make_tuple(x, w), std::make_tuple(tx, tw));
  })(pos, w, tx, tw);
  const auto [dx, dw] = tessel::grad<0, 1>(pick_sum)(pos, w);
  double expect = 0;
  for (std::size_t i = 0; i < 4; ++i) expect += dx[i] * tx[i];
  for (std::size_t i = 0; i < 16; ++i) expect += dw[i] * tw[i];
  EXPECT_NEAR(tangent[0], expect, 1e-5 * (1 + std::abs(expect)));
  (void)value;
}

constexpr auto three_way = [](auto i, auto a, auto b) {
  return tessel::switch_(i, std::tuple{[](auto a, auto b) { return std::tuple{a + b, a}; },
                                       [](auto a, auto b) { return std::tuple{a * b, b}; },
                                       [](auto a, auto) { return std::tuple{tessel::exp(a), a * 3.0f}; }},
                         a, b);
};

TEST(Switch, IndexChoosesAndIsClamped) {
  const auto a = random_tensor<float, shape<5>>(3);
  const auto b = random_tensor<float, shape<5>>(4);
  const auto f = tessel::jit(three_way);
  for (std::int32_t i : {-2, 0, 1, 2, 7}) {
    const auto [p, q] = f(i, a, b);
    const int k = i < 0 ? 0 : i > 2 ? 2 : i;
    for (std::size_t j = 0; j < 5; ++j) {
      const float expect_p = k == 0 ? a[j] + b[j] : k == 1 ? a[j] * b[j] : std::exp(a[j]);
      const float expect_q = k == 0 ? a[j] : k == 1 ? b[j] : a[j] * 3.0f;
      EXPECT_NEAR(p[j], expect_p, 1e-6f * (1 + std::abs(expect_p))) << "index " << i;
      EXPECT_EQ(q[j], expect_q) << "index " << i;
    }
  }
}

TEST(Switch, GradientPerBranch) {
  const auto a = random_tensor<float, shape<5>>(5);
  const auto b = random_tensor<float, shape<5>>(6);
  auto loss = [](auto i, auto a, auto b) {
    auto [p, q] = three_way(i, a, b);
    return tessel::sum(p) + tessel::sum(q * q);
  };
  const auto g = tessel::jit(tessel::grad<1, 2>(loss));
  for (std::int32_t i : {0, 1, 2}) {
    const auto [da, db] = g(i, a, b);
    for (std::size_t j = 0; j < 5; ++j) {
      const float ea = i == 0 ? 1 + 2 * a[j] : i == 1 ? b[j] : std::exp(a[j]) + 18 * a[j];
      const float eb = i == 0 ? 1.0f : i == 1 ? a[j] + 2 * b[j] : 0.0f;
      EXPECT_NEAR(da[j], ea, 1e-5f * (1 + std::abs(ea))) << "index " << i;
      EXPECT_NEAR(db[j], eb, 1e-5f * (1 + std::abs(eb))) << "index " << i;
    }
  }
}

TEST(Cond, InsideAScanBody) {
  // Clip a running sum at 5: the branch is chosen again at every step.
  tensor<float, shape<6>> xs;
  for (std::size_t i = 0; i < 6; ++i) xs[i] = 2.0f;
  tensor<float, shape<>> zero;
  zero[0] = 0;
  const auto [c, ys] = tessel::jit([](auto c, auto xs) {
    return tessel::scan([](auto acc, auto x) {
      auto next = tessel::cond(acc + x > 5.0f, [](auto v) { return v * 0.0f; }, [](auto v) { return v; }, acc + x);
      return std::tuple{next, next};
    }, c, xs);
  })(zero, xs);
  (void)c;
  const float expect[] = {2, 4, 0, 2, 4, 0};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(ys[i], expect[i]);
}

constexpr auto clipped_sum = [](auto c, auto xs, auto w) {
  // A cond inside a scan body, reading a weight from outside: gradients through both.
  auto [last, ys] = tessel::scan([&](auto acc, auto x) {
    auto next = tessel::cond(tessel::sum(acc + x) > 2.0f, [&](auto v) { return tessel::tanh(v * w); }, [](auto v) { return v * 1.5f; }, acc + x);
    return std::tuple{next, next};
  }, c, xs);
  return tessel::sum(last) + tessel::sum(ys * ys);
};

TEST(Cond, GradientThroughACondInsideAScan) {
  const auto xs = random_tensor<float, shape<5, 2>>(7);
  const auto c = random_tensor<float, shape<2>>(8);
  const auto w = random_tensor<float, shape<2>>(9);
  const auto [dc, dxs, dw] = tessel::grad<0, 1, 2>(clipped_sum)(c, xs, w);
  // Central differences in f64 of the same loop, written in C++.
  auto loss = [&](std::array<double, 2> c0, const std::array<double, 10>& x, std::array<double, 2> wv) {
    std::array<double, 2> acc = c0;
    double total = 0;
    for (std::size_t t = 0; t < 5; ++t) {
      std::array<double, 2> v{acc[0] + x[t * 2], acc[1] + x[t * 2 + 1]};
      const bool big = v[0] + v[1] > 2.0;
      for (std::size_t j = 0; j < 2; ++j) acc[j] = big ? std::tanh(v[j] * wv[j]) : v[j] * 1.5;
      total += acc[0] * acc[0] + acc[1] * acc[1];
    }
    return total + acc[0] + acc[1];
  };
  std::array<double, 2> c0{c[0], c[1]}, w0{w[0], w[1]};
  std::array<double, 10> x0{};
  for (std::size_t i = 0; i < 10; ++i) x0[i] = xs[i];
  const double h = 1e-6;
  for (std::size_t j = 0; j < 2; ++j) {
    auto cp = c0, cm = c0, wp = w0, wm = w0;
    cp[j] += h, cm[j] -= h, wp[j] += h, wm[j] -= h;
    EXPECT_NEAR(dc[j], (loss(cp, x0, w0) - loss(cm, x0, w0)) / (2 * h), 1e-3);
    EXPECT_NEAR(dw[j], (loss(c0, x0, wp) - loss(c0, x0, wm)) / (2 * h), 1e-3);
  }
  for (std::size_t i = 0; i < 10; ++i) {
    auto xp = x0, xm = x0;
    xp[i] += h, xm[i] -= h;
    EXPECT_NEAR(dxs[i], (loss(c0, xp, w0) - loss(c0, xm, w0)) / (2 * h), 1e-3) << "x " << i;
  }
}

}  // namespace
