#pragma once
// JAX's threefry PRNG keys: seeding, split, fold_in and raw bits, bit-exact with jax.random in its
// default mode (jax_threefry_partitionable=True, the default since JAX 0.5; jax_enable_x64=False).
//
// A key is the two uint32 words JAX calls its key data (jax.random.key_data). Every derivation hashes
// the key with threefry2x32 (kernels/threefry.hpp) at a 64-bit counter written as (hi, lo) words:
//   split<N>(k)[i]  = threefry2x32(k, {0, i})              (JAX: iota_2x32_shape((N,)))
//   fold_in(k, d)   = threefry2x32(k, {0, d})              (JAX: threefry_2x32(k, threefry_seed(d)))
//   bits<S>(k)[i]   = y0 ^ y1 of threefry2x32(k, {hi(i), lo(i)}), i the row-major index
// so split<N>(k)[i] == fold_in(k, i), as JAX's test_threefry_split_fold_in_symmetry checks.
// The scalar functions (bits32_at, split_at) are the core a jit primitive reuses; bits<S> only loops.
//
//   auto k = tessel::random::key_from_seed(0);                    // key<fry>{0, 0}
//   auto [params_key, data_key] = tessel::random::split(k);
//   tessel::tensor<tessel::uint32, tessel::shape<3>> b = tessel::random::bits<tessel::shape<3>>(data_key);

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <type_traits>

#include "tessel/core/dtype.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/kernels/threefry.hpp"

namespace tessel::random {

using kernels::counter_at;
using kernels::threefry2x32;
using kernels::word_pair;

// A threefry2x32 key: JAX's raw key data [k0, k1]. A value: copy it freely, but draw from each key once.
struct key {
  word_pair words{};

  constexpr key() = default;
  constexpr key(uint32 k0, uint32 k1) : words{k0, k1} {}  // jax.random.wrap_key_data([k0, k1])
  constexpr explicit key(word_pair data) : words(data) {}

  constexpr uint32 operator[](std::size_t i) const { return words[i]; }
  constexpr word_pair data() const { return words; }  // jax.random.key_data
  friend constexpr bool operator==(const key&, const key&) = default;
};

// Prints like JAX's typed key: key<fry>{k0, k1}.
inline std::ostream& operator<<(std::ostream& os, const key& k) {
  return os << "key<fry>{" << k.words[0] << ", " << k.words[1] << '}';
}

// Which JAX configuration a seed is read under: jax_enable_x64=False (the default) keeps only the low
// 32 bits of any seed; jax_enable_x64=True also keeps the high word of a 64-bit seed.
enum class seed_mode { x32, x64 };

template <class I>
concept Seed = std::integral<I> && !std::same_as<std::remove_cv_t<I>, bool>;

// jax.random.key(seed) / PRNGKey(seed): [hi, lo] words of the seed as JAX builds them. The C++ type
// plays the NumPy dtype: a seed of at most 32 bits gives [0, uint32(seed)] in both modes (np.int32(-2)
// -> [0, 4294967294]); a 64-bit seed gives [0, lo32] under x32 and [hi32, lo32] of its two's
// complement under x64 (-1 -> [0, 4294967295] or [4294967295, 4294967295]), as a Python int does.
template <Seed I>
constexpr key key_from_seed(I seed, seed_mode mode = seed_mode::x32) {
  if constexpr (sizeof(I) <= 4) {
    return key(0u, static_cast<uint32>(seed));
  } else {
    const auto wide = static_cast<std::uint64_t>(seed);  // two's complement, as JAX's bit casts
    return key(mode == seed_mode::x64 ? static_cast<uint32>(wide >> 32) : 0u, static_cast<uint32>(wide));
  }
}


// Key i of split(k, n), for any n > i: a function of k and i only.
constexpr key split_at(key k, std::uint64_t index) noexcept { return key(threefry2x32(k.words, counter_at(index))); }

// jax.random.fold_in(k, data): a new key that depends on k and the 32-bit data (equal to split_at(k, data)).
constexpr key fold_in(key k, uint32 data) noexcept { return key(threefry2x32(k.words, {0u, data})); }

// Element `index` (row-major) of jax.random.bits(k, shape, uint32), for any shape with more elements.
constexpr uint32 bits32_at(key k, std::uint64_t index) noexcept { return kernels::bits32_at(k.words, index); }

namespace detail {
template <std::size_t N>
consteval bool check_split_count() {
  if constexpr (N == 0) {
    raise<fit<[] {
      return message_builder{} << "tessel::random::split<0>: cannot split a key into 0 keys; "
                                  "the count N must be at least 1; fix: split<N> with N >= 1 (split(k) gives 2)";
    }>()>();
  }
  return N != 0;
}
}  // namespace detail

// jax.random.split(k, N): N new keys, key i == fold_in(k, i). N >= 1 (a compile error otherwise).
template <std::size_t N = 2>
constexpr std::array<key, N> split(key k) {
  std::array<key, N> out{};
  if constexpr (detail::check_split_count<N>())
    for (std::size_t i = 0; i < N; ++i) out[i] = split_at(k, i);
  return out;
}

// jax.random.bits(k, S, uint32): a tensor<uint32, S> of independent uniform 32-bit words.
template <class S>
tensor<uint32, S> bits(key k) {
  static_assert(Shape<S>, "tessel::random::bits<S>: S must be a tessel::shape<Dims...>");
  tensor<uint32, S> out;
  for (std::size_t i = 0; i < S::size; ++i) out[i] = bits32_at(k, i);
  return out;
}

// The seeds' rule "fold in the global step and the device index, split per use, never reuse":
// the key for one step on one device is fold_in(fold_in(base, step), device_index); split it once per
// use (split<3>(step_key(base, step, device)) for three uses) and never draw from `base` directly.
constexpr key step_key(key base, uint32 step, uint32 device_index) noexcept {
  return fold_in(fold_in(base, step), device_index);
}

}  // namespace tessel::random
