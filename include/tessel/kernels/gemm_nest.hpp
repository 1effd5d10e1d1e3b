#pragma once
// The one BLIS loop nest of the library's GEMM kernels: C[m0:m1, 0:n] = A[m0:m1, :] B in blocks of NC
// columns, then KC of K, then MC rows, each MR x NR micro-tile of a block multiplied by the kernel's
// register atom. The kernels differ in their atom only (gemm_xsimd-inl.hpp: xsimd's f32 FMA;
// hwy_gemm-inl.hpp: Highway's f32 FMA, and vdpbf16ps on bf16 pairs): how a block of B and a block of A
// are placed for the micro-tiles (packed into the atom's scratch, or read where they lie) and which
// register block multiplies a tile. An atom has
//
//   word                  the element of its packed panels (float; 32 bits holding a pair of bf16)
//   mr, nr                its register block
//   place_b(b, rows, p0, kc, j0, nc, packed, panel_words, k_block) -> b_panels<word>
//                         B's block [p0, p0 + kc) x [j0, j0 + nc), for `rows` rows of A: taken from
//                         `packed` (B packed whole, panels of panel_words, K blocks of k_block) where
//                         that is not null, else packed or read in place
//   place_a(a, i0, mc, p0, kc, nc) -> a_rows<word>
//                         A's block [i0, i0 + mc) x [p0, p0 + kc), which feeds nc columns of B
//   tile(a, a_rows, b_panels, i, mc, kc, j, cols, c, ldc, first)
//                         the micro-tile of rows [i, i + MR) and columns [j, j + cols) of the blocks
//                         into C (C = on the first K block, C += after)

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <new>
#include <vector>

#include "tessel/kernels/gemm.hpp"

namespace tessel::kernels::detail {

// A block of B as the micro-tiles read it: panel q (NR columns) at first + q * stride, its K steps
// k_step words apart (NR when packed, B's row stride when read in place).
template <class Word>
struct b_panels {
  const Word* first = nullptr;
  std::size_t stride = 0, k_step = 0;
  bool in_place = false;
};

// A block of A as the micro-tiles read it: its first `whole` rows where they lie (from in_place, in A's
// own element type), the rest packed (panel of row i at packed + i * kc words), or, `tail`, those in place
// too.
template <class Word>
struct a_rows {
  const Word* packed = nullptr;
  const void* in_place = nullptr;
  std::size_t whole = 0;
  bool tail = false;
};

// blocks: KC, MC and NC (at most the atom's own, whose scratch it packs into; the caller checks).
template <class Atom>
void gemm_nest(const Atom& atom, const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
               std::size_t k, float* c, std::size_t ldc, const gemm_blocking& blocks,
               const typename Atom::word* packed = nullptr, std::size_t panel_words = 0) {
  if (k == 0) {
    for (std::size_t r = m0; r < m1; ++r) std::fill_n(c + (r - m0) * ldc, n, 0.0f);
    return;
  }
  for (std::size_t j0 = 0; j0 < n; j0 += blocks.nc) {
    const std::size_t nc = std::min(blocks.nc, n - j0);
    for (std::size_t p0 = 0; p0 < k; p0 += blocks.kc) {
      const std::size_t kc = std::min(blocks.kc, k - p0);
      const b_panels<typename Atom::word> bp = atom.place_b(b, m1 - m0, p0, kc, j0, nc, packed, panel_words, blocks.kc);
      for (std::size_t i0 = m0; i0 < m1; i0 += blocks.mc) {
        const std::size_t mc = std::min(blocks.mc, m1 - i0);
        const a_rows<typename Atom::word> ar = atom.place_a(a, i0, mc, p0, kc, nc);
        for (std::size_t j = 0; j < nc; j += Atom::nr)
          for (std::size_t i = 0; i < mc; i += Atom::mr)
            atom.tile(a, ar, bp, i, mc, kc, j, std::min(Atom::nr, nc - j), c + (i0 - m0 + i) * ldc + j0 + j, ldc, p0 == 0);
      }
    }
  }
}

// Whether `challenger` multiplies bf16 by bf16 at least 15% faster than `incumbent` on this CPU: how a
// path of the bf16 products is chosen by measurement, so that a CPU where two paths are close keeps the
// incumbent. Both multiply one block, an m x k A by a k x n B (the operands in cache), twice per round,
// best of seven alternating rounds (a millisecond or two); each is called as f(a, b, c, scratch), with
// scratch_floats floats of scratch.
template <class Incumbent, class Challenger>
bool bf16_path_outruns(std::size_t m, std::size_t n, std::size_t k, std::size_t scratch_floats, Incumbent&& incumbent,
                       Challenger&& challenger) {
  std::vector<bfloat16> a(m * k), b(k * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = bfloat16(1.0f + static_cast<float>(i % 7) / 8.0f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = bfloat16(0.5f - static_cast<float>(i % 5) / 16.0f);
  std::vector<float> c(m * n);
  struct aligned_delete {
    void operator()(float* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  const std::unique_ptr<float, aligned_delete> held(static_cast<float*>(::operator new(scratch_floats * sizeof(float), std::align_val_t{64})));
  float* scratch = held.get();
  const matrix_view av{a.data(), k, 1, true}, bv{b.data(), n, 1, true};
  auto seconds = [&](auto& path) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < 2; ++rep) path(av, bv, c.data(), scratch);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double incumbent_best = 1e30, challenger_best = 1e30;
  for (int round = 0; round < 7; ++round) {
    incumbent_best = std::min(incumbent_best, seconds(incumbent));
    challenger_best = std::min(challenger_best, seconds(challenger));
  }
  return incumbent_best > 1.15 * challenger_best;
}

}  // namespace tessel::kernels::detail
