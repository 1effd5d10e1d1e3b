// The bf16 dot-product peak: independent chains of vdpbf16ps on zmm registers (each does 32 bf16
// products summed pairwise into 16 f32 lanes: 64 flops). Built with -mavx512bf16 (this file only).
#include <immintrin.h>

#include <cstdint>

#include "race.hpp"

namespace tessel_bench {
namespace {

void dpbf16_chains(std::uint64_t iterations, float* sink) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(3e-3f), _mm512_set1_ps(-1e-3f));
  for (std::uint64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_storeu_ps(sink, s);  // 16 floats
}

}  // namespace

void dpbf16_loop(std::uint64_t flops, std::size_t threads) {
  constexpr std::uint64_t flops_per_iteration = 16 * 64;
  static float sink[64];
  split(threads, threads, [&](std::size_t first, std::size_t) {
    dpbf16_chains(flops / threads / flops_per_iteration + 1, &sink[first * 16]);
  });
}

}  // namespace tessel_bench
