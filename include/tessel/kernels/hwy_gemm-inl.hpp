// Per-target part of hwy_gemm_rows (tessel/kernels/gemm.hpp): Highway compiles this file once per target
// through HWY_TARGET_INCLUDE (hwy/foreach_target.h, in kernels/implementation.hpp), each time into its own
// namespace tessel::kernels::hwy_detail::N_<TARGET>. On its own it compiles the static (compile-time)
// target only, without dispatch.
//
// The loop nest of kernels/gemm_nest.hpp, as gemm_xsimd-inl.hpp runs it (B packed in KC x NR panels, A in
// MC x KC panels of MR rows, an MR x NR register block accumulated with FMA), with this file's atoms written
// in Highway ops so that one binary holds an SSSE3, SSE4, AVX2, AVX-512 and scalar kernel and runs the best one.
// Where both operands are bf16 and the CPU has AVX512_BF16, operands may be packed as bf16 pairs along K
// for a micro-kernel with vdpbf16ps (two products per f32 lane per instruction) instead of widened to
// f32 while packing: whichever of the two is faster on the running CPU (hwy_gemm_set_bf16_products).

// Target-independent part, once per translation unit.
#ifndef TESSEL_KERNELS_HWY_GEMM_INL_COMMON
#define TESSEL_KERNELS_HWY_GEMM_INL_COMMON

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

#ifndef HWY_WANT_AVX3_DL  // see implementation.hpp
#define HWY_WANT_AVX3_DL 1
#endif
#include <hwy/highway.h>

#include "tessel/kernels/gemm_nest.hpp"
#include "tessel/kernels/gemm_xsimd-inl.hpp"
#include "tessel/kernels/machine.hpp"
#include "tessel/core/bfloat16.hpp"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

namespace tessel::kernels::hwy_detail {

// C's rows of a tile are ldc apart (often a multiple of 4 KiB) and, past the first K block, come back
// from L3 or memory: the micro-kernels prefetch row r during their k = r step, which hides that
// latency (≈ +10% at N = 2048 here). A macro, not a function: GCC 12 kept the accumulators in memory
// (a store per k) when the prefetch came from an inline function or a loop before the K loop.
#if defined(__GNUC__) || defined(__clang__)
#define TESSEL_HWY_GEMM_PREFETCH_ROW(row, lanes, nr) \
  (__builtin_prefetch((row), 1), __builtin_prefetch((row) + (lanes), 1), __builtin_prefetch((row) + (nr)-1, 1))
#else
#define TESSEL_HWY_GEMM_PREFETCH_ROW(row, lanes, nr) ((void)(row))
#endif

// A value the compiler must take as changed here, so that it does not hoist what is derived from it out
// of the loop (micro_kernel_f32's row stride of A in place; see there).
#if defined(__GNUC__) || defined(__clang__)
#define TESSEL_HWY_GEMM_OPAQUE(value) asm volatile("" : "+r"(value))
#else
#define TESSEL_HWY_GEMM_OPAQUE(value) ((void)(value))
#endif

}  // namespace tessel::kernels::hwy_detail

#endif  // TESSEL_KERNELS_HWY_GEMM_INL_COMMON

// Per-target part: toggled once per pass of foreach_target.h.
#if defined(TESSEL_KERNELS_HWY_GEMM_INL_TOGGLE) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSEL_KERNELS_HWY_GEMM_INL_TOGGLE
#undef TESSEL_KERNELS_HWY_GEMM_INL_TOGGLE
#else
#define TESSEL_KERNELS_HWY_GEMM_INL_TOGGLE
#endif

#include <hwy/highway.h>

// The vdpbf16ps kernel exists for the AVX-512 targets (and is still guarded by CPUID at run time).
#undef TESSEL_HWY_GEMM_DPBF16
#if (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && (HWY_COMPILER_GCC || HWY_COMPILER_CLANG)
#define TESSEL_HWY_GEMM_DPBF16 1
#else
#define TESSEL_HWY_GEMM_DPBF16 0
#endif

HWY_BEFORE_NAMESPACE();
namespace tessel::kernels::hwy_detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline const char* target_name() { return hwy::TargetName(HWY_TARGET); }

#if HWY_HAVE_SCALABLE
// Sizeless vectors (SVE, RVV) cannot live in the arrays the register block uses: a plain loop.
inline void gemm_rows_target(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                             std::size_t k, float* c, std::size_t ldc, float* /*scratch*/, const gemm_blocking& /*blocks*/) {
  for (std::size_t i = m0; i < m1; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (std::size_t p = 0; p < k; ++p) s += a.at(i, p) * b.at(p, j);
      c[(i - m0) * ldc + j] = s;
    }
}
inline bool uses_dpbf16() { return false; }
inline gemm_blocking blocking_target() { return {}; }
inline bool reads_b_in_place_target(const matrix_view&, std::size_t, std::size_t) { return false; }
// No packed form: panels == 0 tells the caller to use gemm_rows_target.
inline packed_b_layout packed_layout_target(const matrix_view&, const matrix_view&, std::size_t, std::size_t,
                                            const gemm_blocking&) {
  return {};
}
inline void pack_b_target(const matrix_view&, std::size_t, std::size_t, const gemm_blocking&, const packed_b_layout&,
                          std::size_t, std::size_t, float*) {}
inline void gemm_rows_packed_target(const matrix_view&, const float*, const packed_b_layout&, std::size_t, std::size_t,
                                    std::size_t, std::size_t, float*, std::size_t, float*, const gemm_blocking&) {
  throw std::logic_error("tessel::kernels::hwy_gemm_rows_packed: this target has no packed B (its layout has 0 panels)");
}
#else

// Blocking for this target. NC is as large as the library's one scratch size (detail::scratch_floats)
// allows, so every kernel has the same scratch contract.
struct blocking {
  static constexpr std::size_t lanes = HWY_LANES(float);
  static constexpr std::size_t nr = 2 * lanes;
  // 2*MR accumulators + 2 B vectors + 1 broadcast: 27 of AVX-512's 32 registers, 15 of 16 otherwise.
  static constexpr std::size_t mr = (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) ? 12 : 6;
  // Elements of K per block (half as many pairs on the dpbf16 path). Each K block reads and writes
  // C's tile once more, and that, not the B panel's fit in L1, is what a longer block saves: on an AMD
  // EPYC Zen 4 (32 KiB L1), 2048^3 on one thread ran 101 GFLOP/s at KC 256 and 106 at 512, whose 64 KiB
  // panel streams from L2; 1024 (NC then 416) was no faster.
  static constexpr std::size_t kc = 512;
  static constexpr std::size_t mc = mr * 8;
  static constexpr std::size_t a_in_place_panels = 8;  // an f32 A block feeding at most this many B panels is not packed
  static constexpr std::size_t b_in_place_rows = 12 * mr;  // an f32 B feeding at most this many rows of A is not packed
  static constexpr std::size_t nc_cap = 2048;
  static constexpr std::size_t nc =
      std::min(nc_cap, (detail::scratch_floats - mc * kc - mr * nr) / kc / nr * nr);
  static_assert(nc >= nr, "detail::scratch_floats is too small for this target's blocking");
  static_assert(kc * nc + mc * kc + mr * nr <= detail::scratch_floats);
};

// ---- f32 path (f32 operands, or bf16 widened while packing) ----

#if HWY_TARGET != HWY_SCALAR
// Four floats of `m` from element `at` on (f32, or bf16 widened).
template <class D4>
HWY_INLINE hn::Vec<D4> load4_f32(D4 d4, const matrix_view& m, std::size_t at) {
  const hn::RebindToUnsigned<D4> du4;
  const hn::Rebind<std::uint16_t, decltype(du4)> du16;
  if (m.bf16) return hn::BitCast(d4, hn::ShiftLeft<16>(hn::PromoteTo(du4, hn::LoadU(du16, m.bf16_bits() + at))));
  return hn::LoadU(d4, m.f32() + at);
}

// Four runs of four floats (v_q = run q, elements 0..3) stored transposed: element e of every run, in run
// order, at to + e * stride. Turns rows of A (or columns of B^T) into the packed panels' rows.
template <class D4, class V>
HWY_INLINE void store_transposed4(D4 d4, V v0, V v1, V v2, V v3, float* HWY_RESTRICT to, std::size_t stride) {
  const V lo01 = hn::InterleaveLower(d4, v0, v1), lo23 = hn::InterleaveLower(d4, v2, v3);
  const V hi01 = hn::InterleaveUpper(d4, v0, v1), hi23 = hn::InterleaveUpper(d4, v2, v3);
  hn::StoreU(hn::ConcatLowerLower(d4, lo23, lo01), d4, to);
  hn::StoreU(hn::ConcatUpperUpper(d4, lo23, lo01), d4, to + stride);
  hn::StoreU(hn::ConcatLowerLower(d4, hi23, hi01), d4, to + 2 * stride);
  hn::StoreU(hn::ConcatUpperUpper(d4, hi23, hi01), d4, to + 3 * stride);
}
#endif

// B's block [k0, k0 + kc) x [n0, n0 + nc) into panels of NR columns (row-major within a panel), as f32,
// zero past column n0 + nc. Panel q starts at out + q * panel_floats (kc * NR in a scratch packed per
// K block; more where B is packed whole, every K block of a panel after the previous one).
inline void pack_b_f32(const matrix_view& b, std::size_t k0, std::size_t kc, std::size_t n0, std::size_t nc,
                       float* HWY_RESTRICT out, std::size_t panel_floats) {
  constexpr std::size_t nr = blocking::nr, lanes = blocking::lanes;
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<std::uint16_t, decltype(du)> du16;
  // Rows of B contiguous: whole panels row by row of B, so that the reads run along B's rows (two
  // streams the prefetcher follows) rather than down a panel's column of rows a row stride apart,
  // which stalled on every load (a third of the GEMM's time at N = 1024).
  const std::size_t whole = b.col_stride == 1 ? nc / nr * nr : 0;
  for (std::size_t k = 0; k < kc && whole > 0; ++k) {
    const std::size_t at = (k0 + k) * b.row_stride + n0;
    float* HWY_RESTRICT row = out + k * nr;
    if (b.bf16) {
      for (std::size_t j = 0; j < whole; j += nr)
        for (std::size_t v = 0; v < nr; v += lanes) {
          const auto bits = hn::PromoteTo(du, hn::LoadU(du16, b.bf16_bits() + at + j + v));
          hn::Store(hn::BitCast(df, hn::ShiftLeft<16>(bits)), df, row + j / nr * panel_floats + v);
        }
    } else {
      for (std::size_t j = 0; j < whole; j += nr)
        for (std::size_t v = 0; v < nr; v += lanes)
          hn::Store(hn::LoadU(df, b.f32() + at + j + v), df, row + j / nr * panel_floats + v);
    }
  }
  for (std::size_t j = whole; j < nc; j += nr) {
    const std::size_t w = std::min(nr, nc - j);
    float* HWY_RESTRICT panel = out + j / nr * panel_floats;
    if (b.row_stride == 1) {  // B^T given: K contiguous per column
      std::size_t col = 0;
#if HWY_TARGET != HWY_SCALAR
      // Four columns by four K steps at a time, transposed into the panel's rows.
      const hn::FixedTag<float, 4> d4;
      for (; col + 4 <= w; col += 4) {
        const std::size_t at = (n0 + j + col) * b.col_stride + k0, cs = b.col_stride;
        std::size_t k = 0;
        for (; k + 4 <= kc; k += 4)
          store_transposed4(d4, load4_f32(d4, b, at + k), load4_f32(d4, b, at + cs + k), load4_f32(d4, b, at + 2 * cs + k),
                            load4_f32(d4, b, at + 3 * cs + k), panel + k * nr + col, nr);
        for (; k < kc; ++k)
          for (std::size_t q = 0; q < 4; ++q) panel[k * nr + col + q] = b.at(k0 + k, n0 + j + col + q);
      }
#endif
      for (; col < w; ++col) {
        const std::size_t at = (n0 + j + col) * b.col_stride + k0;
        if (b.bf16)
          for (std::size_t k = 0; k < kc; ++k) panel[k * nr + col] = static_cast<const bfloat16*>(b.data)[at + k];
        else
          for (std::size_t k = 0; k < kc; ++k) panel[k * nr + col] = b.f32()[at + k];
      }
    } else {
      for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t col = 0; col < w; ++col) panel[k * nr + col] = b.at(k0 + k, n0 + j + col);
    }
    for (std::size_t k = 0; k < kc; ++k)
      for (std::size_t col = w; col < nr; ++col) panel[k * nr + col] = 0.0f;
  }
}

// A's rows [m0, m0 + mc) x K block into panels of MR rows, column-major within a panel.
inline void pack_a_f32(const matrix_view& a, std::size_t m0, std::size_t mc, std::size_t k0, std::size_t kc,
                       float* HWY_RESTRICT out) {
  constexpr std::size_t mr = blocking::mr;
#if HWY_TARGET != HWY_SCALAR
  // Four floats of a row or column at a time: A's rows turn into a panel's columns by 4 x 4 transposes
  // (element by element, the loads and 48-byte-strided stores took a tenth of a training step).
  const hn::FixedTag<float, 4> d4;
  constexpr std::size_t step = 4;
#endif
  for (std::size_t i = 0; i < mc; i += mr) {
    const std::size_t h = std::min(mr, mc - i);
    float* HWY_RESTRICT panel = out + i * kc;
    if (a.col_stride == 1) {  // rows of A contiguous
      std::size_t r = 0;
#if HWY_TARGET != HWY_SCALAR
      for (; r + step <= h; r += step) {
        const std::size_t at = (m0 + i + r) * a.row_stride + k0, rs = a.row_stride;
        std::size_t k = 0;
        for (; k + step <= kc; k += step) {
          store_transposed4(d4, load4_f32(d4, a, at + k), load4_f32(d4, a, at + rs + k), load4_f32(d4, a, at + 2 * rs + k),
                            load4_f32(d4, a, at + 3 * rs + k), panel + k * mr + r, mr);
        }
        for (; k < kc; ++k)
          for (std::size_t q = 0; q < step; ++q) panel[k * mr + r + q] = a.at(m0 + i + r + q, k0 + k);
      }
#endif
      for (; r < h; ++r) {
        const std::size_t at = (m0 + i + r) * a.row_stride + k0;
        if (a.bf16)
          for (std::size_t k = 0; k < kc; ++k) panel[k * mr + r] = static_cast<const bfloat16*>(a.data)[at + k];
        else
          for (std::size_t k = 0; k < kc; ++k) panel[k * mr + r] = a.f32()[at + k];
      }
    } else if (a.row_stride == 1) {  // A^T given: a panel's column is contiguous
      for (std::size_t k = 0; k < kc; ++k) {
        const std::size_t at = (k0 + k) * a.col_stride + m0 + i;
        std::size_t r = 0;
#if HWY_TARGET != HWY_SCALAR
        for (; r + step <= h; r += step) hn::StoreU(load4_f32(d4, a, at + r), d4, panel + k * mr + r);
#endif
        for (; r < h; ++r)
          panel[k * mr + r] = a.bf16 ? static_cast<float>(static_cast<const bfloat16*>(a.data)[at + r]) : a.f32()[at + r];
      }
    } else {
      for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t r = 0; r < h; ++r) panel[k * mr + r] = a.at(m0 + i + r, k0 + k);
    }
    if (h < mr)
      for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t r = h; r < mr; ++r) panel[k * mr + r] = 0.0f;
  }
}

// add + mul * x, rounded once, on every target. Highway's SCALAR MulAdd is `mul * x + add`, which GCC
// (-ffp-contract=fast, FMA in the baseline flags) made one FMA or two roundings as inlining fell, so that
// two kernels of the same products could round apart: std::fma says which.
template <class V>
HWY_INLINE V fused_mul_add(V mul, V x, V add) {
#if HWY_TARGET == HWY_SCALAR
  const hn::DFromV<V> d;
  return hn::Set(d, std::fma(hn::GetLane(mul), hn::GetLane(x), hn::GetLane(add)));
#else
  return hn::MulAdd(mul, x, add);
#endif
}

// One row of a tile to C: C = acc on the first K block, C += acc after.
template <class D, class V>
HWY_INLINE void store_row(D d, V v0, V v1, float* HWY_RESTRICT cr, bool first) {
  constexpr std::size_t lanes = blocking::lanes;
  if (!first) {
    v0 = hn::Add(hn::LoadU(d, cr), v0);
    v1 = hn::Add(hn::LoadU(d, cr + lanes), v1);
  }
  hn::StoreU(v0, d, cr);
  hn::StoreU(v1, d, cr + lanes);
}

// The first rows x cols of a tile held in `edge` (MR x NR floats) to C, as store_row does.
inline void store_edge(const float* HWY_RESTRICT edge, float* HWY_RESTRICT c, std::size_t ldc, std::size_t rows,
                       std::size_t cols, bool first) {
  constexpr std::size_t nr = blocking::nr;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j)
      c[r * ldc + j] = first ? edge[r * nr + j] : c[r * ldc + j] + edge[r * nr + j];
}

// acc(Rows x NR) = sum over kc >= 1 of a_panel(:, k) * b_panel(k, :), then C's first rows (<= Rows) x cols
// = acc (first K block) or += acc. A's panel is packed (pack_a_f32: element (r, k) at a[k * MR + r]) or,
// InPlace, read where it is, element (r, k) at a[k * a_k + r * a_row] (Rows whole rows). Rows below MR serve
// a last panel of few rows: its padding rows would cost as many FMAs as real ones. Narrow: C has at most one
// vector's columns here (a classifier's 10 logits): the panel's second vector of B and of accumulators is
// not computed.
template <bool InPlace = false, std::size_t Rows = blocking::mr, bool BInPlace = false, bool Narrow = false>
inline void micro_kernel_f32(std::size_t kc, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, float* c,
                             std::size_t ldc, std::size_t rows, std::size_t cols, bool first, float* edge,
                             std::size_t a_k = 0, std::size_t a_row = 0, std::size_t b_k = blocking::nr) {
  constexpr std::size_t mr = Rows, lanes = blocking::lanes, nr = blocking::nr;
  static_assert(Rows <= blocking::mr && !(Narrow && BInPlace));
  const std::size_t k_step = InPlace ? a_k : blocking::mr, row_step = InPlace ? a_row : 1;
  const std::size_t b_step = BInPlace ? b_k : nr;
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  V acc0[mr], acc1[Narrow ? 1 : mr];
  {  // the first k initialises the accumulators (rounded as an FMA onto zero would be)
    const V b0 = BInPlace ? hn::LoadU(d, b) : hn::Load(d, b);
    const V b1 = Narrow ? b0 : BInPlace ? hn::LoadU(d, b + lanes) : hn::Load(d, b + lanes);
    for (std::size_t r = 0; r < mr; ++r) {
      const V av = hn::Set(d, a[r * row_step]);
      acc0[r] = hn::Mul(av, b0);
      if constexpr (!Narrow) acc1[r] = hn::Mul(av, b1);
    }
  }
  // A in place: row g q + s read at base[q] + s * row (g = 3 rows a base, 2 for a kernel of 8 or 4 rows),
  // with `row` opaque in the loop, so that each row is addressed as a base plus an index register. Left
  // to itself GCC 12 keeps a pointer per row, more than the general registers free beside the loop's own,
  // and reloads the spilled ones every k: 12 x 32 over K 128 in L1 ran at 0.89 of the FMA peak that way,
  // 0.94 this way, as fast as from a packed panel (AMD EPYC Zen 4).
  constexpr std::size_t group = mr % 3 == 0 ? 3 : mr % 2 == 0 ? 2 : 1;
  const float* HWY_RESTRICT base[InPlace ? mr / group : 1];
  for (std::size_t q = 0; q < (InPlace ? mr / group : 1); ++q) base[q] = a + group * q * row_step;
  std::size_t row = row_step;
  for (std::size_t k = 1; k < kc; ++k) {
    const V b0 = BInPlace ? hn::LoadU(d, b + k * b_step) : hn::Load(d, b + k * b_step);
    const V b1 = Narrow ? b0 : BInPlace ? hn::LoadU(d, b + k * b_step + lanes) : hn::Load(d, b + k * b_step + lanes);
    const float* HWY_RESTRICT ak = a + k * k_step;
    if (k <= rows) TESSEL_HWY_GEMM_PREFETCH_ROW(c + (k - 1) * ldc, lanes, Narrow ? lanes : nr);
    if constexpr (InPlace) TESSEL_HWY_GEMM_OPAQUE(row);
    for (std::size_t r = 0; r < mr; ++r) {
      const V av = hn::Set(d, InPlace ? base[r / group][k * k_step + r % group * row] : ak[r * row_step]);
      acc0[r] = fused_mul_add(av, b0, acc0[r]);
      if constexpr (!Narrow) acc1[r] = fused_mul_add(av, b1, acc1[r]);
    }
  }
  // Loops over the arrays in this function (not a helper taking them by reference, nor a lambda
  // capturing them): otherwise GCC 12 keeps the accumulators in memory and stores them on every k.
  if constexpr (Narrow) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    // AVX-512's masked loads and stores touch only the columns in the mask (other targets' emulations
    // load and store whole vectors, which would rewrite columns another thread owns).
    const auto mask = hn::FirstN(d, cols);
    for (std::size_t r = 0; r < mr; ++r) {
      if (r >= rows) break;
      float* HWY_RESTRICT cr = c + r * ldc;
      hn::BlendedStore(first ? acc0[r] : hn::Add(hn::MaskedLoad(mask, d, cr), acc0[r]), mask, d, cr);
    }
#else
    for (std::size_t r = 0; r < mr; ++r) hn::Store(acc0[r], d, edge + r * nr);
    store_edge(edge, c, ldc, rows, cols, first);
#endif
    return;
  } else if (rows == mr && cols == nr) {
    for (std::size_t r = 0; r < mr; ++r) store_row(d, acc0[r], acc1[r], c + r * ldc, first);
    return;
  }
  for (std::size_t r = 0; r < mr; ++r) {
    hn::Store(acc0[r], d, edge + r * nr);
    hn::Store(acc1[r], d, edge + r * nr + lanes);
  }
  store_edge(edge, c, ldc, rows, cols, first);
}

// Whether gemm_rows_f32 reads B's K x nc blocks for `rows` rows of A where they lie, each panel's K steps a
// row of B apart, instead of packing them: an f32 B of whole panels, rows not a multiple of the L1's set
// stride apart (their lines would share one set), for few rows of A, whose panels repay little of the
// packing. AMD EPYC Zen 4, two threads, 128 x 784 by 784 x 256 (blocks of 72 and 56 rows): 250 -> 241 us;
// 256^3 (blocks of 128 rows) 0.93 -> 0.95x dnnl_sgemm; 512^3, whose blocks of 256 rows read it in place,
// 0.99 -> 0.95, and 2048^3 (rows 8 KiB apart) 0.95 -> 0.83.
inline bool reads_b_in_place_target(const matrix_view& b, std::size_t rows, std::size_t nc) {
  return !b.bf16 && b.col_stride == 1 && nc % blocking::nr == 0 && rows <= blocking::b_in_place_rows &&
         b.row_stride * sizeof(float) % this_machine().l1d_alias_bytes != 0;
}

// Whether the last rows of an MC block whose whole panels A gives in place (tail of them) are read in place
// too, by a kernel of exactly that many rows, rather than packed.
inline bool tail_in_place(const matrix_view& a, std::size_t tail) {
  return a.col_stride == 1 && (tail == blocking::mr / 3 * 2 || tail == blocking::mr / 3);
}

// The micro-tile of rows [i, i + MR) of an MC block: A in place below `whole`, else packed (a last panel of
// few rows by a kernel of fewer rows), or in place too where `tail_in_place` held for the rows past `whole`.
template <bool BInPlace>
inline void micro_tile(std::size_t i, std::size_t whole, bool tail_too, std::size_t mc, std::size_t kc, const float* a_block,
                       const matrix_view& a, const float* packed_a, const float* b, float* ci, std::size_t ldc, std::size_t cols,
                       bool first, float* edge, std::size_t b_k) {
  constexpr std::size_t mr = blocking::mr;
  const bool tail = tail_too && i >= whole;  // these rows are not packed
  if constexpr (!BInPlace) {
    if (cols <= blocking::lanes && !tail) {
      if (i < whole)
        micro_kernel_f32<true, mr, false, true>(kc, a_block + i * a.row_stride, b, ci, ldc, mr, cols, first, edge, a.col_stride, a.row_stride);
      else if (const std::size_t rows = std::min(mr, mc - i); rows > mr / 2)
        micro_kernel_f32<false, mr, false, true>(kc, packed_a + i * kc, b, ci, ldc, rows, cols, first, edge);
      else
        micro_kernel_f32<false, mr / 2, false, true>(kc, packed_a + i * kc, b, ci, ldc, rows, cols, first, edge);
      return;
    }
  }
  if (i < whole)
    micro_kernel_f32<true, mr, BInPlace>(kc, a_block + i * a.row_stride, b, ci, ldc, mr, cols, first, edge, a.col_stride, a.row_stride, b_k);
  else if (tail && mc - i == mr / 3 * 2)
    micro_kernel_f32<true, mr / 3 * 2, BInPlace>(kc, a_block + i * a.row_stride, b, ci, ldc, mr / 3 * 2, cols, first, edge, a.col_stride, a.row_stride, b_k);
  else if (tail)
    micro_kernel_f32<true, mr / 3, BInPlace>(kc, a_block + i * a.row_stride, b, ci, ldc, mr / 3, cols, first, edge, a.col_stride, a.row_stride, b_k);
  else if (const std::size_t rows = std::min(mr, mc - i); rows > mr / 3 * 2)
    micro_kernel_f32<false, mr, BInPlace>(kc, packed_a + i * kc, b, ci, ldc, rows, cols, first, edge, 0, 0, b_k);
  else if (rows > mr / 3)
    micro_kernel_f32<false, mr / 3 * 2, BInPlace>(kc, packed_a + i * kc, b, ci, ldc, rows, cols, first, edge, 0, 0, b_k);
  else
    micro_kernel_f32<false, mr / 3, BInPlace>(kc, packed_a + i * kc, b, ci, ldc, rows, cols, first, edge, 0, 0, b_k);
}

// The f32 register atom of the loop nest (kernels/gemm_nest.hpp). B comes packed whole (the caller's
// `packed`, pack_b_target's layout), is read in place (reads_b_in_place_target) or is packed here one
// K x NC block at a time; the scratch regions keep this target's sizes, so any blocks up to them fit.
//
// An f32 A read by few panels of B is read in place: each element feeds about as many FMAs as packing it
// costs (AMD EPYC Zen 4, one thread, 256 x 256 by 256 x 32 ran at 0.77x dnnl_sgemm with A packed). A last
// panel of fewer than MR rows is packed, unless it is 2/3 or 1/3 of MR rows (tail_in_place; 128^3 on one
// thread, 10 panels and 8 rows: 38.6 -> 37.9 us). Rows of A not where they lie a multiple of the L1's set
// stride apart, all in one set (512 x 1024 by 1024 x 256: in place 94 GFLOP/s, packed 101; K = 1040 in place
// 103). Columns of A (A^T given) only for one panel: for more, the panel's K steps, M floats apart, must
// stay in L1 from one panel to the next, and at 1-2 KiB apart they share a few sets (512 x 1024 by 1024 x
// 128 from A^T: in place 94, packed 100).
struct f32_atom {
  using word = float;
  static constexpr std::size_t mr = blocking::mr, nr = blocking::nr;
  float* packed_b;
  float* packed_a;
  float* edge;
  std::size_t l1_alias;

  explicit f32_atom(float* scratch)
      : packed_b(scratch), packed_a(scratch + blocking::kc * blocking::nc), edge(packed_a + blocking::mc * blocking::kc),
        l1_alias(this_machine().l1d_alias_bytes) {}

  detail::b_panels<float> place_b(const matrix_view& b, std::size_t rows, std::size_t p0, std::size_t kc, std::size_t j0,
                                  std::size_t nc, const float* packed, std::size_t panel_floats, std::size_t) const {
    if (packed != nullptr) return {packed + j0 / nr * panel_floats + p0 * nr, panel_floats, nr, false};
    if (reads_b_in_place_target(b, rows, nc)) return {b.f32() + p0 * b.row_stride + j0, nr, b.row_stride, true};
    pack_b_f32(b, p0, kc, j0, nc, packed_b, kc * nr);
    return {packed_b, kc * nr, nr, false};
  }
  detail::a_rows<float> place_a(const matrix_view& a, std::size_t i0, std::size_t mc, std::size_t p0, std::size_t kc,
                                std::size_t nc) const {
    const std::size_t panels = (nc + nr - 1) / nr;
    const bool rows_in_place = a.col_stride == 1 && a.row_stride * sizeof(float) % l1_alias != 0;
    const bool columns_in_place = a.row_stride == 1 && panels == 1;
    const bool in_place = !a.bf16 && panels <= blocking::a_in_place_panels && (rows_in_place || columns_in_place);
    const std::size_t whole = in_place ? mc / mr * mr : 0;
    const bool tail = in_place && tail_in_place(a, mc - whole);
    if (whole < mc && !tail) pack_a_f32(a, i0 + whole, mc - whole, p0, kc, packed_a + whole * kc);
    return {packed_a, in_place ? a.f32() + i0 * a.row_stride + p0 * a.col_stride : nullptr, whole, tail};
  }
  void tile(const matrix_view& a, const detail::a_rows<float>& ar, const detail::b_panels<float>& bp, std::size_t i,
            std::size_t mc, std::size_t kc, std::size_t j, std::size_t cols, float* c, std::size_t ldc, bool first) const {
    const auto* a_block = static_cast<const float*>(ar.in_place);
    const float* b = bp.first + j / nr * bp.stride;
    if (bp.in_place) micro_tile<true>(i, ar.whole, ar.tail, mc, kc, a_block, a, ar.packed, b, c, ldc, cols, first, edge, bp.k_step);
    else micro_tile<false>(i, ar.whole, ar.tail, mc, kc, a_block, a, ar.packed, b, c, ldc, cols, first, edge, bp.k_step);
  }
};

// Rows of pairs that K blocks of kb elements take before element p0 of K (a block start, or K itself for
// all of them): each block's pairs are its own, an odd block ending with a half-empty pair.
inline std::size_t pair_rows_before(std::size_t p0, std::size_t kb) { return p0 / kb * ((kb + 1) / 2) + (p0 % kb + 1) / 2; }

#if TESSEL_HWY_GEMM_DPBF16
// ---- bf16 x bf16 with vdpbf16ps: operands packed as 32-bit pairs (element k in the low half,
// k + 1 in the high half); one instruction adds both products of a pair into each f32 lane. An odd
// K ends with a pair whose high halves are zero in both operands.

// B's K block [k0, k0 + kc) as kp = ceil(kc / 2) rows of pairs, NR pairs per panel row; panel q at
// out + q * panel_words (kp * NR in a scratch packed per K block).
inline void pack_b_pairs(const matrix_view& b, std::size_t k0, std::size_t kc, std::size_t n0, std::size_t nc,
                         std::uint32_t* HWY_RESTRICT out, std::size_t panel_words) {
  constexpr std::size_t nr = blocking::nr, lanes = blocking::lanes;
  const std::size_t kp = (kc + 1) / 2;
  const hn::ScalableTag<std::uint32_t> du;
  const hn::Rebind<std::uint16_t, decltype(du)> du16;
  const std::uint16_t* bits = b.bf16_bits();
  // Whole panels pair-row by pair-row, reading along B's rows (see pack_b_f32).
  const std::size_t whole = b.col_stride == 1 ? nc / nr * nr : 0;
  for (std::size_t p = 0; p < kp && whole > 0; ++p) {
    const std::uint16_t* lo = bits + (k0 + 2 * p) * b.row_stride + n0;
    const bool has_hi = 2 * p + 1 < kc;
    for (std::size_t j = 0; j < whole; j += nr)
      for (std::size_t v = 0; v < nr; v += lanes) {
        auto pair = hn::PromoteTo(du, hn::LoadU(du16, lo + j + v));
        if (has_hi) pair = hn::Or(pair, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, lo + b.row_stride + j + v))));
        hn::Store(pair, du, out + j / nr * panel_words + p * nr + v);
      }
  }
  for (std::size_t j = whole; j < nc; j += nr) {
    const std::size_t w = std::min(nr, nc - j);
    std::uint32_t* HWY_RESTRICT panel = out + j / nr * panel_words;
    for (std::size_t col = 0; col < nr; ++col)
      for (std::size_t p = 0; p < kp; ++p) {
        std::uint32_t pair = 0;
        if (col < w) {
          pair = b.bf16_word(k0 + 2 * p, n0 + j + col);
          if (2 * p + 1 < kc) pair |= b.bf16_word(k0 + 2 * p + 1, n0 + j + col) << 16;
        }
        panel[p * nr + col] = pair;
      }
  }
}

inline void pack_a_pairs(const matrix_view& a, std::size_t m0, std::size_t mc, std::size_t k0, std::size_t kc,
                         std::uint32_t* HWY_RESTRICT out) {
  constexpr std::size_t mr = blocking::mr;
  const std::size_t kp = (kc + 1) / 2;
  for (std::size_t i = 0; i < mc; i += mr) {
    const std::size_t h = std::min(mr, mc - i);
    std::uint32_t* HWY_RESTRICT panel = out + i * kp;
    if (a.col_stride == 1) {  // a pair is two adjacent bf16 of a row: one 32-bit copy
      for (std::size_t r = 0; r < h; ++r) {
        const std::uint16_t* row = a.bf16_bits() + (m0 + i + r) * a.row_stride + k0;
        for (std::size_t p = 0; p < kc / 2; ++p) std::memcpy(panel + p * mr + r, row + 2 * p, 4);
        if (kc % 2) panel[(kp - 1) * mr + r] = row[kc - 1];
      }
    } else {
      for (std::size_t p = 0; p < kp; ++p)
        for (std::size_t r = 0; r < h; ++r) {
          std::uint32_t pair = a.bf16_word(m0 + i + r, k0 + 2 * p);
          if (2 * p + 1 < kc) pair |= a.bf16_word(m0 + i + r, k0 + 2 * p + 1) << 16;
          panel[p * mr + r] = pair;
        }
    }
    if (h < mr)
      for (std::size_t p = 0; p < kp; ++p)
        for (std::size_t r = h; r < mr; ++r) panel[p * mr + r] = 0;
  }
}

// The register block of micro_kernel_f32 with vdpbf16ps (Rows of the packed panel's MR, as there). A's
// pairs are packed (pack_a_pairs: pair (r, p) at a + 4 (p MR + r) bytes) or, InPlace, read where they lie
// in a row-major bf16 A (pair (r, p) at a + 4 p + 2 r a_row bytes, MR whole rows, an even K block). Its
// own target attribute adds AVX512_BF16 to this Highway target's; the caller checks CPUID first.
template <std::size_t Rows = blocking::mr, bool InPlace = false>
__attribute__((target(HWY_TARGET_STR ",avx512bf16"))) inline void micro_kernel_dpbf16(
    std::size_t kp, const void* a, const std::uint32_t* HWY_RESTRICT b, float* c, std::size_t ldc, std::size_t rows,
    std::size_t cols, bool first, float* edge, std::size_t a_row = 0) {
  constexpr std::size_t mr = Rows, nr = blocking::nr;
  static_assert(nr == 32, "one 512-bit vector holds 16 pairs");
  static_assert(!InPlace || Rows == blocking::mr);
  const std::size_t pair_step = InPlace ? 4 : blocking::mr * 4, row_step = InPlace ? 2 * a_row : 4;
  const auto* HWY_RESTRICT pairs = static_cast<const unsigned char*>(a);
  __m512 acc0[mr], acc1[mr];
  for (std::size_t r = 0; r < mr; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (std::size_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * nr);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + p * nr + 16);
    const unsigned char* HWY_RESTRICT ap = pairs + p * pair_step;
    if (p < rows) TESSEL_HWY_GEMM_PREFETCH_ROW(c + p * ldc, 16, nr);
    for (std::size_t r = 0; r < mr; ++r) {
      std::uint32_t pair;
      std::memcpy(&pair, ap + r * row_step, 4);  // in place: two bf16 of a row, 2-byte aligned
      __m512i av = _mm512_set1_epi32(static_cast<int>(pair));
#if HWY_COMPILER_CLANG
      // clang 16 crashes selecting vdpbf16ps with a folded broadcast operand: keep the broadcast apart.
      asm("" : "+v"(av));
#endif
      acc0[r] = _mm512_dpbf16_ps(acc0[r], (__m512bh)av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], (__m512bh)av, b1);
    }
  }
  if (rows == mr && cols == nr) {
    const hn::ScalableTag<float> d;
    using V = hn::Vec<decltype(d)>;
    for (std::size_t r = 0; r < mr; ++r) store_row(d, V{acc0[r]}, V{acc1[r]}, c + r * ldc, first);
    return;
  }
  for (std::size_t r = 0; r < mr; ++r) {
    _mm512_store_ps(edge + r * nr, acc0[r]);
    _mm512_store_ps(edge + r * nr + 16, acc1[r]);
  }
  store_edge(edge, c, ldc, rows, cols, first);
}

// The vdpbf16ps register atom of the loop nest: K blocks of blocks.kc elements, ceil(kc / 2) pairs (a pair
// takes the room of one float in the f32 atom's regions, so the scratch holds them). B packed whole
// (pack_b_target) or here one block at a time, as in f32_atom. A row-major A is read in place, as there (a
// pair is two adjacent bf16 of a row), where its K block is even (an odd one's last pair would read past
// the row) and its rows do not all fall in one L1 set. Packing it pair by pair cost a tenth of 256 x 256 x
// 256 on two threads.
struct dpbf16_atom {
  using word = std::uint32_t;
  static constexpr std::size_t mr = blocking::mr, nr = blocking::nr;
  std::uint32_t* packed_b;
  std::uint32_t* packed_a;
  float* edge;
  std::size_t l1_alias;

  explicit dpbf16_atom(float* scratch)
      : packed_b(reinterpret_cast<std::uint32_t*>(scratch)),
        packed_a(reinterpret_cast<std::uint32_t*>(scratch + blocking::kc * blocking::nc)),
        edge(scratch + blocking::kc * blocking::nc + blocking::mc * blocking::kc), l1_alias(this_machine().l1d_alias_bytes) {}

  detail::b_panels<std::uint32_t> place_b(const matrix_view& b, std::size_t, std::size_t p0, std::size_t kc, std::size_t j0,
                                          std::size_t nc, const std::uint32_t* packed, std::size_t panel_words,
                                          std::size_t k_block) const {
    if (packed != nullptr) return {packed + j0 / nr * panel_words + pair_rows_before(p0, k_block) * nr, panel_words, nr, false};
    const std::size_t kp = (kc + 1) / 2;
    pack_b_pairs(b, p0, kc, j0, nc, packed_b, kp * nr);
    return {packed_b, kp * nr, nr, false};
  }
  detail::a_rows<std::uint32_t> place_a(const matrix_view& a, std::size_t i0, std::size_t mc, std::size_t p0, std::size_t kc,
                                        std::size_t nc) const {
    const std::size_t kp = (kc + 1) / 2, panels = (nc + nr - 1) / nr;
    const bool in_place = a.col_stride == 1 && kc % 2 == 0 && panels <= blocking::a_in_place_panels && a.row_stride * 2 % l1_alias != 0;
    const std::size_t whole = in_place ? mc / mr * mr : 0;
    if (whole < mc) pack_a_pairs(a, i0 + whole, mc - whole, p0, kc, packed_a + whole * kp);
    return {packed_a, whole > 0 ? a.bf16_bits() + i0 * a.row_stride + p0 : nullptr, whole, false};
  }
  void tile(const matrix_view& a, const detail::a_rows<std::uint32_t>& ar, const detail::b_panels<std::uint32_t>& bp,
            std::size_t i, std::size_t mc, std::size_t kc, std::size_t j, std::size_t cols, float* c, std::size_t ldc,
            bool first) const {
    const std::size_t kp = (kc + 1) / 2, rows = std::min(mr, mc - i);
    const std::uint32_t* b = bp.first + j / nr * bp.stride;
    const std::uint32_t* panel = ar.packed + i * kp;
    if (i < ar.whole)
      micro_kernel_dpbf16<mr, true>(kp, static_cast<const std::uint16_t*>(ar.in_place) + i * a.row_stride, b, c, ldc, mr, cols,
                                    first, edge, a.row_stride);
    else if (rows > mr / 3 * 2)
      micro_kernel_dpbf16(kp, panel, b, c, ldc, rows, cols, first, edge);
    else if (rows > mr / 3)
      micro_kernel_dpbf16<mr / 3 * 2>(kp, panel, b, c, ldc, rows, cols, first, edge);
    else
      micro_kernel_dpbf16<mr / 3>(kp, panel, b, c, ldc, rows, cols, first, edge);
  }
};
#endif  // TESSEL_HWY_GEMM_DPBF16

inline gemm_blocking blocking_target() {
  return {.mr = blocking::mr, .nr = blocking::nr, .kc = blocking::kc, .mc = blocking::mc, .nc = blocking::nc};
}

#if TESSEL_HWY_GEMM_DPBF16
// Whether vdpbf16ps multiplies bf16 x bf16 faster than widening does, timed on this CPU: both paths on
// one block of MC rows, K = 512, N = 4 NR (both packings included, the operands in cache), best of
// seven alternating rounds, about a millisecond in all. vdpbf16ps must win by 15%, so that a CPU where
// the two are close keeps the f32 path (whose rounding does not depend on the CPU's bf16 unit).
inline bool dpbf16_outruns_widening() {
  constexpr std::size_t m = blocking::mc, n = 4 * blocking::nr, k = 512;
  const gemm_blocking own = blocking_target();
  gemm_blocking pairs = own;
  pairs.kc = 2 * blocking::kc;
  return detail::bf16_path_outruns(
      m, n, k, detail::scratch_floats,
      [&](const matrix_view& a, const matrix_view& b, float* c, float* scratch) {
        detail::gemm_nest(f32_atom(scratch), a, b, 0, m, n, k, c, n, own);
      },
      [&](const matrix_view& a, const matrix_view& b, float* c, float* scratch) {
        detail::gemm_nest(dpbf16_atom(scratch), a, b, 0, m, n, k, c, n, pairs);
      });
}
#endif

// Whether a bf16 x bf16 product takes the vdpbf16ps path on this target and CPU.
inline bool uses_dpbf16() {
#if TESSEL_HWY_GEMM_DPBF16
  if (!this_machine().avx512_bf16) return false;
  switch (hwy_gemm_bf16_products()) {
    case bf16_products::widened: return false;
    case bf16_products::dpbf16: return true;
    case bf16_products::measured:
    case bf16_products::amx: break;  // amx, where the tiles are not allowed (hwy_gemm_uses_amx): measured
  }
  static const bool faster = dpbf16_outruns_widening();  // once per target, in the first caller
  return faster;
#else
  return false;
#endif
}

// ---- B packed once for a whole product (hwy_gemm_pack_b in gemm.hpp) ----
// Panel q holds B's columns [q NR, q NR + NR) for all of K, K block after K block, each as the K loop
// reads it: kc rows of f32, or ceil(kc / 2) rows of pairs where the product takes the vdpbf16ps path.

inline packed_b_layout packed_layout_target(const matrix_view& a, const matrix_view& b, std::size_t n, std::size_t k,
                                            const gemm_blocking& blocks) {
  constexpr std::size_t nr = blocking::nr;
  packed_b_layout layout;
  layout.nr = nr;
  layout.panels = (n + nr - 1) / nr;
#if TESSEL_HWY_GEMM_DPBF16
  layout.pairs = a.bf16 && b.bf16 && uses_dpbf16();
#else
  (void)a, (void)b;
#endif
  const std::size_t kb = blocks.kc;
  const std::size_t rows = layout.pairs ? pair_rows_before(k, kb) : k;
  layout.panel_floats = rows * nr;
  return layout;
}

inline void pack_b_target(const matrix_view& b, std::size_t n, std::size_t k, const gemm_blocking& blocks,
                          const packed_b_layout& layout, std::size_t first, std::size_t last, float* out) {
  constexpr std::size_t nr = blocking::nr;
  const std::size_t kb = blocks.kc, n0 = first * nr;
  if (n0 >= n) return;
  const std::size_t nc = std::min(n, last * nr) - n0;
  for (std::size_t p0 = 0; p0 < k; p0 += kb) {
    const std::size_t kc = std::min(kb, k - p0);
#if TESSEL_HWY_GEMM_DPBF16
    if (layout.pairs) {
      pack_b_pairs(b, p0, kc, n0, nc,
                   reinterpret_cast<std::uint32_t*>(out) + first * layout.panel_floats + pair_rows_before(p0, kb) * nr,
                   layout.panel_floats);
      continue;
    }
#endif
    pack_b_f32(b, p0, kc, n0, nc, out + first * layout.panel_floats + p0 * nr, layout.panel_floats);
  }
}

inline void gemm_rows_packed_target(const matrix_view& a, const float* packed, const packed_b_layout& layout,
                                    std::size_t m0, std::size_t m1, std::size_t n, std::size_t k, float* c,
                                    std::size_t ldc, float* scratch, const gemm_blocking& blocks) {
  // NC only groups panels (each element's sum depends on KC alone): whole panels, so that every NC block
  // starts at a panel.
  gemm_blocking use = blocks;
  use.nc = std::max(layout.nr, blocks.nc / layout.nr * layout.nr);
#if TESSEL_HWY_GEMM_DPBF16
  if (layout.pairs)
    return detail::gemm_nest(dpbf16_atom(scratch), a, matrix_view{}, m0, m1, n, k, c, ldc, use,
                             reinterpret_cast<const std::uint32_t*>(packed), layout.panel_floats);
#endif
  detail::gemm_nest(f32_atom(scratch), a, matrix_view{}, m0, m1, n, k, c, ldc, use, packed, layout.panel_floats);
}

// blocks.kc == 0: this target's own blocking.
inline void gemm_rows_target(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1,
                             std::size_t n, std::size_t k, float* c, std::size_t ldc, float* scratch,
                             const gemm_blocking& blocks) {
  const gemm_blocking own = blocking_target();
  const gemm_blocking& use = blocks.kc == 0 ? own : blocks;
#if TESSEL_HWY_GEMM_DPBF16
  if (a.bf16 && b.bf16 && uses_dpbf16()) {
    // The pairs path's own K block is two of the f32 path's (a pair per float of scratch).
    gemm_blocking pairs = use;
    if (blocks.kc == 0) pairs.kc = 2 * blocking::kc;
    return detail::gemm_nest(dpbf16_atom(scratch), a, b, m0, m1, n, k, c, ldc, pairs);
  }
#endif
  detail::gemm_nest(f32_atom(scratch), a, b, m0, m1, n, k, c, ldc, use);
}
#endif  // HWY_HAVE_SCALABLE

}  // namespace tessel::kernels::hwy_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSEL_KERNELS_HWY_GEMM_INL_TOGGLE

// The other Highway kernels compiled in the same aggregator pass (implementation.hpp), each with its own toggle.
#include "tessel/kernels/hwy_math-inl.hpp"
