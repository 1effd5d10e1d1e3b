#pragma once
// The executor's elementwise kernels: loops (flat ranges of tiles), row kernels (whole rows, a softmax
// run whole), column kernels (reductions over leading axes), and the kernels run whole on one
// thread.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tessel/run/plan_executor.hpp"

namespace tessel::run {

inline void executor::run_loop(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
  const std::uint64_t direct = kr.stores_members ? direct_members(kr) : 0;
  pool.parallel_for(g.blocks, 1, [&](std::size_t begin, std::size_t end, std::size_t t) {
    unsigned char* tiles_mem = thread_scratch(t);
    const void** tile_of = tile_pointers(t);
    for (std::size_t block = begin; block < end; ++block) {
      const auto [first, count] = flat_range(g, block);
      for (std::size_t off = 0; off < count; off += tile_elements) {
        const std::size_t n = std::min(tile_elements, count - off);
        prefetch_streams(g, first + off + n, std::min(tile_elements, count - off - n));
        eval_members(kr, first + off, n, tiles_mem, tile_elements * 4, tile_of, nullptr, direct);
        store_root(kr, first + off, n, tile_of);
        if (kr.stores_members) store_members(kr, first + off, n, tile_of);
      }
      report(block, g.blocks);
    }
  });
}

// Asks for elements [first, first + n) of kernel g's streamed values (derived_plan::streamed) to be
// brought into L2 (prefetcht1; into L1 they evicted the tile being computed). On x86 the instruction is
// written out: g++ 12 -O2 dropped __builtin_prefetch (and _mm_prefetch) from this loop, leaving no
// prefetch in the executor at all.
inline void executor::prefetch_streams(const kernel_grid& g, std::size_t first, std::size_t n) const {
  for (std::size_t s = 0; s < g.streams; ++s) {
    const int id = streamed_[g.first_stream + s];
    const std::size_t width = ir::bytes_of(nd(id).dtype);
    const auto* at = static_cast<const unsigned char*>(storage(id)) + first * width;
    for (std::size_t b = 0; b < n * width; b += 64) {
#if defined(__x86_64__) || defined(__i386__)
      asm volatile("prefetcht1 %0" : : "m"(at[b]));
#else
      __builtin_prefetch(at + b, 0, 2);
#endif
    }
  }
}

// Rows are taken several at a time when they are short (softmax over 10 classes), so each member is
// evaluated once per ~tile_elements values rather than once per row: per-member dispatch, not
// arithmetic, is what short rows cost.
inline void executor::run_row(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
  pool.parallel_for(g.blocks, 1, [&](std::size_t begin, std::size_t end, std::size_t t) {
    for (std::size_t block = begin; block < end; ++block) {
      const std::size_t first_row = block * g.rows;
      run_rows(kr, g, first_row, std::min(kr.outer, first_row + g.rows), t);
      report(block, g.blocks);
    }
  });
}

// Rows [begin, end) of a row kernel, rows_per_pass(kr) at a time, on thread t.
inline void executor::run_rows(const plan::kernel& kr, const kernel_grid& g, std::size_t begin, std::size_t end, std::size_t t) const {
  const std::size_t inner = kr.inner;
  const std::size_t per_pass = rows_per_pass(kr);
  const std::size_t stride = (per_pass * inner + 16) * 4;
  unsigned char* tiles = thread_scratch(t);
  const void** tile_of = tile_pointers(t);
  const bool softmax = g.softmax.found() && prim::softmax_rows_applies();
  for (std::size_t o = begin; o < end; o += per_pass) {
    const std::size_t rows = std::min(per_pass, end - o);
    if (o + rows < end) prefetch_streams(g, (o + rows) * inner, std::min(per_pass, end - o - rows) * inner);
    for (int m = 0; m < kr.member_count; ++m) {
      if (softmax && m == g.softmax.first) {
        m = run_softmax(kr, g.softmax, o, rows, tiles, stride, tile_of);
        continue;
      }
      const int id = p_.members[static_cast<std::size_t>(kr.first_member + m)];
      const ir::node& node = nd(id);
      const bool full = whole_rows_[kr.first_member + m] != 0;  // else one value per row
      const std::size_t first = full ? o * inner : o;
      const std::size_t n = full ? rows * inner : rows;
      void* out = member_tile(kr, m, tiles, stride);
      // The root, last of the members, a whole row per row and stored as its tile holds it, is evaluated
      // straight into its storage (as in eval_members).
      if (id == kr.root && m + 1 == kr.member_count && full && node.dtype != ir::dtype_code::bf16 &&
          node.prim->kind != ir::prim_kind::broadcast && node.prim->kind != ir::prim_kind::reduce)
        out = static_cast<unsigned char*>(storage(id)) + o * inner * ir::bytes_of(node.dtype);
      tile_of[m] = out;
      unsigned char* spare = tiles;  // the spare tiles, before the members'
      switch (node.prim->kind) {
        case ir::prim_kind::generator: node.prim->generate(node, first, n, out); break;
        case ir::prim_kind::layout: pad_into(node, first, n, out); break;
        case ir::prim_kind::broadcast:
          if (form_of(kr, m) == member_form::one_value) one_value_into(node, out);
          else if (form_of(kr, m) == member_form::per_row) tile_of[m] = tile_of[operand_slot(kr, m, 0)];
          else tile_of[m] = broadcast_rows(kr, node, full, first, rows, n, out, tile_of);
          break;
        case ir::prim_kind::reduce: {
          const ir::dtype_code in_dtype = nd(node.operand(0)).dtype;
          const auto* in = static_cast<const unsigned char*>(
              operand_tile(kr, node.operand(0), in_dtype, o * inner, rows * inner, spare, tile_of));
          node.prim->init(node, out, rows);
          for (std::size_t r = 0; r < rows; ++r)
            node.prim->reduce_row(node, in + r * inner * ir::tile_bytes(in_dtype), inner,
                                  static_cast<unsigned char*>(out) + r * ir::tile_bytes(node.dtype));
          break;
        }
        default: {
          const void* in[ir::max_operands];
          unsigned splats = 0, per_row = 0;
          for (std::size_t a = 0; a < node.arity; ++a) {
            const int om = operand_slot(kr, m, a);
            in[a] = operand_of(kr, node, a, om, first, n, spare + a * stride, tile_of, splats);
            if (om >= 0 && form_of(kr, om) == member_form::per_row) per_row |= 1u << a;
          }
          if (per_row == 0) evaluate(node, in, splats, out, n);
          else evaluate_by_rows(node, in, splats, per_row, rows, inner, out);
        }
      }
    }
    const bool root_full = nd(kr.root).shape == kr.row_shape;
    store_root(kr, root_full ? o * inner : o, root_full ? rows * inner : rows, tile_of);
  }
}

// The members softmax_span `span` holds, on rows [o, o + rows): y straight into its storage when it is
// the root and the last member (as run_rows does), else into its tile. Returns y's member index.
inline int executor::run_softmax(const plan::kernel& kr, const prim::softmax_span& span, std::size_t o, std::size_t rows, unsigned char* tiles,
                                 std::size_t stride, const void** tile_of) const {
  const int* member = p_.members + kr.first_member;
  const int y = member[span.last];
  void* out = y == kr.root && span.last + 1 == kr.member_count
                  ? static_cast<unsigned char*>(storage(y)) + o * kr.inner * sizeof(float)
                  : member_tile(kr, span.last, tiles, stride);
  const auto* x = static_cast<const float*>(operand_tile(kr, span.x, ir::dtype_code::f32, o * kr.inner, rows * kr.inner, tiles, tile_of));
  prim::softmax_rows(nd(member[span.first]), nd(member[span.sum]), x, static_cast<float*>(out), rows, kr.inner);
  tile_of[span.last] = out;
  return span.last;
}

// Member `node` over `rows` whole rows where the operands with a bit in `per_row` hold one value per
// row: row by row, each such value passed as one value.
inline void executor::evaluate_by_rows(const ir::node& node, const void* const* in, unsigned splats, unsigned per_row, std::size_t rows,
                                       std::size_t inner, void* out) const {
  for (std::size_t r = 0; r < rows; ++r) {
    const void* row_in[ir::max_operands];
    for (std::size_t a = 0; a < node.arity; ++a) {
      const std::size_t width = ir::tile_bytes(nd(node.operand(a)).dtype);
      const std::size_t at = (per_row >> a & 1u) != 0 ? r : (splats >> a & 1u) != 0 ? 0 : r * inner;
      row_in[a] = static_cast<const unsigned char*>(in[a]) + at * width;
    }
    evaluate(node, row_in, splats | per_row, static_cast<unsigned char*>(out) + r * inner * ir::tile_bytes(node.dtype), inner);
  }
}

// A broadcast inside a row kernel over `rows` rows: a member holding one value per row is spread over
// each row; anything else is gathered (or splat) like in a loop.
inline const void* executor::broadcast_rows(const plan::kernel& kr, const ir::node& b, bool full, std::size_t first, std::size_t rows,
                                            std::size_t n, void* out, const void** tile_of) const {
  const int m = slot_of(kr, b.operand(0));
  if (m < 0) return broadcast_into(kr, b, first, n, out, tile_of);
  const std::size_t inner = full ? kr.inner : 1;  // one value per row to a row, or to one per row
  if (ir::tile_bytes(b.dtype) == 1) {
    const auto* src = static_cast<const unsigned char*>(tile_of[m]);
    for (std::size_t r = 0; r < rows; ++r) std::memset(static_cast<unsigned char*>(out) + r * inner, src[r], inner);
  } else {
    const auto* src = static_cast<const std::uint32_t*>(tile_of[m]);
    for (std::size_t r = 0; r < rows; ++r) std::fill_n(static_cast<std::uint32_t*>(out) + r * inner, inner, src[r]);
  }
  return out;
}

// A reduction over leading axes: each thread owns a range of outputs and walks every reduced row.
inline void executor::run_column(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
  pool.parallel_for(g.blocks, 1, [&](std::size_t begin, std::size_t end, std::size_t t) {
    for (std::size_t block = begin; block < end; ++block) {
      const auto [first, count] = flat_range(g, block);
      run_columns(kr, first, count, t);
      report(block, g.blocks);
    }
  });
}

// Outputs [block_first, block_first + block_count) of a column kernel, a tile at a time, on thread t:
// each walks every reduced row.
inline void executor::run_columns(const plan::kernel& kr, std::size_t block_first, std::size_t block_count, std::size_t t) const {
  const ir::node& root = nd(kr.root);
  const std::size_t outputs = kr.outer, rows = kr.inner;
  unsigned char* mem = thread_scratch(t);
  unsigned char* acc = mem;
  unsigned char* tiles_mem = mem + tile_elements * 4;
  const void** tile_of = tile_pointers(t);
  // Producers of the reduced operand: every member but the root.
  plan::kernel producers = kr;
  producers.member_count = kr.member_count - 1;
  unsigned char* spare = tiles_mem;  // eval_members' spare tiles, free once the producers have run
  const ir::dtype_code operand_dtype = nd(root.operand(0)).dtype;
  unsigned char* result = static_cast<unsigned char*>(storage(kr.root));
  if (block_count == outputs && outputs * 2 <= tile_elements) {
    // Few outputs (a sum to a scalar, as a global norm): a tile holds many whole rows, so the producers
    // run on a full tile and not on `outputs` elements at a time. Several outputs add the tile's rows in
    // order; a single output reduces each tile as one row (in SIMD partial sums, as a row kernel does).
    const std::size_t rows_per_tile = tile_elements / outputs, bytes = ir::tile_bytes(operand_dtype);
    root.prim->init(root, acc, outputs);
    for (std::size_t r0 = 0; r0 < rows; r0 += rows_per_tile) {
      const std::size_t n = std::min(rows_per_tile, rows - r0) * outputs;
      eval_members(producers, r0 * outputs, n, tiles_mem, tile_elements * 4, tile_of, nullptr);
      const auto* in = static_cast<const unsigned char*>(operand_tile(producers, root.operand(0), operand_dtype, r0 * outputs, n, spare, tile_of));
      if (outputs == 1 && root.prim->reduce_row != nullptr) root.prim->reduce_row(root, in, n, acc);
      else
        for (std::size_t j = 0; j < n; j += outputs) root.prim->combine(root, in + j * bytes, outputs, acc);
    }
    store_tile(root.dtype, acc, outputs, result);
    return;
  }
  for (std::size_t j0 = block_first; j0 < block_first + block_count; j0 += tile_elements) {
    const std::size_t n = std::min(tile_elements, block_first + block_count - j0);
    root.prim->init(root, acc, n);
    for (std::size_t r = 0; r < rows; ++r) {
      eval_members(producers, r * outputs + j0, n, tiles_mem, tile_elements * 4, tile_of, nullptr);
      const void* in = operand_tile(producers, root.operand(0), operand_dtype, r * outputs + j0, n, spare, tile_of);
      root.prim->combine(root, in, n, acc);
    }
    store_tile(root.dtype, acc, n, result + j0 * ir::bytes_of(root.dtype));
  }
}

inline void executor::run_whole(const plan::kernel& kr) const {
  const ir::node& n = nd(kr.root);
  const ir::node* operands[ir::max_operands];
  const void* in[ir::max_operands];
  for (std::size_t a = 0; a < n.arity; ++a) {
    operands[a] = &nd(n.operand(a));
    in[a] = storage(n.operand(a));
  }
  if (n.prim->run != nullptr) {
    n.prim->run(n, operands, in, storage(kr.root));
    return;
  }
  run_generic_reduce(n, *operands[0], in[0], storage(kr.root));
}

// Any reduction: every input element folds into its output element (slow, general).
inline void executor::run_generic_reduce(const ir::node& n, const ir::node& operand, const void* in, void* out) const {
  const std::size_t osize = n.shape.size();
  std::vector<std::uint32_t> acc(osize);
  n.prim->init(n, acc.data(), osize);
  std::array<bool, ir::max_rank> reduced{};
  for (std::size_t i = 0; i < n.attr.count; ++i) reduced[static_cast<std::size_t>(n.attr.ints[i])] = true;
  std::array<std::size_t, ir::max_rank> index{};
  const std::size_t total = operand.shape.size();
  for (std::size_t flat = 0; flat < total; ++flat) {
    std::size_t rest = flat;
    for (std::size_t a = operand.shape.rank; a-- > 0;) {
      index[a] = rest % operand.shape.d[a];
      rest /= operand.shape.d[a];
    }
    std::size_t o = 0;
    for (std::size_t a = 0; a < operand.shape.rank; ++a)
      if (!reduced[a]) o = o * operand.shape.d[a] + index[a];
    std::uint32_t value = 0;
    load_tile(operand.dtype, static_cast<const unsigned char*>(in) + flat * ir::bytes_of(operand.dtype), 1, &value);
    n.prim->combine(n, &value, 1, &acc[o]);
  }
  if (n.dtype == ir::dtype_code::pred) {
    for (std::size_t i = 0; i < osize; ++i) static_cast<bool*>(out)[i] = reinterpret_cast<const bool*>(&acc[i])[0];
  } else {
    store_tile(n.dtype, acc.data(), osize, out);
  }
}

inline void executor::run_copy(const plan::kernel& kr) const {
  const ir::node& n = nd(kr.root);
  const int slot = p_.output_index[static_cast<std::size_t>(kr.root)];
  void* out = slot >= 0 ? outputs_[slot] : storage(kr.root);
  if (n.prim->kind == ir::prim_kind::literal) {
    std::uint32_t tile = 0;
    splat(n, n.dtype, 1, &tile);
    store_tile(n.dtype, &tile, 1, out);
  } else {
    std::memcpy(out, parameters_[n.attr.ints[0]], p_.bytes(kr.root));
  }
}
}  // namespace tessel::run
