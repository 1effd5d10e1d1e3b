#pragma once
// The executor's contractions: a GEMM over the plan's blocks with its epilogue fused.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tessel/kernels/gemm.hpp"
#include "tessel/run/plan_executor.hpp"

namespace tessel::run {

// A GEMM and its epilogue over the plan's (batch, M / bm, N / bn) blocks: the kernel multiplies each
// C block with the plan's blocks as its MC, NC and KC, and the epilogue runs on the block while it is
// in cache, on the thread that made it. Where several blocks of rows read B, the threads first pack
// B whole into the shared region, a range of panels each, and every block then reads it from there.
inline void executor::run_contraction(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
  const ir::node& dot = nd(kr.dot);
  const ir::node& lhs = nd(dot.operand(0));
  const ir::node& rhs = nd(dot.operand(1));
  const ir::gemm_extent d = dot.prim->extent(dot, lhs, rhs);
  const std::size_t lhs_elem = ir::bytes_of(lhs.dtype), rhs_elem = ir::bytes_of(rhs.dtype);
  const auto* lbase = static_cast<const unsigned char*>(storage(dot.operand(0)));
  const auto* rbase = static_cast<const unsigned char*>(storage(dot.operand(1)));
  // Operand views of batch element b (B from column n0 on).
  auto lhs_of = [&](std::size_t b) { return kernels::matrix_view{lbase + b * d.lhs_batch_stride * lhs_elem, d.lhs.row, d.lhs.col, d.bf16}; };
  auto rhs_of = [&](std::size_t b, std::size_t n0) {
    return kernels::matrix_view{rbase + (b * d.rhs_batch_stride + n0 * d.rhs.col) * rhs_elem, d.rhs.row, d.rhs.col, d.bf16};
  };
  const kernels::gemm_engine& gemm = kernels::engine_of();
  kernels::gemm_blocking blocks = kernels::blocking_of();
  blocks.mc = g.bm;
  blocks.nc = g.bn;
  blocks.kc = g.bk;
  kernels::packed_b_layout packed{};
  if (packs_b_whole(g, d.k * d.n, threads_)) packed = gemm.packed_b(lhs_of(0), rhs_of(0, 0), d.n, d.k, blocks);
  if (packed.panels > 0) {
    // Panels grouped so that a thread packs a few whole ones at a time, batch element by element.
    const std::size_t grain = std::max<std::size_t>(1, packed.panels / (2 * threads_));
    pool.parallel_for(g.batch * packed.panels, grain, [&](std::size_t begin, std::size_t end, std::size_t) {
      while (begin < end) {
        const std::size_t b = begin / packed.panels, first = begin % packed.panels;
        const std::size_t last = std::min(packed.panels, first + (end - begin));
        gemm.pack_b(rhs_of(b, 0), d.n, d.k, blocks, packed, first, last, shared_ + b * packed.floats());
        begin += last - first;
      }
    });
  }
  // A product with no epilogue, stored as f32, is multiplied straight into its storage (a C block in
  // scratch and its copy out were a tenth of a one-thread char_lm step's time).
  float* const direct = kr.root == kr.dot && kr.member_count == 1 && dot.dtype == ir::dtype_code::f32
                            ? static_cast<float*>(storage(kr.root))
                            : nullptr;
  const std::uint64_t direct_stores = kr.stores_members ? direct_members(kr) : 0;
  pool.parallel_for(g.blocks, 1, [&](std::size_t begin, std::size_t end, std::size_t t) {
    unsigned char* mem = thread_scratch(t);
    float* gemm_mem = reinterpret_cast<float*>(mem);
    float* panel = gemm_mem + kernels::gemm_scratch_floats();
    unsigned char* tiles_mem = reinterpret_cast<unsigned char*>(panel + g.bm * g.bn);
    const void** tile_of = tile_pointers(t);
    for (std::size_t block = begin; block < end; ++block) {
      const std::size_t b = block / (g.m_blocks * g.n_blocks);
      const std::size_t i = block / g.n_blocks % g.m_blocks, j = block % g.n_blocks;
      const std::size_t m0 = i * g.bm, m1 = std::min(d.m, m0 + g.bm);
      const std::size_t n0 = j * g.bn, width = std::min(d.n, n0 + g.bn) - n0;
      const std::size_t base = (b * d.m + m0) * d.n + n0;
      float* const c = direct != nullptr ? direct + base : panel;
      const std::size_t ldc = direct != nullptr ? d.n : width;
      if (packed.panels > 0)
        gemm.multiply_packed(lhs_of(b), shared_ + b * packed.floats() + n0 / packed.nr * packed.panel_floats, packed, m0, m1,
                             width, d.k, c, ldc, gemm_mem, blocks);
      else
        gemm.multiply(lhs_of(b), rhs_of(b, n0), m0, m1, width, d.k, c, ldc, gemm_mem, blocks);
      if (direct != nullptr) {
        report(block, g.blocks);
        continue;
      }
      // A product with no epilogue stored in another dtype (bf16): its block converted row by row, without
      // the epilogue's tiles (a tenth of a 256^3 bf16 product on two threads went to them).
      if (kr.root == kr.dot && kr.member_count == 1) {
        auto* out = static_cast<unsigned char*>(storage(kr.root));
        for (std::size_t r = 0; r < m1 - m0; ++r)
          store_tile(dot.dtype, panel + r * width, width, out + (base + r * d.n) * ir::bytes_of(dot.dtype));
        report(block, g.blocks);
        continue;
      }
      // The epilogue on the block: one flat range when it holds whole rows, else row by row.
      const std::size_t runs = width == d.n ? 1 : m1 - m0, run = width == d.n ? (m1 - m0) * d.n : width;
      for (std::size_t r = 0; r < runs; ++r) run_epilogue(kr, base + r * d.n, run, panel + r * width, tiles_mem, tile_of, direct_stores);
      report(block, g.blocks);
    }
  });
}
}  // namespace tessel::run
