// The f32 FMA peak: independent chains of vfmadd231ps on zmm registers, no memory traffic. Sixteen
// chains cover the FMA latency (4 cycles) on both FMA ports.
#include <immintrin.h>

#include <cstdint>

#include "race.hpp"

namespace tessel_bench {
namespace {

void fma_chains(std::uint64_t iterations, float* sink) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (std::uint64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_storeu_ps(sink, s);  // 16 floats
}

}  // namespace

void fma_f32_loop(std::uint64_t flops, std::size_t threads) {
  constexpr std::uint64_t flops_per_iteration = 16 * 16 * 2;
  static float sink[64];
  split(threads, threads, [&](std::size_t first, std::size_t) {
    fma_chains(flops / threads / flops_per_iteration + 1, &sink[first * 16]);
  });
}

}  // namespace tessel_bench
