#pragma once
// The one table of the unary elementwise primitives, which every generic checker reads: the ULP sweeps of
// each path (backend/ulp_test.cpp) and of every Highway target with the special values
// (backend/hwy_math_test.cpp), values through jit in f32 and bf16 (backend/elementwise_test.cpp),
// gradients against finite differences (grad/unary_grad_test.cpp), batching against a loop over slices
// (vmap/unary_rules_test.cpp) and JAX's lax (oracle/unary_cases.cpp). A new unary primitive is one row
// here (and JAX's function in oracle/cases.py): the coverage tests of the gradient, batching and oracle
// checkers fail until it has one.
//
// X(op, reference, lo, hi, log_spaced, scalar ULP, xsimd ULP, Highway ULP, near_lo, near_hi, smooth)
//   op           tessel::op, prim::op##_rule, and the oracle's case name
//   reference    the function in double
//   lo, hi       the range of the ULP sweeps (log_spaced: logarithmically spaced points)
//   ULP bounds   the maximum error of each path over [lo, hi], as the primitive's header states (erf and
//                cbrt have no Highway kernel, so their Highway path is xsimd's; erf_inv is one scalar
//                function on every path)
//   near_lo/hi   the range of the other checks: values through jit, the transforms and the oracle
//   smooth       differentiable on [near_lo, near_hi] (checked by finite differences)
#include <cmath>

namespace tessel::testing {
// erfinv in double: Newton's method on erf.
inline double erf_inv_double(double y) {
  double x = 0;
  for (int i = 0; i < 100; ++i) {
    const double step = (std::erf(x) - y) / (1.1283791670955126 * std::exp(-x * x));  // 2 / sqrt(pi)
    x -= step;
    if (std::abs(step) <= 1e-17 * std::abs(x)) break;
  }
  return x;
}
}  // namespace tessel::testing

#define TESSEL_UNARY_TABLE(X)                                                                                 \
  X(abs, [](double v) { return std::abs(v); }, -1e6, 1e6, false, 0, 0, 0, -3, 3, true)                        \
  X(neg, [](double v) { return -v; }, -1e6, 1e6, false, 0, 0, 0, -3, 3, true)                                 \
  X(floor, [](double v) { return std::floor(v); }, -1e6, 1e6, false, 0, 0, 0, -5, 5, false)                   \
  X(sign, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }, -1e6, 1e6, false, 0, 0, 0, -3, 3, false) \
  X(exp, [](double v) { return std::exp(v); }, -87, 88, false, 1, 2, 1.5, -10, 10, true)                      \
  X(log, [](double v) { return std::log(v); }, 1e-30, 1e30, true, 1, 1, 1, 0.1, 10, true)                     \
  X(log1p, [](double v) { return std::log1p(v); }, -0.99, 10, false, 1, 1, 2.5, -0.9, 5, true)                \
  X(expm1, [](double v) { return std::expm1(v); }, -10, 10, false, 1, 1.5, 4, -3, 3, true)                    \
  X(tanh, [](double v) { return std::tanh(v); }, -10, 10, false, 2.5, 1.5, 3, -5, 5, true)                    \
  X(logistic, [](double v) { return 1 / (1 + std::exp(-v)); }, -20, 20, false, 3, 3, 3, -8, 8, true)          \
  X(sqrt, [](double v) { return std::sqrt(v); }, 0, 1e6, false, 0.5, 0.5, 0.5, 0.1, 10, true)                 \
  X(rsqrt, [](double v) { return 1 / std::sqrt(v); }, 1e-6, 1e6, true, 1.5, 1.5, 1.5, 0.1, 10, true)          \
  X(sin, [](double v) { return std::sin(v); }, -100, 100, false, 1, 2.5, 2.5, -6, 6, true)                    \
  X(cos, [](double v) { return std::cos(v); }, -100, 100, false, 1, 2.5, 2.5, -6, 6, true)                    \
  X(erf, [](double v) { return std::erf(v); }, -5, 5, false, 1, 2.5, 2.5, -3, 3, true)                        \
  X(cbrt, [](double v) { return std::cbrt(v); }, -1e6, 1e6, false, 1, 2, 2, 0.1, 8, true)                     \
  X(erf_inv, tessel::testing::erf_inv_double, -0.9, 0.9, false, 4, 4, 4, -0.9, 0.9, true)
