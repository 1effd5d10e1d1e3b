// Part of tessel/kernels/implementation.hpp: the BLIS-style GEMM written with xsimd, compiled for the
// instruction set of the translation unit that includes it (the tessel library's): the loop nest of
// kernels/gemm_nest.hpp with this file's atom. B is packed in KC x NR column panels, A in MC x KC row
// panels of MR rows, and a register-blocked micro-kernel (MR rows x two SIMD vectors) accumulates with FMA. A and B are read through arbitrary row/column strides (so
// A^T and B^T need no copy) and as f32 or bf16 (widened while packing). C is a dense f32 row-major
// panel. Include tessel/kernels/gemm.hpp to call it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include "tessel/kernels/gemm.hpp"
#include "tessel/kernels/gemm_nest.hpp"

// Full unrolling of the register-block loops, on both compilers.
#if defined(__clang__)
#define TESSEL_UNROLL_ALL _Pragma("unroll")
#else
#define TESSEL_UNROLL_ALL _Pragma("GCC unroll 16")
#endif

namespace tessel::kernels::detail {

// xsimd's blocking for batches of `Lanes` floats.
template <std::size_t Lanes>
struct xsimd_blocking_of {
  static constexpr std::size_t nr = 2 * Lanes;
  static constexpr std::size_t mr = Lanes >= 16 ? 12 : 6;  // 24 accumulators of 32 zmm; 12 of 16 otherwise
  static constexpr std::size_t kc = 256;
  static constexpr std::size_t mc = mr * 8;
  static constexpr std::size_t nc = nr * 64;
};

// This build's.
struct xsimd_blocking : xsimd_blocking_of<xsimd::batch<float>::size> {
  using batch = xsimd::batch<float>;
};

// The panels of one call of a blocking: B's KC x NC, A's MC x KC and a C tile.
template <class Blocking>
constexpr std::size_t panel_floats() {
  return Blocking::kc * Blocking::nc + Blocking::mc * Blocking::kc + Blocking::mr * Blocking::nr;
}

// One call's packed panels, for every kernel of the library: the Highway kernels size their NC to fit. At
// least what a 16-lane (AVX-512) xsimd build takes, whatever this build's xsimd width: a plain x86-64 build
// (xsimd SSE2, 4 lanes) still runs Highway's AVX-512 kernels, which a scratch sized for SSE2 cut to NC 160
// (960 natively).
inline constexpr std::size_t scratch_floats = std::max(panel_floats<xsimd_blocking>(), panel_floats<xsimd_blocking_of<16>>());

inline void pack_b(const matrix_view& b, std::size_t k0, std::size_t kc, std::size_t n0, std::size_t nc, float* out) {
  constexpr std::size_t nr = xsimd_blocking::nr;
  for (std::size_t j = 0; j < nc; j += nr) {
    const std::size_t w = std::min(nr, nc - j);
    for (std::size_t k = 0; k < kc; ++k) {
      float* dst = out + j * kc + k * nr;
      if (!b.bf16 && b.col_stride == 1) {
        const float* src = static_cast<const float*>(b.data) + (k0 + k) * b.row_stride + n0 + j;
        std::memcpy(dst, src, w * sizeof(float));
      } else {
        for (std::size_t c = 0; c < w; ++c) dst[c] = b.at(k0 + k, n0 + j + c);
      }
      for (std::size_t c = w; c < nr; ++c) dst[c] = 0.0f;
    }
  }
}

inline void pack_a(const matrix_view& a, std::size_t m0, std::size_t mc, std::size_t k0, std::size_t kc, float* out) {
  constexpr std::size_t mr = xsimd_blocking::mr;
  for (std::size_t i = 0; i < mc; i += mr) {
    const std::size_t h = std::min(mr, mc - i);
    float* panel = out + i * kc;
    if (!a.bf16 && a.col_stride == 1) {
      for (std::size_t r = 0; r < h; ++r) {
        const float* src = static_cast<const float*>(a.data) + (m0 + i + r) * a.row_stride + k0;
        for (std::size_t k = 0; k < kc; ++k) panel[k * mr + r] = src[k];
      }
    } else {
      for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t r = 0; r < h; ++r) panel[k * mr + r] = a.at(m0 + i + r, k0 + k);
    }
    for (std::size_t k = 0; k < kc; ++k)
      for (std::size_t r = h; r < mr; ++r) panel[k * mr + r] = 0.0f;
  }
}

// acc(MR x NR) = sum over kc of a_panel(:, k) * b_panel(k, :); then C += acc (or C = acc when first).
inline void micro_kernel(std::size_t kc, const float* a, const float* b, float* c, std::size_t ldc, std::size_t rows,
                         std::size_t cols, bool first, float* edge) {
  using batch = xsimd_blocking::batch;
  constexpr std::size_t mr = xsimd_blocking::mr, w = batch::size;
  // The accumulators must live in registers: the loops over r are unrolled explicitly (-O2 would not).
  batch acc0[mr], acc1[mr];
TESSEL_UNROLL_ALL
  for (std::size_t r = 0; r < mr; ++r) acc0[r] = acc1[r] = batch(0.0f);
  for (std::size_t k = 0; k < kc; ++k) {
    const batch b0 = batch::load_aligned(b + k * 2 * w);
    const batch b1 = batch::load_aligned(b + k * 2 * w + w);
    const float* ak = a + k * mr;
TESSEL_UNROLL_ALL
    for (std::size_t r = 0; r < mr; ++r) {
      const batch av(ak[r]);
      acc0[r] = xsimd::fma(av, b0, acc0[r]);
      acc1[r] = xsimd::fma(av, b1, acc1[r]);
    }
  }
  if (rows == mr && cols == 2 * w) {
TESSEL_UNROLL_ALL
    for (std::size_t r = 0; r < mr; ++r) {
      float* cr = c + r * ldc;
      if (first) {
        acc0[r].store_unaligned(cr);
        acc1[r].store_unaligned(cr + w);
      } else {
        (batch::load_unaligned(cr) + acc0[r]).store_unaligned(cr);
        (batch::load_unaligned(cr + w) + acc1[r]).store_unaligned(cr + w);
      }
    }
    return;
  }
TESSEL_UNROLL_ALL
  for (std::size_t r = 0; r < mr; ++r) {
    acc0[r].store_aligned(edge + r * 2 * w);
    acc1[r].store_aligned(edge + r * 2 * w + w);
  }
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j) c[r * ldc + j] = first ? edge[r * 2 * w + j] : c[r * ldc + j] + edge[r * 2 * w + j];
}

// The register atom of the loop nest (kernels/gemm_nest.hpp): A and B always packed, an MR x NR block of
// FMA.
struct xsimd_atom {
  using word = float;
  static constexpr std::size_t mr = xsimd_blocking::mr, nr = xsimd_blocking::nr;
  float* packed_b;
  float* packed_a;
  float* edge;

  explicit xsimd_atom(float* scratch)
      : packed_b(scratch), packed_a(scratch + xsimd_blocking::kc * xsimd_blocking::nc), edge(packed_a + xsimd_blocking::mc * xsimd_blocking::kc) {}

  b_panels<float> place_b(const matrix_view& b, std::size_t, std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc,
                          const float*, std::size_t, std::size_t) const {
    pack_b(b, p0, kc, j0, nc, packed_b);
    return {packed_b, kc * nr, nr, false};
  }
  a_rows<float> place_a(const matrix_view& a, std::size_t i0, std::size_t mc, std::size_t p0, std::size_t kc, std::size_t) const {
    pack_a(a, i0, mc, p0, kc, packed_a);
    return {packed_a, nullptr, 0, false};
  }
  void tile(const matrix_view&, const a_rows<float>& ar, const b_panels<float>& bp, std::size_t i, std::size_t mc, std::size_t kc,
            std::size_t j, std::size_t cols, float* c, std::size_t ldc, bool first) const {
    micro_kernel(kc, ar.packed + i * kc, bp.first + j / nr * bp.stride, c, ldc, std::min(mr, mc - i), cols, first, edge);
  }
};

// C[m0:m1, 0:n] (row-major, leading dimension ldc, rows counted from m0) = A[m0:m1, :] * B.
// blocks: KC, MC, NC at most xsimd_blocking's (whose scratch regions it uses); kc == 0 means those.
inline void xsimd_gemm_rows(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                            std::size_t k, float* c, std::size_t ldc, float* scratch, const gemm_blocking& blocks) {
  const gemm_blocking own{.mr = xsimd_blocking::mr, .nr = xsimd_blocking::nr, .kc = xsimd_blocking::kc, .mc = xsimd_blocking::mc,
                          .nc = xsimd_blocking::nc};
  gemm_nest(xsimd_atom(scratch), a, b, m0, m1, n, k, c, ldc, blocks.kc == 0 ? own : blocks);
}

}  // namespace tessel::kernels::detail
