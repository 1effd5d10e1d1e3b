#pragma once
// The grid a kernel runs as on this machine: its blocks, each run whole by one thread, and the step its
// body takes through a block. Derived at run time from the plan (plan::blocks_of) for targets::this_host().

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tessel/kernels/gemm.hpp"
#include "tessel/plan/plan.hpp"
#include "tessel/plan/target_view.hpp"
#include "tessel/prim/family/softmax_rows.hpp"
#include "tessel/target/host.hpp"

namespace tessel::run {

// The step a kernel's body takes through its block (its "vector registers"): members are evaluated on
// tiles of this many values, which stay in L1 between one member and the next. Blocks, the unit of the
// grid, are the plan's (kernel_grid); this is not one of them.
inline constexpr std::size_t tile_elements = 1024;

// How one kernel runs: the grid of plan::blocks_of on this machine (targets::this_host()), as the
// executor walks it. Every grid point is one block, run whole by one thread, each exactly once.
struct kernel_grid {
  std::size_t blocks = 1;  // grid points that run (a matmul's K axis runs inside each)
  // loop and column kernels: the elementwise grid over the iteration space (a column kernel's outputs);
  // each block is a contiguous flat range.
  ir::dims space{}, block{}, grid{};
  std::size_t rows = 0;  // row kernels: rows per block
  // contraction: grid (batch, M / bm, N / bn), each block's K in bk steps
  std::size_t batch = 1, bm = 0, bn = 0, bk = 0, m_blocks = 1, n_blocks = 1;
  // kernels of work items (convolutions, pooling, transposes, slices): the primitive's items; blocks is
  // their count
  bool by_items = false;
  ir::item_plan items{};
  // loop and row kernels: derived_plan::streamed[first_stream, first_stream + streams)
  std::size_t first_stream = 0, streams = 0;
  // row kernels: the members a softmax routine runs whole (prim/family/softmax_rows.hpp), if any
  prim::softmax_span softmax{};
};

// Flat range [first, first + count) of block b of an elementwise grid.
inline std::pair<std::size_t, std::size_t> flat_range(const kernel_grid& g, std::size_t b) {
  std::size_t first = 0, count = 1, stride = 1;
  for (std::size_t axis = g.space.rank; axis-- > 0;) {
    const std::size_t index = b % g.grid.d[axis];
    b /= g.grid.d[axis];
    const std::size_t origin = index * g.block.d[axis];
    first += origin * stride;
    count *= std::min(g.block.d[axis], g.space.d[axis] - origin);
    stride *= g.space.d[axis];
  }
  return {first, count};
}

// The grid of kernel k of plan p on target t (the executor's: targets::this_host()).
inline kernel_grid grid_of(const plan::plan_view& p, int k, const target& t) {
  const plan::kernel& kr = p.kernels[static_cast<std::size_t>(k)];
  kernel_grid g;
  if (plan::item_node(p, k) >= 0) {
    g.by_items = true;
    g.items = plan::items_of(p, k, t);
    g.blocks = g.items.items;
    return g;
  }
  if (!plan::runs_on_grid(p, k)) return g;  // run whole
  if (p.node(kr.root).shape.size() == 0) {
    g.blocks = 0;
    return g;
  }
  const tiling::block_plan b = plan::blocks_of(p, k, t);
  // What the planner cannot fit in the VMEM still runs, in the smallest blocks it names (a row longer
  // than the VMEM, a row at a time); an elementwise grid is always planned on a host (partial edges).
  switch (kr.kind) {
    case plan::kernel_kind::row: {
      g.rows = b.ok() ? b.blocks[0].block.d[0] : std::max<std::size_t>(b.min_rows, 1);
      g.blocks = (kr.outer + g.rows - 1) / g.rows;
      return g;
    }
    case plan::kernel_kind::contraction: {
      // Over the VMEM (operands the kernel needs whole, too large for it), the planner's blocks are the
      // smallest it reached, and they run: the GEMM's panels are its own scratch.
      if (!b.ok() && b.error != tiling::tile_error::vmem_overflow)
        throw std::logic_error(std::string("tessel::run: kernel ") + std::to_string(k) +
                               " (contraction) has no blocks on this host: " + std::string(tiling::name_of(b.error)));
      const tiling::block_spec& lhs = b.blocks[0];
      const tiling::block_spec& rhs = b.blocks[1];
      const std::size_t lead = lhs.block.rank == 3 ? 1 : 0;
      g.batch = lead ? lhs.array.d[0] : 1;
      g.bm = lhs.block.d[lead];
      g.bk = lhs.block.d[lead + 1];
      g.bn = rhs.block.d[lead + 1];
      g.m_blocks = b.grid.d[lead];
      g.n_blocks = b.grid.d[lead + 1];
      g.blocks = g.batch * g.m_blocks * g.n_blocks;
      return g;
    }
    default: {
      if (!b.ok())
        throw std::logic_error(std::string("tessel::run: kernel ") + std::to_string(k) + " (" + std::string(plan::name_of(kr.kind)) +
                               ") has no elementwise grid on this host: " + std::string(tiling::name_of(b.error)));
      g.space = b.blocks[0].array;
      g.block = b.blocks[0].block;
      g.grid = b.grid;
      // Contiguous blocks: past the first axis a block does not take whole, it takes every axis whole.
      bool partial_seen = false;
      for (std::size_t axis = 0; axis < g.space.rank; ++axis) {
        if (partial_seen && g.block.d[axis] != g.space.d[axis])
          throw std::logic_error(std::string("tessel::run: kernel ") + std::to_string(k) + "'s blocks are not contiguous ranges");
        partial_seen = partial_seen || g.block.d[axis] != 1;
      }
      g.blocks = g.grid.size();
      return g;
    }
  }
}

// Rows a row kernel's body takes at a time: as many whole rows as fill one tile (at least one).
inline std::size_t rows_per_pass(const plan::kernel& kr) {
  return kr.inner >= tile_elements ? 1 : tile_elements / std::max<std::size_t>(kr.inner, 1);
}

// Whether a contraction packs its B (k x n elements) once for all blocks (kernels::gemm_engine::pack_b)
// before multiplying: when more than one block of rows reads each column of B, every block of columns
// starts at a panel of the packed form, and, on several threads, the packing saved is worth the pass
// that packs first (all threads wait for it, then read panels another core wrote): AMD EPYC, 2 threads,
// SGEMM 128 and 256 ran 0.50-0.66x oneDNN with it and 0.63-0.94x without; 512 alike; 1024 and 2048 gained.
inline bool packs_b_whole(const kernel_grid& g, std::size_t b_elements, std::size_t threads) {
  const std::size_t nr = kernels::blocking_of().nr;
  const bool saves_enough = threads == 1 || b_elements * (g.m_blocks - 1) >= (std::size_t{1} << 18);
  return !g.by_items && g.m_blocks > 1 && (g.n_blocks == 1 || g.bn % nr == 0) && saves_enough;
}

}  // namespace tessel::run
