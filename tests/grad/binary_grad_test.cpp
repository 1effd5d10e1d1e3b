// Binary primitives with broadcasting, select, max/min ties, and stop_gradient: grad and jvp against
// finite differences; gradients of broadcast operands sum over the broadcast axes.
#include "gradcheck.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_gradient;
using tessel::testing::random_tensor;

// loss(a, b, w) = sum(w * f(a[3,1] broadcast, b[4] broadcast)) over [3,4]; both arguments checked.
#define TESSEL_BINARY_GRAD(name, expr, ref, lo, hi)                                                         \
  TEST(BinaryGrad, name) {                                                                                 \
    const auto reference_ab = [](const std::vector<std::vector<double>>& v, bool b_first) {                \
      const auto& A = b_first ? v[1] : v[0];                                                               \
      const auto& B = b_first ? v[0] : v[1];                                                               \
      double s = 0;                                                                                        \
      for (std::size_t i = 0; i < 3; ++i)                                                                  \
        for (std::size_t j = 0; j < 4; ++j) {                                                              \
          const double a = A[i], b = B[j];                                                                 \
          s += v[2][i * 4 + j] * (ref);                                                                    \
        }                                                                                                  \
      return s;                                                                                            \
    };                                                                                                     \
    const auto a = random_tensor<float, shape<3, 1>>(3, lo, hi);                                           \
    const auto b = random_tensor<float, shape<4>>(4, lo, hi);                                              \
    const auto w = random_tensor<float, shape<3, 4>>(5);                                                   \
    check_gradient([](auto a, auto b, auto w) { return tessel::sum(w * (expr)); },                         \
                   [&](const auto& v) { return reference_ab(v, false); }, a, b, w);                        \
    check_gradient([](auto b, auto a, auto w) { return tessel::sum(w * (expr)); },                         \
                   [&](const auto& v) { return reference_ab(v, true); }, b, a, w);                         \
  }

TESSEL_BINARY_GRAD(Add, a + b, a + b, -2, 2)
TESSEL_BINARY_GRAD(Sub, a - b, a - b, -2, 2)
TESSEL_BINARY_GRAD(Mul, a * b, a * b, -2, 2)
TESSEL_BINARY_GRAD(Div, a / b, a / b, 0.5, 2)
TESSEL_BINARY_GRAD(Max, tessel::max(a, b), std::max(a, b), -2, 2)
TESSEL_BINARY_GRAD(Min, tessel::min(a, b), std::min(a, b), -2, 2)
TESSEL_BINARY_GRAD(Pow, tessel::pow(a, b), std::pow(a, b), 0.5, 2)
TESSEL_BINARY_GRAD(Select, tessel::select(a > b, a * b, a - b), a > b ? a * b : a - b, -2, 2)

TEST(Grad, KnownValues) {
  tensor<float, shape<>> three{3};
  EXPECT_EQ(tessel::grad([](auto x) { return x * x; })(three)[0], 6.0f);
  EXPECT_EQ(tessel::grad([](auto x) { return tessel::stop_gradient(x) * x; })(three)[0], 3.0f);
  EXPECT_EQ(tessel::grad([](auto x) { return tessel::stop_gradient(x * x); })(three)[0], 0.0f);
  // Higher order: d2/dx2 x^3 = 6x, and the Hessian-vector product as jvp of grad.
  EXPECT_EQ(tessel::grad(tessel::grad([](auto x) { return x * x * x; }))(three)[0], 18.0f);
  const auto hvp = tessel::jit([](auto x, auto v) {
    return std::get<1>(tessel::jvp(tessel::grad([](auto y) { return y * y * y; }), std::make_tuple(x), std::make_tuple(v)));
  })(three, tensor<float, shape<>>{2});
  EXPECT_EQ(hvp[0], 36.0f);
}

TEST(Grad, MaxTiesSplitTheGradient) {
  tensor<float, shape<3>> x{1, 2, 2};
  const auto g = tessel::grad([](auto v) { return tessel::max(v); })(x);  // reduce_max with a tie
  EXPECT_EQ(g, (tensor<float, shape<3>>{0, 0.5f, 0.5f}));
  const auto h = tessel::grad([](auto v) { return tessel::sum(tessel::max(v, 2.0f)); })(x);
  EXPECT_EQ(h, (tensor<float, shape<3>>{0, 0.5f, 0.5f}));
}

TEST(Grad, ValueAndGradWithAuxMatchesJaxStructure) {
  tensor<float, shape<2>> w{1, 2};
  tensor<float, shape<2>> x{3, 4};
  const auto f = [](auto w, auto x) {
    auto pred = w * x;
    return std::make_tuple(tessel::sum(pred * pred), pred);  // (loss, aux)
  };
  const auto [value_aux, grads] = tessel::value_and_grad<0, 1>(f, tessel::has_aux)(w, x);
  const auto& [loss, aux] = value_aux;
  const auto& [dw, dx] = grads;
  EXPECT_EQ(loss[0], 9.0f + 64.0f);
  EXPECT_EQ(aux, (tensor<float, shape<2>>{3, 8}));
  EXPECT_EQ(dw, (tensor<float, shape<2>>{2 * 3 * 3, 2 * 8 * 4}));  // 2 w x^2
  EXPECT_EQ(dx, (tensor<float, shape<2>>{2 * 3 * 1, 2 * 8 * 2}));  // 2 x w^2
}

TEST(Grad, VjpPullsBackAnyCotangent) {
  tensor<float, shape<3>> x{1, 2, 3};
  tensor<float, shape<3>> u{1, 10, 100};
  const auto [y, dx] = tessel::jit([](auto v, auto ct) {
    auto [out, pullback] = tessel::vjp([](auto a) { return a * a; }, v);
    return std::make_tuple(out, std::get<0>(pullback(ct)));
  })(x, u);
  EXPECT_EQ(y, (tensor<float, shape<3>>{1, 4, 9}));
  EXPECT_EQ(dx, (tensor<float, shape<3>>{2, 40, 600}));
}

TEST(Grad, UnusedArgumentHasZeroGradient) {
  tensor<float, shape<2>> a{1, 2}, b{3, 4};
  const auto [da, db] = tessel::grad<0, 1>([](auto x, auto) { return tessel::sum(x); })(a, b);
  EXPECT_EQ(da, (tensor<float, shape<2>>{1, 1}));
  EXPECT_EQ(db, (tensor<float, shape<2>>{0, 0}));
}
}  // namespace

namespace {
// A constant cotangent reaching a whole-buffer kernel (the transpose's VJP is a transpose of the seed).
TEST(Grad, ConstantCotangentThroughALayoutKernel) {
  tessel::tensor<float, tessel::shape<2, 3>> x{1, 2, 3, 4, 5, 6};
  const auto g = tessel::grad([](auto v) { return tessel::sum(tessel::transpose<1, 0>(v)); })(x);
  EXPECT_EQ(g, (tessel::tensor<float, tessel::shape<2, 3>>{1, 1, 1, 1, 1, 1}));
}
}  // namespace
