#pragma once
// Single-precision GEMM over row ranges, compiled once in the tessel library (kernels/implementation.hpp
// defines these functions; this header only declares them, so including it costs no Highway code).
//
// Three kernels share one contract:
//   hwy_gemm_rows   BLIS-style blocking with its micro-kernel compiled by Highway for every x86 target
//                   (SSSE3 ... AVX-512 DL, and scalar), the best one for the running CPU chosen at run
//                   time, so a program built for plain x86-64 still multiplies with AVX-512. bf16 x bf16 uses
//                   vdpbf16ps where the CPU has AVX512_BF16 and it runs faster there than widening to f32
//                   (hwy_gemm_set_bf16_products)
//   gemm_rows       the same blocking written with xsimd, for the instruction set the library was built for
//   gemm_reference  each element a dot product accumulated in double, rounded once: the scalar path the
//                   others are tested against
//
// Contract: C[0 : m1 - m0, 0 : n] (row-major, leading dimension ldc >= n) = A[m0 : m1, 0 : k] * B[0 : k, 0 : n],
// where A and B are matrix_views (any row/column strides, so A^T and B^T need no copy; elements f32, or bf16
// when the view says so, mixed allowed). k == 0 gives C = 0. `scratch` holds gemm_scratch_floats() floats
// aligned to 64 bytes, one per concurrent call (gemm_reference ignores it). Error: with u = 2^-24,
// |C - AB| <= 2 k u sum_p |A[i,p] B[p,j]| for the f32 kernels (f32 FMA accumulation of exact products of the
// f32 or widened-bf16 inputs); the vdpbf16ps path has the same bound, except that it treats bf16 inputs below
// 2^-126 in magnitude as zero and flushes f32 results below 2^-126 to zero (DAZ/FTZ, as the instruction does),
// and so does the AMX path (tdpbf16ps), which adds each product into C as it goes.
//
//   std::vector<float> scratch(gemm_scratch_floats());   // 64-byte aligned in real use
//   float c[2 * 3];
//   hwy_gemm_rows(a, b, 0, 2, 3, k, c, 3, scratch.data());  // C = A[0:2, :] * B, B has 3 columns

#include <cstddef>
#include <cstdint>

#include "tessel/core/bfloat16.hpp"

namespace tessel::kernels {

// A strided matrix operand: element (r, c) is at data[r * row_stride + c * col_stride].
struct matrix_view {
  const void* data = nullptr;
  std::size_t row_stride = 0, col_stride = 0;
  bool bf16 = false;

  float at(std::size_t r, std::size_t c) const {
    const std::size_t i = r * row_stride + c * col_stride;
    return bf16 ? static_cast<float>(static_cast<const bfloat16*>(data)[i]) : static_cast<const float*>(data)[i];
  }
  const float* f32() const { return static_cast<const float*>(data); }
  const std::uint16_t* bf16_bits() const { return static_cast<const std::uint16_t*>(data); }
  // The 16 bits of element (r, c) of a bf16 view, as the low half of a 32-bit word.
  std::uint32_t bf16_word(std::size_t r, std::size_t c) const {
    return static_cast<const bfloat16*>(data)[r * row_stride + c * col_stride].bits();
  }
};

// Every kernel has this signature.
using gemm_rows_fn = void (*)(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1,
                              std::size_t n, std::size_t k, float* c, std::size_t ldc, float* scratch);

void gemm_rows(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
               std::size_t k, float* c, std::size_t ldc, float* scratch);
void hwy_gemm_rows(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                   std::size_t k, float* c, std::size_t ldc, float* scratch);
void gemm_reference(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                    std::size_t k, float* c, std::size_t ldc, float* scratch = nullptr);

// Floats of scratch one call of any kernel needs (its packed panels).
std::size_t gemm_scratch_floats();

// The Highway target hwy_gemm_rows runs on this CPU, e.g. "AVX3_DL".
const char* hwy_gemm_target();

// How hwy_gemm_rows multiplies bf16 x bf16 (both operands bf16; mixed operands are always widened).
enum class bf16_products {
  measured,  // the default: whichever of the other two ran faster in a timing of about a millisecond at the
             // first bf16 GEMM (vdpbf16ps must win by 15%)
  widened,   // widened to f32 while packing, multiplied with f32 FMA
  dpbf16,    // vdpbf16ps on pairs along K, where the CPU has AVX512_BF16 (elsewhere widened)
  amx,       // the AMX tile unit's tdpbf16ps (kernels/amx.hpp), where the CPU and the OS allow it (elsewhere
             // measured between the other two)
};

// Sets how bf16 x bf16 is multiplied, process-wide; returns the previous setting. The environment
// variable TESSEL_BF16_PRODUCTS (measured, widened, dpbf16 or amx) sets it before the first call. Under
// `measured` a CPU with AMX times the tile unit against the better vector path at the first bf16 GEMM
// (the tiles must win by 15%).
bf16_products hwy_gemm_set_bf16_products(bf16_products how);
// The setting now.
bf16_products hwy_gemm_bf16_products();

// Whether hwy_gemm_rows multiplies bf16 x bf16 with vdpbf16ps now (AVX-512 target, AVX512_BF16 CPU, and
// chosen or measured faster). The first call under `measured` runs the timing.
bool hwy_gemm_uses_dpbf16();

// Whether hwy_gemm_rows multiplies bf16 x bf16 on the AMX tile unit now (machine::amx_bf16, and chosen or
// measured faster). The first call under `measured` on such a CPU runs the timing.
bool hwy_gemm_uses_amx();

// The path bf16 x bf16 products take now: "amx", "vdpbf16ps" or "widened" (dump and the trace name it).
const char* hwy_gemm_bf16_path();

enum class gemm_kernel {
  scalar,  // gemm_reference
  xsimd,   // gemm_rows: the instruction set the library was compiled for
  hwy,     // hwy_gemm_rows: the best instruction set of the running CPU
};

// The kernel the executor uses unless told otherwise: Highway's, which needs no -march flag to reach
// AVX-512 and is at least as fast as xsimd's with one (bench/sgemm.cpp).
inline constexpr gemm_kernel default_gemm_kernel = gemm_kernel::hwy;

gemm_rows_fn select_gemm(gemm_kernel which = default_gemm_kernel);

// How a kernel blocks the product on this CPU: an MR x NR register tile, B in KC x NC panels, A in MC x KC
// panels. Callers that split M between threads give each whole MR tiles (rows of C in one MC block share
// a packed panel of A). Decided by the running CPU's Highway target, so it is a run-time value.
struct gemm_blocking {
  std::size_t mr = 1, nr = 1, kc = 1, mc = 1, nc = 1;
};
gemm_blocking blocking_of(gemm_kernel which = default_gemm_kernel);

// A kernel run with the caller's blocks: B in KC x NC panels, A in MC x KC panels (MR x NR stays the
// kernel's). The executor passes the blocks its plan chose (plan/target_view.hpp), so what runs is what
// the plan lists. KC, MC and NC must be positive and at most the kernel's own (blocking_of), whose
// scratch they use (std::invalid_argument otherwise); MC a multiple of MR keeps every micro-tile whole.
using gemm_blocked_fn = void (*)(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1,
                                 std::size_t n, std::size_t k, float* c, std::size_t ldc, float* scratch,
                                 const gemm_blocking& blocks);
gemm_blocked_fn select_blocked_gemm(gemm_kernel which = default_gemm_kernel);

// B packed once for a whole product and shared by every block of rows and every thread. The executor
// packs B so where more than one block of rows reads it: packing it again for each block of MC rows
// repeated the work M / MC times (12-25% of an SGEMM's time at N >= 512). Panel q holds B's columns
// [q NR, q NR + NR) for all of K, K block after K block, as the micro-kernel reads them.
struct packed_b_layout {
  std::size_t nr = 0;            // columns per panel: the kernel's NR
  std::size_t panels = 0;        // ceil(n / NR); 0 where the running CPU's kernel has no packed form
  std::size_t panel_floats = 0;  // 32-bit words per panel (f32, or bf16 pairs)
  bool pairs = false;            // bf16 pairs along K for vdpbf16ps (hwy_gemm_uses_dpbf16), else f32
  bool tiles = false;            // bf16 pairs in AMX tiles (hwy_gemm_uses_amx; kernels/amx.hpp's layout)
  std::size_t floats() const { return panels * panel_floats; }
};

// How hwy_gemm_rows_packed wants B (k x n) packed for C = A B with these blocks (KC, MC, NC checked as
// gemm_blocked_fn's). The product's path (f32 or vdpbf16ps pairs) is fixed here, for pack and multiply.
packed_b_layout hwy_gemm_packed_b_layout(const matrix_view& a, const matrix_view& b, std::size_t n, std::size_t k,
                                         const gemm_blocking& blocks);

// Whether the blocked Highway GEMM reads B where it lies, unpacked, for a call of `rows` rows of A and
// `width` columns of B (hwy_gemm-inl.hpp: an f32 B for few rows); packing it whole for such calls is
// work they do not use.
bool hwy_gemm_reads_b_in_place(const matrix_view& b, std::size_t rows, std::size_t width);

// Panels [first, last) of B's packed form into `out` (layout.floats() floats, 64-byte aligned). Threads
// may pack disjoint ranges of panels at once.
void hwy_gemm_pack_b(const matrix_view& b, std::size_t n, std::size_t k, const gemm_blocking& blocks,
                     const packed_b_layout& layout, std::size_t first, std::size_t last, float* out);

// The blocked Highway GEMM with B packed: C[0 : m1 - m0, 0 : n] = A[m0 : m1, :] * B[:, c0 : c0 + n], where
// `packed` points at panel c0 / NR of B's packed form (c0 a multiple of NR) and blocks.kc is the KC it was
// packed with. Bit-identical to select_blocked_gemm()'s result with the same blocks.
void hwy_gemm_rows_packed(const matrix_view& a, const float* packed, const packed_b_layout& layout, std::size_t m0,
                          std::size_t m1, std::size_t n, std::size_t k, float* c, std::size_t ldc, float* scratch,
                          const gemm_blocking& blocks);

// One GEMM kernel and all it offers, as the executor multiplies a contraction's blocks with it: the one
// selection (engine_of) that select_gemm and select_blocked_gemm also read. packed_b is B's packed form
// for a whole product under `blocks`, or panels == 0 where the kernel has none, or where it reads B where
// it lies for calls of blocks.mc rows and blocks.nc columns (packing would be work they do not use):
// pack_b and multiply_packed are for a layout with panels only.
struct gemm_engine {
  gemm_rows_fn rows;
  gemm_blocked_fn multiply;
  packed_b_layout (*packed_b)(const matrix_view& a, const matrix_view& b, std::size_t n, std::size_t k,
                              const gemm_blocking& blocks);
  void (*pack_b)(const matrix_view& b, std::size_t n, std::size_t k, const gemm_blocking& blocks,
                 const packed_b_layout& layout, std::size_t first, std::size_t last, float* out);
  void (*multiply_packed)(const matrix_view& a, const float* packed, const packed_b_layout& layout, std::size_t m0,
                          std::size_t m1, std::size_t n, std::size_t k, float* c, std::size_t ldc, float* scratch,
                          const gemm_blocking& blocks);
};
const gemm_engine& engine_of(gemm_kernel which = default_gemm_kernel);

}  // namespace tessel::kernels
