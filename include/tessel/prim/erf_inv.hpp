#pragma once
// erf_inv (lax.erf_inv): the inverse error function on (-1, 1); +-1 give +-inf, |x| > 1 gives NaN.
// Takes f32 and bf16. `tessel::math::erf_inv` is the same function on one float (random/normal uses it).

#include <cmath>
#include <limits>

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace math {

// erf_inv in f32 with XLA's algorithm (stablehlo ChloLegalizeToStablehlo, erfInv32; M. Giles,
// "Approximating the erfinv function", GPU Computing Gems, 2011): w = -log1p(x * -x) with x * -x
// rounded to f32; a degree-8 polynomial in w - 2.5 (w < 5) or sqrt(w) - 3 (otherwise), times x;
// erf_inv(+-1) = +-inf, NaN outside [-1, 1]. log1p is evaluated in double and rounded once, so the
// result does not depend on the platform's libm; the polynomial's steps are fused multiply-adds, as
// XLA:CPU contracts them, so it does not depend on the compiler's flags either.
// Error against the exact erfinv (tests/random/erf_inv_test.cpp; measured on all 2^23 inputs normal()
// draws): <= 4 ULP for |x| <= 0.9, <= 6 for |x| <= 0.99, <= 13 for |x| <= 0.999, <= 65 up to
// |x| = 1 - 2^-24. The growth near 1 is XLA's own (rounding x * x to f32 cancels in 1 - x^2) and is
// kept so that results follow JAX; the polynomial alone, in exact arithmetic, is within 2.3 ULP.
// XLA's f32 log1p is not correctly rounded, so normal() agrees with JAX to about an ULP, not bit for bit.
inline float erf_inv(float x) noexcept {
  constexpr float central[9] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                -0.00417768164f,  0.246640727f,    1.50140941f};
  constexpr float tail[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                             -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                             0.00943887047f,   1.00167406f,     2.83297682f};
  const float minus_x_squared = x * -x;
  const float w = -static_cast<float>(std::log1p(static_cast<double>(minus_x_squared)));
  const bool in_center = w < 5.0f;
  const float t = in_center ? w - 2.5f : std::sqrt(w) - 3.0f;
  const float* c = in_center ? central : tail;
  float p = c[0];
  for (int i = 1; i < 9; ++i) p = std::fma(p, t, c[i]);
  if (std::abs(x) == 1.0f) return x * std::numeric_limits<float>::infinity();
  return p * x;
}

}  // namespace math

namespace prim {
struct erf_inv_rule {
  static constexpr fixed_string name = "tessel::erf_inv";
  static constexpr accepts domain = accepts::floating;
  static constexpr std::string_view stablehlo = "chlo.erf_inv";
  static float apply(float x) { return math::erf_inv(x); }  // scalar on purpose: the same bits everywhere
  static constexpr partial derivative(ir::graph_builder& g, int node) {  // sqrt(pi)/2 * exp(erf_inv(x)^2)
    return of_node(build::scale(g, build::unary(g, exp_p, build::mul(g, node, node)), 0.88622692545275801));
  }
};
inline constexpr ir::primitive erf_inv_p = unary_primitive<erf_inv_rule>("erf_inv", 30);
}  // namespace prim

template <Traced X>
constexpr auto erf_inv(X x) {
  return prim::unary<prim::erf_inv_p, prim::erf_inv_rule>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor X>
auto erf_inv(const X& x) {
  return eagerly([](auto x) { return erf_inv(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
