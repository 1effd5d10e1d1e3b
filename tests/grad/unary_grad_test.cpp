// Every differentiable elementwise primitive and activation: grad and jvp against finite differences.
#include "gradcheck.hpp"

namespace {
using tessel::shape;
using tessel::testing::check_gradient;
using tessel::testing::random_tensor;
using x_t = tessel::tensor<float, shape<3, 5>>;

// sum(w * f(x)) for an elementwise f, in tessel and in double.
#define TESSEL_UNARY_GRAD(name, expr, ref, lo, hi)                                                          \
  TEST(UnaryGrad, name) {                                                                                  \
    const auto loss = [](auto x, auto w) { return tessel::sum(w * (expr)); };                              \
    const auto reference = [](const std::vector<std::vector<double>>& a) {                                 \
      double s = 0;                                                                                        \
      for (std::size_t i = 0; i < a[0].size(); ++i) {                                                      \
        const double x = a[0][i];                                                                          \
        s += a[1][i] * (ref);                                                                              \
      }                                                                                                    \
      return s;                                                                                            \
    };                                                                                                     \
    check_gradient(loss, reference, random_tensor<float, x_t::shape_type>(1, lo, hi),                      \
                   random_tensor<float, x_t::shape_type>(2));                                              \
  }

TESSEL_UNARY_GRAD(Neg, -x, -x, -2, 2)
TESSEL_UNARY_GRAD(Abs, tessel::abs(x), std::abs(x), 0.1, 2)
TESSEL_UNARY_GRAD(Exp, tessel::exp(x), std::exp(x), -2, 2)
TESSEL_UNARY_GRAD(Log, tessel::log(x), std::log(x), 0.2, 3)
TESSEL_UNARY_GRAD(Log1p, tessel::log1p(x), std::log1p(x), -0.5, 3)
TESSEL_UNARY_GRAD(Expm1, tessel::expm1(x), std::expm1(x), -2, 2)
TESSEL_UNARY_GRAD(Tanh, tessel::tanh(x), std::tanh(x), -2, 2)
TESSEL_UNARY_GRAD(Logistic, tessel::logistic(x), 1 / (1 + std::exp(-x)), -3, 3)
TESSEL_UNARY_GRAD(Sqrt, tessel::sqrt(x), std::sqrt(x), 0.2, 3)
TESSEL_UNARY_GRAD(Rsqrt, tessel::rsqrt(x), 1 / std::sqrt(x), 0.2, 3)
TESSEL_UNARY_GRAD(Sin, tessel::sin(x), std::sin(x), -3, 3)
TESSEL_UNARY_GRAD(Cos, tessel::cos(x), std::cos(x), -3, 3)
TESSEL_UNARY_GRAD(Erf, tessel::erf(x), std::erf(x), -2, 2)
TESSEL_UNARY_GRAD(Cbrt, tessel::cbrt(x), std::cbrt(x), 0.3, 3)
TESSEL_UNARY_GRAD(CbrtOfNegatives, tessel::cbrt(x), std::cbrt(x), -3, -0.3)
TESSEL_UNARY_GRAD(ErfInv, tessel::erf_inv(x), tessel::testing::erf_inv_double(x), -0.8, 0.8)
TESSEL_UNARY_GRAD(Relu, tessel::relu(x), std::max(x, 0.0), -2, 2)
TESSEL_UNARY_GRAD(Gelu, tessel::gelu(x), 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))), -3, 3)
TESSEL_UNARY_GRAD(GeluExact, tessel::gelu<false>(x), 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), -3, 3)
TESSEL_UNARY_GRAD(Square, x * x, x * x, -2, 2)
TESSEL_UNARY_GRAD(Polynomial, 3.0f * x * x - x / 2.0f + 1.0f, 3 * x * x - x / 2 + 1, -2, 2)
}  // namespace
