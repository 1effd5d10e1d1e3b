#pragma once
// Random inputs for the tests: uniform reals (rounded to the tensor's dtype), integers and booleans from a
// seed. No GoogleTest here, so that the oracle binaries (which do not link it) draw the same inputs.
#include <cstdint>
#include <random>
#include <type_traits>

#include "tessel/core/tensor.hpp"

namespace tessel::testing {

template <class T, class S>
tensor<T, S> random_tensor(std::uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  tensor<T, S> t;
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution d(0.5);
    for (auto& v : t) v = d(gen);
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<long long> d(static_cast<long long>(lo), static_cast<long long>(hi));
    for (auto& v : t) v = static_cast<T>(d(gen));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& v : t) v = T(static_cast<float>(d(gen)));
  }
  return t;
}

}  // namespace tessel::testing
