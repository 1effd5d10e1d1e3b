#pragma once
// Samplers over tessel::random keys, bit-exact with jax.random (jax_threefry_partitionable=True):
// uniform, normal, bernoulli, permutation. Each has a scalar core (`*_from_bits`, `erf_inv`) that maps
// one 32-bit word from bits32_at(key, i) to one sample, so a jit primitive can reuse it unchanged.
//
//   auto k = tessel::random::key_from_seed(0);
//   tessel::random::uniform<tessel::shape<3>>(k)     // f32[3]{0.947667, 0.9785799, 0.33229148}
//   tessel::random::normal<tessel::shape<2, 2>>(k)   // f32[2,2]
//   tessel::random::bernoulli<tessel::shape<4>>(k, 0.25f)
//   tessel::random::permutation<10>(k)               // s32[10], a shuffle of 0..9

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/prim/erf_inv.hpp"
#include "tessel/random/key.hpp"

namespace tessel::random {

// ---- scalar cores ----------------------------------------------------------------------------------

// The dtypes uniform and bernoulli sample in: JAX's floating dtypes that tessel has.
template <class T>
concept UniformDType = std::same_as<T, float> || std::same_as<T, bfloat16>;

namespace detail {
// a * b + c rounded once, as std::fma, also in constant evaluation (where std::fma is not constexpr
// before C++23, and clang 16 cannot fold it): the product of two floats is exact in double, and the sum
// rounded to odd there rounds to float as the exact a * b + c does.
constexpr float fused_multiply_add(float a, float b, float c) noexcept {
  if (!std::is_constant_evaluated()) return std::fma(a, b, c);
  const double product = static_cast<double>(a) * static_cast<double>(b);
  const double sum = product + static_cast<double>(c);
  const double c_part = sum - product;  // TwoSum: sum + error is product + c exactly
  const double error = (product - (sum - c_part)) + (static_cast<double>(c) - c_part);
  if (!(error < 0 || error > 0)) return static_cast<float>(sum);  // exact, or not finite
  auto bits = std::bit_cast<std::uint64_t>(sum);
  if ((error < 0) != (sum < 0)) --bits;  // the exact value lies nearer zero: truncate
  return static_cast<float>(std::bit_cast<double>(bits | 1));
}
}  // namespace detail

// One uniform sample in [minval, maxval) from one word of bits, as JAX's _uniform: the top mantissa
// bits of `bits` (23 for f32; for bf16, bits 1..7 of the low byte, since JAX draws 8 bits) fill the
// mantissa of a float in [1, 2); subtract 1, scale by (maxval - minval) and add minval, and clamp below
// at minval: max(minval, x). In f32 the scale and add are one fused multiply-add, as XLA:CPU contracts
// them (its LLVM backend fuses every multiply-add), so the draws are bit-exact with JAX whatever the
// compiler's flags; in bf16 each step is rounded in T.
template <UniformDType T>
constexpr T uniform_from_bits(uint32 bits, T minval, T maxval) noexcept {
  if constexpr (std::same_as<T, float>) {
    const float unit = kernels::unit_float_from_bits(bits);
    const float x = detail::fused_multiply_add(unit, maxval - minval, minval);
    return (x < minval || minval != minval) ? minval : x;  // lax.max: a NaN operand wins
  } else {
    const auto mantissa = static_cast<std::uint16_t>(((bits & 0xffu) >> 1) | 0x3f80u);
    const float unit = static_cast<float>(bfloat16::from_bits(mantissa)) - 1.0f;  // exact: k / 128
    const bfloat16 scale(static_cast<float>(maxval) - static_cast<float>(minval));
    const bfloat16 scaled(unit * static_cast<float>(scale));
    const bfloat16 x(static_cast<float>(scaled) + static_cast<float>(minval));
    const float lo = minval, xf = x;
    return (xf < lo || lo != lo) ? minval : x;
  }
}

// erf_inv is the primitive's scalar core (prim/erf_inv.hpp): XLA's f32 algorithm, error bounds there.
using math::erf_inv;

// One standard normal sample from one word of bits, as JAX's _normal_real: u uniform in
// [nextafter(-1, 0), 1) (so never -1), then float(sqrt(2)) * erf_inv(u). Range about [-5.42, 5.42].
inline float normal_from_bits(uint32 bits) noexcept {
  constexpr float lo = std::bit_cast<float>(0xbf7fffffu);  // np.nextafter(-1, 0) in f32
  constexpr auto sqrt2 = static_cast<float>(std::numbers::sqrt2);
  return sqrt2 * erf_inv(uniform_from_bits<float>(bits, lo, 1.0f));
}

// Sorting rounds JAX's _shuffle uses for n elements: ceil(3 ln(max(1, n)) / ln(2^32 - 1)), i.e. the
// least r with n^3 <= (2^32 - 1)^r (0 for n <= 1, 1 up to 1625, 2 up to 2642245, else 3).
// For n < 2^32 (permutation allows at most 2^31 - 1).
constexpr int permutation_rounds(std::uint64_t n) noexcept {
  constexpr std::uint64_t m = 0xffffffffu;
  if (n <= 1) return 0;
  if (n > m) return 4;                      // outside the contract; JAX's formula gives at least 4
  if (n * n <= m / n) return 1;             // n^3 <= m, as n^2 <= floor(m / n); n^2 < 2^64
  if (n * n <= (m * m) / n) return 2;       // n^3 <= m^2
  return 3;
}

// ---- errors ----------------------------------------------------------------------------------------

namespace detail {
template <fixed_string Op, class T>
consteval bool check_uniform_dtype() {
  if constexpr (!UniformDType<T>) {
    raise<fit<[] {
      return message_builder{} << Op << ": dtype " << dtype_name<T>()
                               << " is not a floating dtype; JAX samples this only in floating dtypes; "
                                  "fix: use f32 (float) or bf16 (tessel::bfloat16)";
    }>()>();
  }
  return UniformDType<T>;
}

template <class T>
consteval bool check_normal_dtype() {
  if constexpr (!std::same_as<T, float>) {
    raise<fit<[] {
      return message_builder{} << "tessel::random::normal: dtype " << dtype_name<T>()
                               << " is not supported; normal samples f32 only (bit-exact with JAX); "
                                  "fix: sample f32 and convert with .astype<...>()";
    }>()>();
  }
  return std::same_as<T, float>;
}

// A C++ double is JAX's weakly typed Python float: it becomes f32, like a literal in a JAX program.
template <class P>
using probability_dtype = std::conditional_t<std::same_as<P, double>, float, P>;

template <class P>
consteval bool check_probability_dtype() {
  if constexpr (!UniformDType<probability_dtype<P>>) {
    raise<fit<[] {
      return message_builder{} << "tessel::random::bernoulli: the probability p has dtype " << dtype_name<P>()
                               << ", but it must be floating (JAX raises 'bernoulli probability `p` must have "
                                  "a floating dtype'); fix: pass p as a float (0.5f) or a tessel::bfloat16";
    }>()>();
  }
  return UniformDType<probability_dtype<P>>;
}

template <std::size_t N>
consteval bool check_permutation_size() {
  constexpr auto limit = static_cast<std::size_t>(std::numeric_limits<int32>::max());
  if constexpr (N > limit) {
    raise<fit<[] {
      return message_builder{} << "tessel::random::permutation<" << static_cast<std::uint64_t>(N)
                               << ">: the values 0.." << static_cast<std::uint64_t>(N - 1)
                               << " do not fit s32 (JAX's default integer); fix: permute at most 2147483647 elements";
    }>()>();
  }
  return N <= limit;
}
}  // namespace detail

// ---- tensor-level samplers ---------------------------------------------------------------------------

// jax.random.uniform(k, S, T, minval, maxval): tensor<T, S> in [minval, maxval), T in {f32, bf16}
// (others are a compile error). minval and maxval are converted to T first, as JAX does. Element i
// is uniform_from_bits(bits32_at(k, i)) (for bf16, JAX's 8-bit draw is the low byte of that word).
template <class S, class T = float>
tensor<T, S> uniform(key k, float minval = 0.0f, float maxval = 1.0f) {
  tensor<T, S> out;
  if constexpr (detail::check_uniform_dtype<"tessel::random::uniform", T>()) {
    const T lo(minval), hi(maxval);
    for (std::size_t i = 0; i < S::size; ++i) out[i] = uniform_from_bits<T>(bits32_at(k, i), lo, hi);
  }
  return out;
}

// jax.random.normal(k, S): tensor<float, S> of standard normal samples (normal_from_bits per element).
// Agrees with JAX to a few ULP (see erf_inv); the uniform draw beneath it is bit-exact.
template <class S, class T = float>
tensor<T, S> normal(key k) {
  tensor<T, S> out;
  if constexpr (detail::check_normal_dtype<T>())
    for (std::size_t i = 0; i < S::size; ++i) out[i] = normal_from_bits(bits32_at(k, i));
  return out;
}

// jax.random.bernoulli(k, p, S): tensor<bool, S>, true with probability p: uniform<S, dtype(p)>(k) < p.
// p is f32, bf16, or a double (weakly typed, read as f32); an integer p is a compile error.
template <class S, class P>
tensor<bool, S> bernoulli(key k, P p) {
  tensor<bool, S> out;
  if constexpr (detail::check_probability_dtype<P>()) {
    using T = detail::probability_dtype<P>;
    const T threshold(p);
    const tensor<T, S> u = uniform<S, T>(k);
    for (std::size_t i = 0; i < S::size; ++i) out[i] = static_cast<float>(u[i]) < static_cast<float>(threshold);
  }
  return out;
}

// jax.random.permutation(k, N): s32[N], a random ordering of 0..N-1. As JAX's _shuffle: for each of
// permutation_rounds(N) rounds, (k, sub) = split(k), then stable-sort the values by bits<shape<N>>(sub).
template <std::size_t N>
tensor<int32, shape<N>> permutation(key k) {
  tensor<int32, shape<N>> out;
  if constexpr (detail::check_permutation_size<N>()) {
    std::vector<std::pair<uint32, int32>> items(N);
    for (std::size_t i = 0; i < N; ++i) items[i].second = static_cast<int32>(i);
    for (int round = 0; round < permutation_rounds(N); ++round) {
      const auto [next, sub] = split(k);
      k = next;
      for (std::size_t i = 0; i < N; ++i) items[i].first = bits32_at(sub, i);
      std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    for (std::size_t i = 0; i < N; ++i) out[i] = items[i].second;
  }
  return out;
}

}  // namespace tessel::random
