// The AMX path of kernels/gemm.hpp's Highway kernel, for kernels/implementation.hpp (which routes a bf16 x
// bf16 product here when the tile unit is chosen: hwy_gemm_uses_amx): whether this CPU and OS allow the
// unit (machine::amx_bf16), the timing that chooses it, and its entry with the library's scratch and
// blocks. The kernel itself is kernels/amx.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#endif

#include "tessel/kernels/amx.hpp"
#include "tessel/kernels/gemm.hpp"
#include "tessel/kernels/machine.hpp"

namespace tessel::kernels {
namespace amx_detail {

// machine::amx_bf16: CPUID leaf 7 EDX bits 22 (AMX-BF16) and 24 (AMX-TILE), XCR0 bits 17 and 18 (the OS
// saves the tile state), and on Linux the permission to use it (ARCH_REQ_XCOMP_PERM for XTILEDATA,
// feature 18), which the kernel grants per process; a refusal is said once and leaves the vector paths.
inline bool amx_bf16_usable() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || ((edx >> 22) & 1u) == 0 || ((edx >> 24) & 1u) == 0) return false;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || ((ecx >> 27) & 1u) == 0) return false;  // OSXSAVE: XGETBV allowed
  unsigned xcr0_low = 0, xcr0_high = 0;
  asm volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if (((xcr0_low >> 17) & 3u) != 3u) return false;
#if defined(__linux__)
  constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
  if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0) {
    std::fprintf(stderr,
                 "tessel: this CPU has AMX, but Linux refused this process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %s); "
                 "bf16 GEMMs take the AVX-512 path\n",
                 std::strerror(errno));
    return false;
  }
#endif
  return true;
#else
  return false;
#endif
}

// The AMX path's own blocks: the Highway kernel's MC and NC, and a K block of twice its KC (a pair of bf16
// takes one float of scratch, as on the vdpbf16ps path).
inline gemm_blocking own_blocking() {
  gemm_blocking own = blocking_of(gemm_kernel::hwy);
  own.mr = amx::mr;
  own.nr = amx::nr;
  own.kc *= 2;
  return own;
}

// The tile unit's product (amx::multiply) with the library's scratch.
inline void multiply(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n, std::size_t k, float* c,
                     std::size_t ldc, float* scratch, const gemm_blocking& blocks, const std::uint32_t* packed = nullptr,
                     std::size_t words_per_panel = 0) {
#if defined(__x86_64__)
  amx::multiply<amx::hardware_tiles>(a, b, m0, m1, n, k, c, ldc, scratch, gemm_scratch_floats(), blocks, packed, words_per_panel);
#else
  (void)a, (void)b, (void)m0, (void)m1, (void)n, (void)k, (void)c, (void)ldc, (void)scratch, (void)blocks, (void)packed, (void)words_per_panel;
  throw std::logic_error("tessel::kernels: the AMX path exists on x86-64 only");
#endif
}

// Whether a product takes the tile unit: bf16 by bf16, and the unit chosen.
inline bool takes_amx(const matrix_view& a, const matrix_view& b) { return a.bf16 && b.bf16 && hwy_gemm_uses_amx(); }

// Whether the tile unit multiplies bf16 x bf16 15% faster than `vectors`, the Highway kernel's own product
// (the vector path this CPU takes), on one block of MC rows, K = 1024 and N = 4 NR.
inline bool outruns_vectors(gemm_blocked_fn vectors) {
  const gemm_blocking tiles = own_blocking();
  const std::size_t m = tiles.mc, n = 4 * amx::nr, k = 1024;
  return detail::bf16_path_outruns(
      m, n, k, gemm_scratch_floats(),
      [&](const matrix_view& a, const matrix_view& b, float* c, float* scratch) { vectors(a, b, 0, m, n, k, c, n, scratch, {.kc = 0}); },
      [&](const matrix_view& a, const matrix_view& b, float* c, float* scratch) { multiply(a, b, 0, m, n, k, c, n, scratch, tiles); });
}
}  // namespace amx_detail
}  // namespace tessel::kernels
