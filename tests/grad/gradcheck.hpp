#pragma once
// The generic gradient checker: tessel's VJP (grad) and JVP (jvp) of a scalar loss against central
// finite differences of a double-precision reference of the same loss, and against each other
// (<vjp(1), v> = jvp(v)).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"
#include "tessel/transform/grad.hpp"

namespace tessel::testing {

using reference_loss = std::function<double(const std::vector<std::vector<double>>&)>;

template <class T, class S>
std::vector<double> to_doubles(const tensor<T, S>& t) {
  std::vector<double> v(S::size);
  for (std::size_t i = 0; i < S::size; ++i) v[i] = static_cast<double>(static_cast<float>(t[i]));
  return v;
}

// Central differences of `ref` with respect to every element of argument `which`.
inline std::vector<double> finite_difference(const reference_loss& ref, std::vector<std::vector<double>> args, std::size_t which) {
  std::vector<double> g(args[which].size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double x = args[which][i];
    const double h = 1e-6 * std::max(1.0, std::abs(x));
    args[which][i] = x + h;
    const double up = ref(args);
    args[which][i] = x - h;
    const double down = ref(args);
    args[which][i] = x;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

template <class S>
::testing::AssertionResult close_to(const tensor<float, S>& got, const std::vector<double>& want, double tol, const char* what) {
  for (std::size_t i = 0; i < S::size; ++i) {
    const double err = std::abs(got[i] - want[i]);
    if (!(err <= tol * (1 + std::abs(want[i]))))
      return ::testing::AssertionFailure() << what << " element " << i << ": " << got[i] << " vs finite difference " << want[i];
  }
  return ::testing::AssertionSuccess();
}

// The gradient checker's table: every primitive that occurs in a loss check_gradient checks, recorded
// from the loss's traced program before main runs (primitive_table_test.cpp compares it with
// tessel::all_primitives, so a new primitive cannot be added without a gradient check).
inline std::vector<const ir::primitive*>& checked_primitives() {
  static std::vector<const ir::primitive*> table;
  return table;
}
template <class Loss, class... A>
inline const bool primitives_recorded = [] {
  using traced = typename decltype(jit(Loss{}))::template traced_for<A...>;
  for (const ir::node& n : traced::program.nodes) checked_primitives().push_back(n.prim);
  return true;
}();

// Checks d loss / d (argument 0) of `loss(x, rest...)`; `ref` computes the same loss in double.
template <class Loss, class X, class... Rest>
void check_gradient(Loss loss, const reference_loss& ref, const X& x, const Rest&... rest) {
  (void)primitives_recorded<Loss, X, Rest...>;
  const auto g = tessel::grad<0>(loss)(x, rest...);
  std::vector<std::vector<double>> args{to_doubles(x), to_doubles(rest)...};
  const std::vector<double> fd = finite_difference(ref, args, 0);
  EXPECT_TRUE(close_to(g, fd, 2e-3, "VJP"));
  // JVP in a random direction against <grad, v>, and against the directional finite difference.
  const X v = random_tensor<float, typename X::shape_type>(99);
  const auto [value, tangent] = jit([](auto a, auto t, auto... r) {
    return tessel::jvp(Loss{}, std::make_tuple(a, r...), std::make_tuple(t, (r * 0.0f)...));
  })(x, v, rest...);
  (void)value;
  double dot = 0;
  for (std::size_t i = 0; i < X::size; ++i) dot += fd[i] * v[i];
  EXPECT_NEAR(tangent[0], dot, 2e-3 * (1 + std::abs(dot))) << "JVP against the finite-difference directional derivative";
  // <vjp(1), v> = <1, jvp(v)>: the two modes agree with each other (to f32 rounding; a loss through
  // bf16 rounds its tangent, not its cotangent, to bf16).
  constexpr bool through_bf16 = [] {
    for (const ir::node& n : decltype(jit(Loss{}))::template traced_for<X, Rest...>::program.nodes)
      if (n.dtype == ir::dtype_code::bf16) return true;
    return false;
  }();
  double vjp_dot = 0;
  for (std::size_t i = 0; i < X::size; ++i) vjp_dot += static_cast<double>(g[i]) * v[i];
  EXPECT_NEAR(tangent[0], vjp_dot, (through_bf16 ? 1e-2 : 1e-4) * (1 + std::abs(vjp_dot))) << "JVP against VJP";
}

}  // namespace tessel::testing
