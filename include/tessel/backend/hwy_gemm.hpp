#pragma once
// Single-precision GEMM whose kernel is chosen at run time: hwy_gemm_rows is gemm_rows (gemm.hpp) with
// its micro-kernel compiled by Highway for every x86 target (SSSE3, SSE4, AVX2, AVX-512, AVX-512 DL and a
// scalar fallback) and the best one for the running CPU called through HWY_DYNAMIC_DISPATCH, so a
// program built for plain x86-64 still multiplies with AVX-512 where the CPU has it. bf16 operands are
// widened to f32 while packing; bf16 x bf16 may instead use vdpbf16ps where the CPU has AVX512_BF16
// (hwy_gemm_allow_dpbf16: off by default, slower here). gemm_reference is the scalar path the others
// are tested against, and select_gemm picks one of the three for the executor.
//
// Contract (all three kernels): C[0 : m1 - m0, 0 : n] (row-major, leading dimension ldc >= n) =
// A[m0 : m1, 0 : k] * B[0 : k, 0 : n], where A and B are matrix_views (any row/column strides, so A^T
// and B^T need no copy; elements f32, or bf16 when the view says so, mixed allowed). k == 0 gives
// C = 0. `scratch` holds gemm_scratch::floats floats aligned to 64 bytes, one per concurrent call
// (gemm_reference ignores it). Error: with u = 2^-24, |C - AB| <= 2 k u sum_p |A[i,p] B[p,j]| for the
// f32 kernels (f32 FMA accumulation of exact products of the f32 or widened-bf16 inputs); the
// vdpbf16ps path has the same bound, except that it treats bf16 inputs below 2^-126 in magnitude as
// zero and flushes f32 results below 2^-126 to zero (DAZ/FTZ, as the instruction does).
// gemm_reference accumulates in double and rounds once.
//
//   float c[2 * 3];
//   hwy_gemm_rows(a, b, 0, 2, 3, k, c, 3, scratch);  // C = A[0:2, :] * B, B has 3 columns
//
// Highway 1.0.3 allows one hwy/foreach_target.h per translation unit: further Highway kernels belong
// in their own -inl header included from this file's HWY_TARGET_INCLUDE pass, not in a second
// aggregator header.

#if defined(HIGHWAY_HWY_FOREACH_TARGET_H_)
#error "tessel/backend/hwy_gemm.hpp: hwy/foreach_target.h was already included in this translation unit. Highway 1.0.3 compiles one set of per-target code per translation unit: include all Highway kernels through one aggregator header."
#endif

// Highway 1.0.3 with -march=native on an AVX-512 DL CPU stops with "best baseline should be included
// in dynamic targets" unless AVX3_DL is wanted; it also lets plain x86-64 builds dispatch to AVX3_DL.
// Best defined for every translation unit of a program (an INTERFACE compile definition of tessel::tessel),
// so that all agree on the targets even where a Highway header comes before this one.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL 1
#endif

#include <cstddef>

#include "tessel/backend/gemm.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tessel/backend/hwy_gemm-inl.hpp"
#include <hwy/foreach_target.h>  // NOLINT: includes HWY_TARGET_INCLUDE once per target
#include <hwy/highway.h>

#include "tessel/backend/hwy_gemm-inl.hpp"  // the static target's pass
#undef HWY_TARGET_INCLUDE

namespace tessel::backend {

// Every kernel has gemm_rows's signature.
using gemm_rows_fn = void (*)(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1,
                              std::size_t n, std::size_t k, float* c, std::size_t ldc, float* scratch);

namespace hwy_detail {

// HWY_EXPORT defines a `static` table; inside an inline function it is one table per program, however
// many translation units include this header (at namespace scope it would be one per TU, and the inline
// wrappers below would then differ between TUs).
inline void gemm_rows(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                      std::size_t k, float* c, std::size_t ldc, float* scratch) {
  HWY_EXPORT(gemm_rows_target);
  HWY_DYNAMIC_DISPATCH(gemm_rows_target)(a, b, m0, m1, n, k, c, ldc, scratch);
}

inline const char* target() {
  HWY_EXPORT(target_name);
  return HWY_DYNAMIC_DISPATCH(target_name)();
}

inline bool dpbf16() {
  HWY_EXPORT(uses_dpbf16);
  return HWY_DYNAMIC_DISPATCH(uses_dpbf16)();
}

}  // namespace hwy_detail

// gemm_rows through Highway's run-time dispatch (contract above).
inline void hwy_gemm_rows(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                          std::size_t k, float* c, std::size_t ldc, float* scratch) {
  hwy_detail::gemm_rows(a, b, m0, m1, n, k, c, ldc, scratch);
}

// The Highway target hwy_gemm_rows runs on this CPU, e.g. "AVX3_DL".
inline const char* hwy_gemm_target() { return hwy_detail::target(); }

// Whether hwy_gemm_rows multiplies bf16 x bf16 with vdpbf16ps (AVX-512 target, AVX512_BF16 CPU, allowed).
inline bool hwy_gemm_uses_dpbf16() { return hwy_detail::dpbf16(); }

// Allows or forbids the vdpbf16ps path for bf16 x bf16 (forbidden, the default: bf16 is widened to f32
// while packing, as gemm_rows does). Worth allowing on CPUs whose vdpbf16ps runs at the f32 FMA's flop
// rate or faster; on this project's development CPU it runs at half (bench/hwy_gemm.cpp measures both).
// Returns the previous setting. Process-wide.
inline bool hwy_gemm_allow_dpbf16(bool allow) { return hwy_detail::dpbf16_allowed().exchange(allow); }

// The scalar path: each element a dot product accumulated in double, rounded once to f32. Slow; the
// reference the SIMD paths are tested against. `scratch` is unused (kept for gemm_rows_fn).
inline void gemm_reference(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                           std::size_t k, float* c, std::size_t ldc, float* /*scratch*/ = nullptr) {
  for (std::size_t i = m0; i < m1; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::size_t p = 0; p < k; ++p) s += static_cast<double>(a.at(i, p)) * static_cast<double>(b.at(p, j));
      c[(i - m0) * ldc + j] = static_cast<float>(s);
    }
}

enum class gemm_kernel {
  scalar,  // gemm_reference
  xsimd,   // gemm_rows: the instruction set this translation unit was compiled for
  hwy,     // hwy_gemm_rows: the best instruction set of the running CPU
};

// The kernel the executor uses unless told otherwise: Highway's, which needs no -march flag to reach
// AVX-512 and is at least as fast as xsimd's with one (bench/hwy_gemm.cpp).
inline constexpr gemm_kernel default_gemm_kernel = gemm_kernel::hwy;

inline gemm_rows_fn select_gemm(gemm_kernel which = default_gemm_kernel) {
  switch (which) {
    case gemm_kernel::scalar: return &gemm_reference;
    case gemm_kernel::xsimd: return &gemm_rows;
    case gemm_kernel::hwy: break;
  }
  return &hwy_gemm_rows;
}

}  // namespace tessel::backend
