// The bf16 dot-product peaks: independent chains of vdpbf16ps on zmm registers (each does 32 bf16
// products summed pairwise into 16 f32 lanes: 64 flops), built with -mavx512bf16 (this file only); and
// where the CPU has AMX, the tile unit's tdpbf16ps on four independent accumulators.
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include <tessel/kernels/amx.hpp>
#include <tessel/kernels/machine.hpp>

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

#if defined(__x86_64__)
void tile_chains(std::uint64_t iterations, float* sink) {
  namespace amx = tessel::kernels::amx;
  std::vector<std::uint32_t> operands(amx::tile_size, 0x3c003c00u);  // pairs of bf16 1/128
  tessel::kernels::amx::hardware_tiles unit(amx::block_config());
  unit.zero<amx::c00>(), unit.zero<amx::c01>(), unit.zero<amx::c10>(), unit.zero<amx::c11>();
  unit.load<amx::a0>(operands.data(), 64), unit.load<amx::a1>(operands.data(), 64);
  unit.load<amx::b0>(operands.data(), 64), unit.load<amx::b1>(operands.data(), 64);
  for (std::uint64_t it = 0; it < iterations; ++it) {
    unit.dpbf16<amx::c00, amx::a0, amx::b0>();
    unit.dpbf16<amx::c01, amx::a0, amx::b1>();
    unit.dpbf16<amx::c10, amx::a1, amx::b0>();
    unit.dpbf16<amx::c11, amx::a1, amx::b1>();
  }
  std::vector<float> c(amx::tile_size);
  unit.store<amx::c00>(c.data(), 64);
  *sink = c[0];
}
#endif

}  // namespace

bool amx_loop(std::uint64_t flops, std::size_t threads) {
#if defined(__x86_64__)
  if (!tessel::kernels::this_machine().amx_bf16) return false;
  constexpr std::uint64_t flops_per_iteration = 4 * 16 * 16 * 32 * 2;
  static float sink[64];
  split(threads, threads, [&](std::size_t first, std::size_t) { tile_chains(flops / threads / flops_per_iteration + 1, &sink[first]); });
  return true;
#else
  (void)flops, (void)threads;
  return false;
#endif
}

void dpbf16_loop(std::uint64_t flops, std::size_t threads) {
  constexpr std::uint64_t flops_per_iteration = 16 * 64;
  static float sink[64];
  split(threads, threads, [&](std::size_t first, std::size_t) {
    dpbf16_chains(flops / threads / flops_per_iteration + 1, &sink[first * 16]);
  });
}

}  // namespace tessel_bench
