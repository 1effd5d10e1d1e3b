// Every differentiable elementwise primitive (the unary table's rows) and activation: grad and jvp
// against finite differences.
#include "gradcheck.hpp"
#include "unary_table.hpp"

namespace {
using tessel::shape;
using tessel::testing::check_gradient;
using tessel::testing::random_tensor;
using x_t = tessel::tensor<float, shape<3, 5>>;

// sum(w * f(x)) for an elementwise f, in tessel and in double.
template <class F, class Ref>
void check_unary_gradient(F, Ref ref, double lo, double hi) {
  const auto loss = [](auto x, auto w) { return tessel::sum(w * F{}(x)); };  // F: a lambda without captures
  const auto reference = [ref](const std::vector<std::vector<double>>& a) {
    double s = 0;
    for (std::size_t i = 0; i < a[0].size(); ++i) s += a[1][i] * ref(a[0][i]);
    return s;
  };
  check_gradient(loss, reference, random_tensor<float, x_t::shape_type>(1, lo, hi), random_tensor<float, x_t::shape_type>(2));
}

#define TESSEL_UNARY_GRAD(name, expr, ref_expr, lo, hi)                                           \
  TEST(UnaryGrad, name) {                                                                         \
    check_unary_gradient([](auto x) { return expr; }, [](double x) { return ref_expr; }, lo, hi); \
  }

// Every smooth row of the unary table on its near range. The others are not traced here at all: a
// piecewise constant primitive is exempt from the gradient table (primitive_table_test.cpp).
template <bool Smooth, class F, class Ref>
void check_row(const char* op, F f, Ref ref, double lo, double hi) {
  if constexpr (Smooth) check_unary_gradient(f, ref, lo, hi);
  else GTEST_SKIP() << op << " is piecewise constant (primitive_table_test.cpp checks its zero gradient)";
}
#define TESSEL_TABLE_GRAD(op, ref, lo, hi, log_spaced, scalar_ulp, xsimd_ulp, hwy_ulp, near_lo, near_hi, smooth) \
  TEST(UnaryGrad, op) { check_row<smooth>(#op, [](auto x) { return tessel::op(x); }, ref, near_lo, near_hi); }
TESSEL_UNARY_TABLE(TESSEL_TABLE_GRAD)

TESSEL_UNARY_GRAD(CbrtOfNegatives, tessel::cbrt(x), std::cbrt(x), -3, -0.3)
TESSEL_UNARY_GRAD(Relu, tessel::relu(x), std::max(x, 0.0), -2, 2)
TESSEL_UNARY_GRAD(Gelu, tessel::gelu(x), 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))), -3, 3)
TESSEL_UNARY_GRAD(GeluExact, tessel::gelu<false>(x), 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), -3, 3)
TESSEL_UNARY_GRAD(Square, x * x, x * x, -2, 2)
TESSEL_UNARY_GRAD(Polynomial, 3.0f * x * x - x / 2.0f + 1.0f, 3 * x * x - x / 2 + 1, -2, 2)
}  // namespace
