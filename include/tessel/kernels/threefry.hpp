#pragma once
// threefry2x32 with 20 rounds: the counter-based block function under every tessel::random key.
//
// A pure function of four uint32 values, constexpr, with no state, so the tensor-level API
// (random/key.hpp) and the random_uniform primitive (prim/random_uniform.hpp) evaluate the very same
// arithmetic; both also take the element bits and the [0, 1) floats from here.
// The algorithm is Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC 2011), in the
// variant JAX uses: the key schedule is (k0, k1, k0 ^ k1 ^ 0x1BD11BDA), the rotation constants are
// {13, 15, 26, 6} then {17, 29, 16, 24}, and a key injection (plus the injection count in the second
// word) follows every 4 rounds. It matches the Random123 known-answer vectors (tests/random).
//
//   tessel::kernels::threefry2x32({0, 0}, {0, 0}) == {0x6b200159, 0x99ba4efe}

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "tessel/core/dtype.hpp"

namespace tessel::kernels {

// Two 32-bit words: a threefry key, counter or output block.
using word_pair = std::array<uint32, 2>;

namespace detail {
constexpr uint32 rotate_left(uint32 x, unsigned r) noexcept { return (x << r) | (x >> (32u - r)); }
}  // namespace detail

// The 64-bit output block of threefry2x32-20 for a 64-bit key and a 64-bit counter, each as two words.
// Bijective in the counter for a fixed key. Cost: 20 add/rotate/xor rounds and 5 key injections.
constexpr word_pair threefry2x32(word_pair key, word_pair counter) noexcept {
  constexpr unsigned rotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32 schedule[3] = {key[0], key[1], key[0] ^ key[1] ^ 0x1BD11BDAu};
  uint32 x0 = counter[0] + schedule[0];
  uint32 x1 = counter[1] + schedule[1];
  for (unsigned injection = 1; injection <= 5; ++injection) {
    for (unsigned r : rotations[(injection - 1) % 2]) {
      x0 += x1;
      x1 = detail::rotate_left(x1, r) ^ x0;
    }
    x0 += schedule[injection % 3];
    x1 += schedule[(injection + 1) % 3] + injection;  // the injection count keeps the schedule aperiodic
  }
  return {x0, x1};
}

// The 64-bit counter of flat index i as JAX's iota_2x32_shape writes it: {hi32(i), lo32(i)}.
constexpr word_pair counter_at(std::uint64_t index) noexcept {
  return {static_cast<uint32>(index >> 32), static_cast<uint32>(index)};
}

// Element `index` (row-major) of jax.random.bits(key, shape, uint32), for any shape with more elements.
constexpr uint32 bits32_at(word_pair key, std::uint64_t index) noexcept {
  const word_pair y = threefry2x32(key, counter_at(index));
  return y[0] ^ y[1];
}

// A float in [0, 1) from one word of bits, as JAX's _uniform: the top 23 bits fill the mantissa of a
// float in [1, 2), then 1 is subtracted (exact).
constexpr float unit_float_from_bits(uint32 bits) noexcept {
  return std::bit_cast<float>((bits >> 9) | 0x3f800000u) - 1.0f;
}

}  // namespace tessel::kernels
