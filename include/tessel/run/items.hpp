#pragma once
// The executor's kernels of work items: convolutions, pooling, large transposes and slices.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "tessel/run/plan_executor.hpp"

namespace tessel::run {

// A kernel of work items (convolutions, pooling, large transposes and slices): the primitive runs each
// item the plan lists on the thread that takes it, with that thread's scratch. A contraction's items
// hand their result blocks to the fused epilogue, run on the block by the same thread. Items that sum
// partials are dealt out in ir::partial_shares fixed shares, one accumulator per share, added in share order
// at the end: the sum depends neither on which thread was free first nor on how many threads there are,
// so a step gives the same bits every time, on any machine.
inline void executor::run_items(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
  const ir::node& n = nd(kr.kind == plan::kernel_kind::contraction ? kr.dot : kr.root);
  const ir::node* operands[ir::max_operands];
  const void* in[ir::max_operands];
  for (std::size_t a = 0; a < n.arity; ++a) {
    operands[a] = &nd(n.operand(a));
    in[a] = storage(n.operand(a));
  }
  const std::size_t result = n.shape.size(), tiles_offset = item_scratch_bytes(g.items);
  struct epilogue {
    const executor* self;
    const plan::kernel* kr;
    std::size_t tiles_offset;
    std::uint64_t direct;
  } context{this, &kr, tiles_offset, kr.stores_members ? direct_members(kr) : 0};
  ir::block_sink sink;
  sink.context = &context;
  sink.consume = [](void* c, std::size_t first, std::size_t count, const float* values, std::size_t thread) {
    const epilogue& e = *static_cast<const epilogue*>(c);
    e.self->run_epilogue(*e.kr, first, count, values, e.self->thread_scratch(thread) + e.tiles_offset,
                         e.self->tile_pointers(thread), e.direct);
  };
  auto scratch = [&](std::size_t t) { return reinterpret_cast<float*>(thread_scratch(t)); };
  auto partial = [&](std::size_t share) { return shared_ + share * ir::aligned_floats(result); };
  auto args_for = [&](std::size_t t, std::size_t share) {
    return ir::item_args{.n = &n,
                         .operands = operands,
                         .in = in,
                         .out = storage(kr.root),
                         .sink = kr.kind == plan::kernel_kind::contraction ? &sink : nullptr,
                         .scratch = scratch(t),
                         .partial = g.items.sums_partials ? partial(share) : nullptr,
                         .thread = t};
  };
  if (!g.items.sums_partials) {
    pool.parallel_for(g.blocks, 1, [&](std::size_t begin, std::size_t end, std::size_t t) {
      const ir::item_args args = args_for(t, t);
      for (std::size_t item = begin; item < end; ++item) {
        n.prim->run_item(args, g.items, item);
        report(item, g.blocks);
      }
    });
    return;
  }
  // Share s is items [s * items / shares, (s + 1) * items / shares), summed into accumulator s by
  // whichever thread runs it.
  const std::size_t shares = std::min(ir::partial_shares, std::max<std::size_t>(g.blocks, 1));
  pool.parallel_for(shares, 1, [&](std::size_t begin, std::size_t end, std::size_t t) {
    for (std::size_t share = begin; share < end; ++share) {
      std::fill_n(partial(share), result, 0.0f);
      const ir::item_args args = args_for(t, share);
      for (std::size_t item = share * g.blocks / shares; item < (share + 1) * g.blocks / shares; ++item) {
        n.prim->run_item(args, g.items, item);
        report(item, g.blocks);
      }
    }
  });
  float* total = partial(0);
  for (std::size_t s = 1; s < shares; ++s) {
    const float* other = partial(s);
    for (std::size_t i = 0; i < result; ++i) total[i] += other[i];
  }
  store_tile(n.dtype, total, result, storage(kr.root));
}
}  // namespace tessel::run
