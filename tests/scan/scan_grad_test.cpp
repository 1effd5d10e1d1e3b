// Gradients (and jvp) through scan and fori_loop, against the unrolled loop and finite differences.
#include <cmath>

#include "tessel/transform/grad.hpp"
#include "scan_cases.hpp"

namespace {
using namespace scan_cases;
using tessel::testing::all_close;
using tessel::testing::random_tensor;

TEST(Scan, GradientOfTheReferenceCase) {
  const auto xs = iota_tensor<shape<3>>(1, 1);
  const auto d = tessel::grad<0, 1>([](auto c, auto xs) { return std::get<0>(cumprod(c, xs)); })(one(), xs);
  EXPECT_EQ(std::get<0>(d)[0], 6.0f);
  EXPECT_EQ(std::get<1>(d)[0], 6.0f);
  EXPECT_EQ(std::get<1>(d)[1], 3.0f);
  EXPECT_EQ(std::get<1>(d)[2], 2.0f);
  // With reverse the product is the same, so are the gradients.
  const auto r = tessel::grad<1>([](auto c, auto xs) { return std::get<0>(cumprod_reverse(c, xs)); })(one(), xs);
  EXPECT_TRUE(bitwise_equal(r, std::get<1>(d)));
}

// A cell with a struct carry (two states), a tuple of xs, weights read from the enclosing function.
constexpr auto unrolled_loss = [](auto h, auto w, auto u, auto x0, auto x1, auto x2, auto x3) {
  auto step = [&](auto h, auto x) { return tessel::tanh(tessel::matmul(h, w) + tessel::matmul(x, u)); };
  auto h1 = step(h, x0);
  auto h2 = step(h1, x1);
  auto h3 = step(h2, x2);
  auto h4 = step(h3, x3);
  return tessel::sum(h4 * h4) + tessel::sum(h1 + h2 * 2.0f + h3 * 3.0f + h4 * 4.0f);
};
constexpr auto scanned_loss = [](auto h, auto w, auto u, auto xs, auto weights) {
  auto [last, hs] = tessel::scan(
      [&](auto h, auto x) {
        auto n = tessel::tanh(tessel::matmul(h, w) + tessel::matmul(x, u));
        return std::tuple{n, n};
      },
      h, xs);
  return tessel::sum(last * last) + tessel::sum(hs * weights);
};

TEST(Scan, GradientMatchesTheUnrolledLoop) {
  const auto h = random_tensor<float, shape<1, 8>>(11);
  const auto w = random_tensor<float, shape<8, 8>>(12, -0.5, 0.5);
  const auto u = random_tensor<float, shape<4, 8>>(13);
  const auto xs = random_tensor<float, shape<4, 1, 4>>(14);
  std::array<tensor<float, shape<1, 4>>, 4> x{};
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) x[i][j] = xs[i * 4 + j];
  tensor<float, shape<4, 1, 8>> weights;
  for (std::size_t i = 0; i < weights.size; ++i) weights[i] = static_cast<float>(i / 8 + 1);
  const auto loss_scan = tessel::jit(scanned_loss)(h, w, u, xs, weights);
  const auto loss_unrolled = tessel::jit(unrolled_loss)(h, w, u, x[0], x[1], x[2], x[3]);
  EXPECT_TRUE(all_close(loss_scan, loss_unrolled, {.rtol = 1e-6, .atol = 1e-6}));
  const auto [dh, dw, du, dxs] = tessel::grad<0, 1, 2, 3>(scanned_loss)(h, w, u, xs, weights);
  const auto [eh, ew, eu, e0, e1, e2, e3] = tessel::grad<0, 1, 2, 3, 4, 5, 6>(unrolled_loss)(h, w, u, x[0], x[1], x[2], x[3]);
  const tessel::tolerance tol{.rtol = 1e-5, .atol = 1e-6};
  EXPECT_TRUE(all_close(dh, eh, tol));
  EXPECT_TRUE(all_close(dw, ew, tol));
  EXPECT_TRUE(all_close(du, eu, tol));
  const std::array<tensor<float, shape<1, 4>>, 4> ex{e0, e1, e2, e3};
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) EXPECT_NEAR(dxs[i * 4 + j], ex[i][j], 1e-5) << "x step " << i;
}

constexpr auto nested_loss = [](auto c, auto xs, auto w) {
  auto [total, rows] = tessel::scan([&](auto acc, auto row) {
    auto [inner, partial] = tessel::scan([&](auto a, auto x) { return std::tuple{tessel::tanh(a * w + x), a * x}; }, acc, row);
    return std::tuple{inner, partial};
  }, c, xs);
  return total + tessel::sum(rows * rows);
};

TEST(Scan, GradientOfANestedScan) {
  const auto xs = random_tensor<float, shape<3, 4>>(31);
  const auto c = random_tensor<float, shape<>>(32);
  const auto w = random_tensor<float, shape<>>(33);
  const auto [dc, dxs, dw] = tessel::grad<0, 1, 2>(nested_loss)(c, xs, w);
  auto loss = [&](double a, std::array<double, 12> x, double wv) {
    double total = 0;
    for (std::size_t i = 0; i < 12; ++i) {
      const double y = a * x[i];
      a = std::tanh(a * wv + x[i]);
      total += y * y;
    }
    return total + a;
  };
  std::array<double, 12> x0{};
  for (std::size_t i = 0; i < 12; ++i) x0[i] = xs[i];
  const double h = 1e-6;
  EXPECT_NEAR(dc[0], (loss(c[0] + h, x0, w[0]) - loss(c[0] - h, x0, w[0])) / (2 * h), 1e-3);
  EXPECT_NEAR(dw[0], (loss(c[0], x0, w[0] + h) - loss(c[0], x0, w[0] - h)) / (2 * h), 1e-3);
  for (std::size_t i = 0; i < 12; ++i) {
    auto xp = x0, xm = x0;
    xp[i] += h, xm[i] -= h;
    EXPECT_NEAR(dxs[i], (loss(c[0], xp, w[0]) - loss(c[0], xm, w[0])) / (2 * h), 1e-3) << "x " << i;
  }
}

constexpr auto sine_scan = [](auto c, auto xs) {
  return std::get<0>(tessel::scan([](auto a, auto x) { return std::tuple{tessel::sin(a * x) + a, a}; }, c, xs));
};

TEST(Scan, JvpMatchesFiniteDifferences) {
  const auto c = random_tensor<float, shape<2>>(41);
  const auto xs = random_tensor<float, shape<5, 2>>(42);
  const auto tc = random_tensor<float, shape<2>>(43);
  const auto txs = random_tensor<float, shape<5, 2>>(44);
  const auto [value, tangent] = tessel::jit([](auto c, auto xs, auto tc, auto txs) {
    return tessel::jvp(sine_scan, std::make_tuple(c, xs), std::make_tuple(tc, txs));
  })(c, xs, tc, txs);
  auto run = [&](double e, std::size_t j) {
    double a = c[j] + e * tc[j];
    for (std::size_t i = 0; i < 5; ++i) a = std::sin(a * (xs[i * 2 + j] + e * txs[i * 2 + j])) + a;
    return a;
  };
  for (std::size_t j = 0; j < 2; ++j) {
    EXPECT_NEAR(value[j], run(0, j), 1e-5);
    EXPECT_NEAR(tangent[j], (run(1e-6, j) - run(-1e-6, j)) / 2e-6, 1e-3);
  }
}

TEST(ForiLoop, GradientFlowsThroughTheValue) {
  tensor<float, shape<>> x;
  x[0] = 1.5f;
  // v -> v * v, three times: x^8, derivative 8 x^7.
  const auto d = tessel::grad([](auto v) { return tessel::fori_loop<0, 3>([](auto, auto a) { return a * a; }, v); })(x);
  EXPECT_NEAR(d[0], 8 * std::pow(1.5, 7), 1e-3);
}

constexpr auto power8 = [](auto v) { return tessel::fori_loop<0, 3>([](auto, auto a) { return a * a; }, v); };
constexpr auto dpower8 = [](auto v) { return tessel::grad(power8)(v); };

TEST(ForiLoop, SecondDerivative) {
  tensor<float, shape<>> x;
  x[0] = 1.25f;
  // x^8 again: the second derivative 56 x^6 differentiates the backward scan itself.
  const auto d2 = tessel::grad(dpower8)(x);
  EXPECT_NEAR(d2[0], 56 * std::pow(1.25, 6), 1e-3);
}

TEST(Scan, ComposesWithJitOfGrad) {
  const auto xs = iota_tensor<shape<3>>(1, 1);
  const auto d = tessel::jit(tessel::grad<1>([](auto c, auto xs) { return std::get<0>(cumprod(c, xs)); }))(one(), xs);
  EXPECT_EQ(d[0], 6.0f);
  EXPECT_EQ(d[1], 3.0f);
  EXPECT_EQ(d[2], 2.0f);
}

}  // namespace
