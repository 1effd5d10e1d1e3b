#pragma once
// Shared by the scan tests: helpers and JAX's documentation case.
#include <cstring>
#include <tuple>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"
#include "tessel/transform/scan.hpp"
#include "tessel_test.hpp"

namespace scan_cases {
using tessel::shape;
using tessel::tensor;

template <class T, class S>
inline bool bitwise_equal(const tensor<T, S>& a, const tensor<T, S>& b) {
  return std::memcmp(a.data(), b.data(), sizeof(T) * S::size) == 0;
}

template <class S>
tensor<float, S> iota_tensor(float start, float step) {
  tensor<float, S> t;
  for (std::size_t i = 0; i < S::size; ++i) t[i] = start + step * static_cast<float>(i);
  return t;
}

// JAX's documentation case: f(c, x) = (c * x, c * x), init 1, xs [1, 2, 3].
constexpr auto cumprod = [](auto c, auto xs) {
  return tessel::scan([](auto carry, auto x) { return std::tuple{carry * x, carry * x}; }, c, xs);
};
constexpr auto cumprod_reverse = [](auto c, auto xs) {
  return tessel::scan([](auto carry, auto x) { return std::tuple{carry * x, carry * x}; }, c, xs, {.reverse = true});
};

inline tensor<float, shape<>> one() {
  tensor<float, shape<>> t;
  t[0] = 1;
  return t;
}

}  // namespace scan_cases
