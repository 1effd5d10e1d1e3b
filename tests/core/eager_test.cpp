// Eager use: ops, library functions, losses, random draws and an optimizer step on concrete tensors,
// each evaluated at once and equal to the same function under jit.
#include <cmath>
#include <sstream>
#include <tuple>

#include "reference.hpp"
#include "tessel/jit.hpp"
#include "tessel/nn/layers.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/ops.hpp"
#include "tessel/optim/adam.hpp"
#include "tessel/random.hpp"
#include "tessel/transform/grad.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
using m23 = tensor<float, shape<2, 3>>;

TEST(Eager, ArithmeticIsElementwiseAndEqualsJit) {
  const m23 a{1, 2, 3, 4, 5, 6}, b{0.5f, -1, 1.5f, 2, -2.5f, 3};
  const m23 sum = a + b, diff = a - b, prod = a * b, quot = a / b, neg = -a;
  for (std::size_t i = 0; i < m23::size; ++i) {
    EXPECT_EQ(sum[i], a[i] + b[i]);
    EXPECT_EQ(diff[i], a[i] - b[i]);
    EXPECT_EQ(prod[i], a[i] * b[i]);
    EXPECT_EQ(quot[i], a[i] / b[i]);
    EXPECT_EQ(neg[i], -a[i]);
  }
  const auto f = [](auto x, auto y) { return tessel::exp(x * y + x) - 1.0f; };
  EXPECT_EQ(tessel::exp(a * b + a) - 1.0f, tessel::jit(f)(a, b));
}

TEST(Eager, ScalarsTakeTheTensorsDtype) {
  const tensor<tessel::bfloat16, shape<2>> h{tessel::bfloat16(1.5f), tessel::bfloat16(-2.0f)};
  const auto scaled = h * 3.0;  // a double, as in a traced program: the tensor's dtype
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(scaled)>, tensor<tessel::bfloat16, shape<2>>>);
  EXPECT_EQ(static_cast<float>(scaled[0]), 4.5f);
  const tensor<tessel::int32, shape<3>> i{1, -2, 2147483647};
  const auto next = i + 1;
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(next)>, tensor<tessel::int32, shape<3>>>);
  EXPECT_EQ(next[1], -1);
  EXPECT_EQ(next[2], -2147483647 - 1);  // wraps, as under jit
  const m23 a{1, 2, 3, 4, 5, 6};
  const auto below = a < 3.5f;
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(below)>, tensor<bool, shape<2, 3>>>);
  const m23 clipped = tessel::select(below, a, 3.5f);
  EXPECT_EQ(clipped, (m23{1, 2, 3, 3.5f, 3.5f, 3.5f}));
}

TEST(Eager, MatmulReductionsAndLayouts) {
  const auto a = random_tensor<float, shape<5, 7>>(1);
  const auto b = random_tensor<float, shape<7, 3>>(2);
  const auto c = tessel::matmul(a, b);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      double ref = 0;
      for (std::size_t k = 0; k < 7; ++k) ref += static_cast<double>(a(i, k)) * b(k, j);
      EXPECT_NEAR(c(i, j), ref, 1e-5);
    }
  const auto rows = tessel::sum<1>(a);
  const auto t = tessel::transpose<1, 0>(a);
  const auto r = tessel::reshape<shape<35>>(a);
  const auto s = tessel::slice_in_dim<0, 1, 3>(a);
  const auto joined = tessel::concatenate<0>(a, a, s);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(joined)>, tensor<float, shape<12, 7>>>);
  for (std::size_t i = 0; i < 5; ++i) {
    float ref = 0;
    for (std::size_t k = 0; k < 7; ++k) ref += a(i, k);
    EXPECT_NEAR(rows[i], ref, 1e-5);
    for (std::size_t k = 0; k < 7; ++k) {
      EXPECT_EQ(t(k, i), a(i, k));
      EXPECT_EQ(r[i * 7 + k], a(i, k));
      EXPECT_EQ(joined(5 + i, k), a(i, k));
    }
  }
  EXPECT_EQ(s(0, 0), a(1, 0));
  EXPECT_EQ(joined(11, 6), a(2, 6));
  const auto p = tessel::softmax(a);
  EXPECT_EQ(p, tessel::jit([](auto x) { return tessel::softmax(x); })(a));
}

TEST(Eager, LossesAndLayers) {
  const m23 logits{1, 2, 3, 4, 5, -INFINITY};
  const tensor<tessel::int32, shape<2>> labels{1, 0};
  const auto loss = tessel::nn::softmax_cross_entropy_with_integer_labels(logits, labels);
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double lse1 = std::log(std::exp(4.0) + std::exp(5.0));
  EXPECT_NEAR(loss[0], lse0 - 2.0, 1e-6);
  EXPECT_NEAR(loss[1], lse1 - 4.0, 1e-6);
  const auto x = random_tensor<float, shape<4, 3>>(3);
  const auto w = random_tensor<float, shape<3, 2>>(4);
  const auto bias = random_tensor<float, shape<2>>(5);
  const auto y = tessel::nn::dense(x, w, bias);
  EXPECT_EQ(y, tessel::jit([](auto x, auto w, auto b) { return tessel::nn::dense(x, w, b); })(x, w, bias));
}

TEST(Eager, RandomDrawsFeedOps) {
  const auto key = tessel::random::key_from_seed(0);
  const auto z = tessel::random::normal<shape<64>>(key);
  const auto squared_mean = tessel::mean(z * z);
  double ref = 0;
  for (float v : z) ref += static_cast<double>(v) * v;
  EXPECT_NEAR(squared_mean[0], ref / 64, 1e-6);
}

TEST(Eager, OneOptimizerStep) {
  using vec = tensor<float, shape<3>>;
  const auto loss = [](auto p) { return tessel::sum(p * p); };
  vec params{1, 2, 3};
  const auto solver = tessel::optim::adam<0.1>{};
  auto state = solver.init(params);
  const vec g = tessel::grad(loss)(params);
  EXPECT_EQ(g, params * 2.0f);
  auto [updates, next] = solver.update(g, state, params);
  const vec stepped = params + updates;  // apply_updates, written eagerly
  EXPECT_EQ(stepped, tessel::optim::apply_updates(params, updates));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(stepped[i], params[i] - 0.1f, 1e-6);  // adam's first step: lr * sign
}

TEST(Eager, ResultsPrint) {
  const tensor<float, shape<2>> a{1, 2};
  std::ostringstream os;
  os << a + a;
  EXPECT_EQ(os.str(), "f32[2]{2, 4}");
}
}  // namespace
