#pragma once
// Block (tile) planning: how a kernel runs as a grid over blocks on a target (Pallas's grid + BlockSpec).
//
// Every operand of a kernel is copied block by block into the core's VMEM (on a host: a per-core
// scratch in L2), double-buffered, while the grid runs. A block shape is legal on a target when
//   1. its last two dims are multiples of the dtype's register tile, target.tile(dtype) — (8, 128) for
//      32-bit and (16, 128) for bf16 on a TPU, (1, 16) / (1, 32) on an AVX-512 host — or equal the
//      array's dims (a rank-1 block: its dim is a multiple of the tile's columns or the whole array);
//   2. it divides the array, unless target.partial_edge_blocks (the host's kernels clip the last block;
//      TPU plans stay exact, so no padded block is ever computed on);
//   3. all blocks together, times target.buffers(), plus scratch (a matmul's f32 accumulator), fit
//      target.vmem_bytes.
//
// Everything here is usable in constant evaluation: no allocation, no exceptions; results carry an
// error code. The type-level wrappers at the end (`tessel::check_block_spec`, `tessel::check_kernel_fits`)
// turn an error into a compile error that names the kernel, shapes, bytes, the rule and the fix.
//
//   constexpr auto k = tessel::tiling::row_kernel(tessel::make_name("softmax"), 4096, 1024, tessel::ir::dtype_code::f32, 2, 0);
//   constexpr auto p = tessel::tiling::plan_blocks(tessel::targets::tpu_v5e, k);
//   // p.blocks[0].block == {512, 1024}, p.grid == {8}, p.vmem_bytes == 8 MiB

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <string_view>

#include "tessel/core/dtype.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/ir/graph.hpp"
#include "tessel/target/target.hpp"

namespace tessel::tiling {

inline constexpr std::size_t max_operands = 16;

// Which block of an operand a grid point reads or writes.
enum class index_map : std::uint8_t {
  elementwise,  // grid point (i0, i1, ...) -> block (i0, i1, ...) of an operand shaped like the iteration space
  row,          // grid point (i) -> rows block i, whole trailing dims (a row kernel keeps whole rows)
  whole,        // every grid point -> the whole array (a bias, a scale: copied once, kept resident)
  matmul_lhs,   // grid (b, i, j, k) -> lhs block (b, i, k) of (bm, bk)
  matmul_rhs,   //                   -> rhs block (b, k, j) of (bk, bn)
  matmul_out,   //                   -> out block (b, i, j) of (bm, bn); k is the last grid axis, so it accumulates
};

enum class pattern : std::uint8_t { elementwise, row, matmul };

enum class tile_error : std::uint8_t {
  none,
  bad_description,  // operands inconsistent with the pattern, or a block outside its array
  tiling_rule,      // a block's last two dims are not multiples of the register tile nor the array's
  not_divisible,    // a block does not divide its array on a target without partial edge blocks
  vmem_overflow,    // the blocks, double-buffered, plus scratch exceed the per-core VMEM
  row_too_long,     // a row kernel's smallest legal block (whole rows) does not fit VMEM
};

constexpr std::string_view name_of(index_map m) {
  constexpr std::string_view names[] = {"elementwise", "row", "whole", "matmul_lhs", "matmul_rhs", "matmul_out"};
  return names[static_cast<int>(m)];
}
constexpr std::string_view name_of(pattern p) {
  constexpr std::string_view names[] = {"elementwise", "row", "matmul"};
  return names[static_cast<int>(p)];
}
constexpr std::string_view name_of(tile_error e) {
  constexpr std::string_view names[] = {"none", "bad_description", "tiling_rule", "not_divisible", "vmem_overflow", "row_too_long"};
  return names[static_cast<int>(e)];
}

// A dims value from a list: make_dims({4096, 1024}).
constexpr ir::dims make_dims(std::initializer_list<std::size_t> list) {
  ir::dims out;
  for (std::size_t v : list) out.d[out.rank++] = v;
  return out;
}

struct operand {
  ir::dims shape{};
  ir::dtype_code dtype = ir::dtype_code::f32;
  index_map map = index_map::elementwise;
};

// What the planner knows about a kernel: its pattern and its operands (inputs and outputs alike; the
// order is kept in the plan). A row kernel's row operands are given as (rows, row...) or (rows): a
// row-major (outer..., row...) array flattened to that view, a free reshape. A literal, structural type:
// it can be a template argument of check_kernel_fits.
struct kernel_description {
  name_string name{};
  pattern kind = pattern::elementwise;
  std::array<operand, max_operands> operands{};
  std::uint8_t operand_count = 0;

  // Appends an operand (ignored past max_operands; plan_blocks then reports bad_description).
  constexpr kernel_description& add(const ir::dims& shape, ir::dtype_code dtype, index_map map) {
    if (operand_count < max_operands) operands[operand_count] = operand{shape, dtype, map};
    if (operand_count <= max_operands) ++operand_count;
    return *this;
  }
};

// count operands of one shape and dtype (inputs and outputs together): a fused elementwise loop.
constexpr kernel_description elementwise_kernel(name_string name, const ir::dims& shape, ir::dtype_code dtype, std::size_t count) {
  kernel_description k{.name = name, .kind = pattern::elementwise};
  for (std::size_t i = 0; i < count; ++i) k.add(shape, dtype, index_map::elementwise);
  return k;
}

// A row kernel over `rows` rows of `row_length` elements: `full` operands of (rows, row_length) (inputs
// and row-shaped outputs, as softmax's) and `reduced` outputs of (rows) (a row sum).
constexpr kernel_description row_kernel(name_string name, std::size_t rows, std::size_t row_length, ir::dtype_code dtype, std::size_t full,
                                        std::size_t reduced) {
  kernel_description k{.name = name, .kind = pattern::row};
  for (std::size_t i = 0; i < full; ++i) k.add(make_dims({rows, row_length}), dtype, index_map::row);
  for (std::size_t i = 0; i < reduced; ++i) k.add(make_dims({rows}), dtype, index_map::row);
  return k;
}

// out[M, N] = lhs[M, K] · rhs[K, N], accumulated in f32; epilogue operands are added with add().
constexpr kernel_description matmul_kernel(name_string name, std::size_t m, std::size_t n, std::size_t k, ir::dtype_code lhs,
                                           ir::dtype_code rhs, ir::dtype_code out) {
  kernel_description d{.name = name, .kind = pattern::matmul};
  d.add(make_dims({m, k}), lhs, index_map::matmul_lhs);
  d.add(make_dims({k, n}), rhs, index_map::matmul_rhs);
  d.add(make_dims({m, n}), out, index_map::matmul_out);
  return d;
}

// One operand's block: its shape (same rank as the array) and how grid points map to it.
struct block_spec {
  ir::dims block{};
  ir::dims array{};
  ir::dtype_code dtype = ir::dtype_code::f32;
  index_map map = index_map::elementwise;

  constexpr std::size_t bytes() const { return block.size() * ir::bytes_of(dtype); }
};

// The result of planning or checking: blocks, grid and VMEM use, or an error and what caused it.
struct block_plan {
  tile_error error = tile_error::none;
  pattern kind = pattern::elementwise;
  std::array<block_spec, max_operands> blocks{};  // in the description's operand order
  std::uint8_t count = 0;
  ir::dims grid{};                             // rank 0: a single step
  std::array<bool, ir::max_rank> parallel{};   // grid axes that may be split over cores (false: accumulates)
  std::size_t vmem_bytes = 0;     // blocks x buffers + scratch; on vmem_overflow / row_too_long the bytes needed
  std::size_t scratch_bytes = 0;  // a matmul's f32 accumulator, single-buffered
  std::size_t vmem_limit = 0;     // the target's per-core VMEM
  std::size_t buffers = 2;
  // What failed: the operand and axis (tiling_rule, not_divisible, bad_description), the row (row_too_long).
  int failed_operand = -1;
  std::size_t failed_axis = 0;
  std::size_t row_length = 0;
  std::size_t min_rows = 0;

  constexpr bool ok() const { return error == tile_error::none; }
  constexpr std::size_t steps() const { return grid.size(); }
};

namespace detail {

constexpr std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
constexpr std::size_t round_down(std::size_t a, std::size_t q) { return a / q * q; }
constexpr std::size_t min_of(std::size_t a, std::size_t b) { return a < b ? a : b; }
constexpr std::size_t max_of(std::size_t a, std::size_t b) { return a > b ? a : b; }

// Whether d is a legal block size for a dim of n whose tile multiple is q.
constexpr bool legal(std::size_t n, std::size_t d, std::size_t q, bool partial) {
  return d >= 1 && d <= n && (d == n || d % q == 0) && (partial || n % d == 0);
}

// The smallest legal block of a dim: q where it is legal, else the whole dim.
constexpr std::size_t smallest_block(std::size_t n, std::size_t q, bool partial) { return q < n && legal(n, q, q, partial) ? q : n; }

// The largest legal block <= cap, 0 if none. Divisors are found in O(sqrt n). Where partial edge blocks
// are allowed, a multiple of q that does not divide n is taken only if the best divisor is under half of it.
constexpr std::size_t largest_block(std::size_t n, std::size_t q, std::size_t cap, bool partial) {
  if (n <= cap) return n;
  std::size_t best = 0;
  for (std::size_t i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    for (std::size_t d : {i, n / i})
      if (d <= cap && d > best && legal(n, d, q, false)) best = d;
  }
  if (partial) {
    const std::size_t padded = round_down(cap, q);
    if (padded > 0 && best * 2 < padded) return padded;
  }
  return best;
}

// The largest legal block <= soft, or failing that the smallest legal block.
constexpr std::size_t pick(std::size_t n, std::size_t q, std::size_t soft, bool partial) {
  const std::size_t d = largest_block(n, q, soft, partial);
  return d != 0 ? d : smallest_block(n, q, partial);
}

// The tile multiples for the last two dims of an array of this rank: {second-to-last, last}.
constexpr vreg_tile axis_multiples(const target& t, ir::dtype_code dtype, std::size_t rank) {
  const vreg_tile tile = t.tile(dtype);
  return rank >= 2 ? tile : vreg_tile{1, tile.cols};
}
constexpr std::size_t multiple_for_axis(const target& t, ir::dtype_code dtype, std::size_t rank, std::size_t axis) {
  const vreg_tile m = axis_multiples(t, dtype, rank);
  if (axis + 1 == rank) return m.cols;
  if (axis + 2 == rank) return m.rows;
  return 1;
}

// Checks one block against rules 1 and 2; records the failure in p.
constexpr bool check_one(const target& t, const block_spec& s, int index, block_plan& p) {
  auto fail = [&](tile_error e, std::size_t axis) {
    p.error = e;
    p.failed_operand = index;
    p.failed_axis = axis;
    return false;
  };
  if (s.block.rank != s.array.rank) return fail(tile_error::bad_description, 0);
  for (std::size_t a = 0; a < s.array.rank; ++a)
    if (s.block[a] == 0 || s.block[a] > s.array[a]) return fail(tile_error::bad_description, a);
  for (std::size_t a = 0; a < s.array.rank; ++a) {
    const std::size_t q = multiple_for_axis(t, s.dtype, s.array.rank, a);
    if (s.block[a] != s.array[a] && s.block[a] % q != 0) return fail(tile_error::tiling_rule, a);
  }
  if (!t.partial_edge_blocks)
    for (std::size_t a = 0; a < s.array.rank; ++a)
      if (s.array[a] % s.block[a] != 0) return fail(tile_error::not_divisible, a);
  return true;
}

constexpr std::size_t block_bytes_total(const block_plan& p) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < p.count; ++i) total += p.blocks[i].bytes();
  return total;
}

// A host has no DMA engine to copy blocks into a scratchpad: its GEMM packs A's block (as f32) into a
// scratch that stays in cache and multiplies it by B one panel of NR packed columns at a time (B packed
// once for the whole product where several blocks of rows read it, else block by block, streaming
// through the cache), keeping C's micro-tile in registers and the C block in cache for the epilogue.
// So on a host a matmul's VMEM is bk x (bm + nr) packed floats plus the bm x bn C block, once, plus its
// whole operands.
constexpr std::size_t packed_panel_bytes(std::size_t bm, std::size_t bn, std::size_t bk, std::size_t nr) {
  return (bk * (bm + nr) + bm * bn) * 4;
}

constexpr bool packs_matmul(const target& t, const block_plan& p, std::size_t& bytes) {
  if (t.kind != target_kind::host) return false;
  const block_spec* lhs = nullptr;
  const block_spec* rhs = nullptr;
  std::size_t whole = 0;
  for (std::size_t i = 0; i < p.count; ++i) {
    if (p.blocks[i].map == index_map::matmul_lhs) lhs = &p.blocks[i];
    if (p.blocks[i].map == index_map::matmul_rhs) rhs = &p.blocks[i];
    if (p.blocks[i].map == index_map::whole) whole += p.blocks[i].bytes();
  }
  if (lhs == nullptr || rhs == nullptr || lhs->block.rank < 2 || rhs->block.rank < 2) return false;
  const std::size_t r = lhs->block.rank;
  bytes = whole + packed_panel_bytes(lhs->block[r - 2], rhs->block[r - 1], lhs->block[r - 1], t.mxu_cols);
  return true;
}

// Rule 3 and the final tally.
constexpr block_plan& finish(const target& t, block_plan& p) {
  if (std::size_t packed = 0; packs_matmul(t, p, packed)) {
    p.buffers = 1;
    p.scratch_bytes = 0;
    p.vmem_bytes = packed;
  } else {
    p.vmem_bytes = block_bytes_total(p) * p.buffers + p.scratch_bytes;
  }
  if (p.ok() && p.vmem_bytes > t.vmem_bytes) p.error = tile_error::vmem_overflow;
  return p;
}

constexpr block_plan start(const target& t, const kernel_description& k) {
  block_plan p;
  p.kind = k.kind;
  p.vmem_limit = t.vmem_bytes;
  p.buffers = t.buffers();
  p.count = static_cast<std::uint8_t>(min_of(k.operand_count, max_operands));
  for (std::size_t i = 0; i < p.count; ++i) {
    p.blocks[i].array = k.operands[i].shape;
    p.blocks[i].block = k.operands[i].shape;  // whole until planned
    p.blocks[i].dtype = k.operands[i].dtype;
    p.blocks[i].map = k.operands[i].map;
  }
  if (k.operand_count > max_operands || k.operand_count == 0) p.error = tile_error::bad_description;
  return p;
}

constexpr block_plan bad(block_plan p, int operand) {
  p.error = tile_error::bad_description;
  p.failed_operand = operand;
  return p;
}

constexpr std::size_t whole_bytes(const block_plan& p) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < p.count; ++i)
    if (p.blocks[i].map == index_map::whole) total += p.blocks[i].bytes() * p.buffers;
  return total;
}

constexpr block_plan plan_elementwise(const target& t, const kernel_description& k) {
  block_plan p = start(t, k);
  if (!p.ok()) return p;
  int first = -1;
  for (std::size_t i = 0; i < p.count; ++i) {
    const block_spec& s = p.blocks[i];
    if (s.map == index_map::elementwise && first < 0) first = static_cast<int>(i);
    if (s.map != index_map::elementwise && s.map != index_map::whole) return bad(p, static_cast<int>(i));
  }
  if (first < 0) return bad(p, 0);
  const ir::dims space = p.blocks[static_cast<std::size_t>(first)].array;
  std::size_t per_element = 0, widest = 1, q_rows = 1, q_cols = 1;
  for (std::size_t i = 0; i < p.count; ++i) {
    const block_spec& s = p.blocks[i];
    if (s.map != index_map::elementwise) continue;
    if (!(s.array == space)) return bad(p, static_cast<int>(i));
    per_element += ir::bytes_of(s.dtype) * p.buffers;
    widest = max_of(widest, ir::bytes_of(s.dtype));
    const vreg_tile m = axis_multiples(t, s.dtype, space.rank);
    q_rows = std::lcm(q_rows, m.rows);
    q_cols = std::lcm(q_cols, m.cols);
  }
  const std::size_t fixed = whole_bytes(p);
  const std::size_t hard = t.vmem_bytes > fixed ? (t.vmem_bytes - fixed) / per_element : 0;
  const std::size_t soft = max_of(1, min_of(hard, t.block_bytes / widest));
  const bool partial = t.partial_edge_blocks;
  const std::size_t r = space.rank;
  ir::dims block = space;
  if (r == 1) {
    block.d[0] = pick(space[0], q_cols, soft, partial);
  } else if (r >= 2) {
    const std::size_t row = space[r - 1], plane = space[r - 2] * row;
    if (plane <= soft) {
      // Whole trailing planes; then as many leading indices as fit, innermost first, contiguous in memory.
      std::size_t remaining = soft / plane;
      for (std::size_t i = r - 2; i-- > 0;) {
        const std::size_t d = pick(space[i], 1, remaining, partial);
        block.d[i] = d;
        remaining = max_of(1, remaining / d);
        if (d < space[i]) {
          for (std::size_t j = 0; j < i; ++j) block.d[j] = 1;
          break;
        }
      }
    } else {
      for (std::size_t i = 0; i + 2 < r; ++i) block.d[i] = 1;
      const std::size_t min_rows = smallest_block(space[r - 2], q_rows, partial);
      if (min_rows * row <= soft) {
        block.d[r - 2] = pick(space[r - 2], q_rows, soft / row, partial);
      } else {
        block.d[r - 2] = min_rows;
        block.d[r - 1] = pick(row, q_cols, max_of(1, soft / min_rows), partial);
      }
    }
  }
  p.grid.rank = static_cast<std::uint8_t>(r);
  for (std::size_t i = 0; i < r; ++i) {
    p.grid.d[i] = ceil_div(space[i], block[i]);
    p.parallel[i] = true;
  }
  for (std::size_t i = 0; i < p.count; ++i)
    if (p.blocks[i].map == index_map::elementwise) p.blocks[i].block = block;
  return finish(t, p);
}

constexpr block_plan plan_row(const target& t, const kernel_description& k) {
  block_plan p = start(t, k);
  if (!p.ok()) return p;
  std::size_t rows = 0, per_row = 0, widest_row = 0, q = 1;
  for (std::size_t i = 0; i < p.count; ++i) {
    const block_spec& s = p.blocks[i];
    if (s.map == index_map::whole) continue;
    if (s.map != index_map::row || s.array.rank == 0 || s.array[0] == 0) return bad(p, static_cast<int>(i));
    if (rows == 0) rows = s.array[0];
    if (s.array[0] != rows) return bad(p, static_cast<int>(i));
    const std::size_t length = s.array.size() / rows;
    per_row += length * ir::bytes_of(s.dtype) * p.buffers;
    widest_row = max_of(widest_row, length * ir::bytes_of(s.dtype));
    p.row_length = max_of(p.row_length, length);
    q = std::lcm(q, multiple_for_axis(t, s.dtype, s.array.rank, 0));
  }
  if (rows == 0) return bad(p, 0);
  const bool partial = t.partial_edge_blocks;
  const std::size_t fixed = whole_bytes(p);
  const std::size_t min_rows = smallest_block(rows, q, partial);
  if (fixed + min_rows * per_row > t.vmem_bytes) {
    p.error = fixed > t.vmem_bytes ? tile_error::vmem_overflow : tile_error::row_too_long;
    p.min_rows = min_rows;
    p.vmem_bytes = fixed + min_rows * per_row;
    for (std::size_t i = 0; i < p.count; ++i)
      if (p.blocks[i].map == index_map::row) p.blocks[i].block.d[0] = min_rows;
    return p;
  }
  const std::size_t hard = (t.vmem_bytes - fixed) / per_row;
  const std::size_t soft = max_of(1, min_of(hard, t.block_bytes / widest_row));
  const std::size_t chosen = pick(rows, q, soft, partial);
  for (std::size_t i = 0; i < p.count; ++i)
    if (p.blocks[i].map == index_map::row) p.blocks[i].block.d[0] = chosen;
  p.grid = make_dims({ceil_div(rows, chosen)});
  p.parallel[0] = true;
  return finish(t, p);
}

// The legal block sizes of one matmul dim, largest first: multiples of `align` (the MXU or micro-kernel
// tile) that are legal and <= cap, or, when there are none, any legal size <= cap, or else the smallest legal.
struct dim_walk {
  std::size_t n, q, align, cap;
  bool partial;
  int mode = 0;  // 0: aligned, 1: legal, 2: only the smallest legal block

  constexpr bool accepts(std::size_t d) const {
    if (!legal(n, d, q, partial)) return false;
    return mode == 0 ? (d == n || d % align == 0) : mode == 1 ? true : d == smallest_block(n, q, partial);
  }
  constexpr std::size_t below(std::size_t limit) const {
    for (std::size_t d = min_of(min_of(n, cap), limit - 1); d >= 1; --d)
      if (accepts(d)) return d;
    return 0;
  }
  constexpr std::size_t first() {
    for (mode = 0; mode < 2; ++mode)
      if (std::size_t d = below(cap + 1); d != 0) return d;
    return smallest_block(n, q, partial);
  }
};

// The share of `cores` cores' time a grid of batch x ceil(m / bm) x ceil(n / bn) blocks keeps busy when
// each block, in order, goes to whichever core is free first (as the host pool hands them out), a
// block's work its rows x columns. 1: they all finish together.
constexpr double grid_balance(std::size_t batch, std::size_t m, std::size_t bm, std::size_t n, std::size_t bn,
                              std::size_t cores) {
  std::array<std::size_t, 64> busy{};
  const std::size_t c = min_of(min_of(cores, busy.size()), batch * ceil_div(m, bm) * ceil_div(n, bn));
  std::size_t total = 0;
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < m; i += bm)
      for (std::size_t j = 0; j < n; j += bn) {
        const std::size_t work = min_of(bm, m - i) * min_of(bn, n - j);
        std::size_t first_free = 0;
        for (std::size_t q = 1; q < c; ++q)
          if (busy[q] < busy[first_free]) first_free = q;
        busy[first_free] += work;
        total += work;
      }
  std::size_t longest = 0;
  for (std::size_t q = 0; q < c; ++q) longest = busy[q] > longest ? busy[q] : longest;
  return longest == 0 ? 1.0 : static_cast<double>(total) / static_cast<double>(min_of(cores, busy.size()) * longest);
}

// With edge blocks allowed (a host), the same number of blocks along M and N, made as even as the
// alignment lets: 128 rows in two blocks of 72 and 56 rather than 96 and 32, so the cores that share
// the grid finish together.
// epilogue_reads: the kernel has blocks besides A, B and C.
constexpr void balance_blocks(const target& t, std::size_t batch, std::size_t m, std::size_t n, std::size_t kk, bool epilogue_reads,
                              std::size_t align_m, std::size_t align_n, std::size_t& bm, std::size_t& bn) {
  auto even = [](std::size_t extent, std::size_t block, std::size_t align) {
    const std::size_t share = ceil_div(extent, ceil_div(extent, block));
    const std::size_t aligned = ceil_div(share, align) * align;
    return aligned < block ? aligned : block;
  };
  bm = even(m, bm, align_m);
  bn = even(n, bn, align_n);
  // A grid of few blocks keeps cores idle at its end (three equal blocks on two cores: one core waits a
  // third of the time): while it keeps them busy less than 90% of the time, M and N are cut into more
  // blocks (each still aligned, none larger than before) where that balances better. But N stays as it
  // is for a short K (<= 128) under an epilogue that reads operands: a block narrower than C runs its
  // epilogue row by row, and a row of such a product costs less to compute than one call of the epilogue
  // (AMD EPYC, two threads: 128 x 10 by 10 x 256 plus a bias took 32-35 us in 2 x 2 blocks, 7-8 us
  // without the bias).
  const std::size_t m_blocks = ceil_div(m, bm), n_blocks = ceil_div(n, bn);
  const std::size_t most_n_blocks = epilogue_reads && kk <= 128 ? n_blocks : n_blocks + t.cores;
  double best = t.cores > 1 && batch * m_blocks * n_blocks < 8 * t.cores ? grid_balance(batch, m, bm, n, bn, t.cores) : 1.0;
  if (best < 0.9) {
    std::size_t best_m = bm, best_n = bn;
    for (std::size_t cm = m_blocks; cm <= m_blocks + t.cores; ++cm)
      for (std::size_t cn = n_blocks; cn <= most_n_blocks; ++cn) {
        const std::size_t bm_ = min_of(bm, ceil_div(ceil_div(m, cm), align_m) * align_m);
        const std::size_t bn_ = min_of(bn, ceil_div(ceil_div(n, cn), align_n) * align_n);
        const double b = grid_balance(batch, m, bm_, n, bn_, t.cores);
        const bool fewer = ceil_div(m, bm_) * ceil_div(n, bn_) < ceil_div(m, best_m) * ceil_div(n, best_n);
        if (b > best + 0.01 || (b > best - 0.01 && fewer)) best = b, best_m = bm_, best_n = bn_;
      }
    bm = best_m;
    bn = best_n;
  }
}

constexpr block_plan plan_matmul(const target& t, const kernel_description& k) {
  block_plan p = start(t, k);
  if (!p.ok()) return p;
  int lhs = -1, rhs = -1, out = -1;
  for (std::size_t i = 0; i < p.count; ++i) {
    const int id = static_cast<int>(i);
    switch (p.blocks[i].map) {
      case index_map::matmul_lhs:
        if (lhs >= 0) return bad(p, id);
        lhs = id;
        break;
      case index_map::matmul_rhs:
        if (rhs >= 0) return bad(p, id);
        rhs = id;
        break;
      case index_map::matmul_out:
        if (out < 0) out = id;
        break;
      case index_map::whole:
        break;
      default:
        return bad(p, id);
    }
  }
  if (lhs < 0 || rhs < 0 || out < 0) return bad(p, 0);
  const block_spec& a = p.blocks[static_cast<std::size_t>(lhs)];
  const block_spec& b = p.blocks[static_cast<std::size_t>(rhs)];
  const std::size_t r = a.array.rank;
  if (r < 2 || r > 3 || b.array.rank != r) return bad(p, r < 2 || r > 3 ? lhs : rhs);
  const std::size_t m = a.array[r - 2], kk = a.array[r - 1], n = b.array[r - 1];
  const std::size_t batch = r == 3 ? a.array[0] : 1;
  if (b.array[r - 2] != kk || (r == 3 && b.array[0] != batch)) return bad(p, rhs);
  std::size_t qm = t.tile(a.dtype).rows, qn = t.tile(b.dtype).cols;
  const std::size_t qk = std::lcm(t.tile(a.dtype).cols, t.tile(b.dtype).rows);
  for (std::size_t i = 0; i < p.count; ++i) {
    const block_spec& s = p.blocks[i];
    if (s.map != index_map::matmul_out) continue;
    if (s.array.rank != r || s.array[r - 2] != m || s.array[r - 1] != n || (r == 3 && s.array[0] != batch))
      return bad(p, static_cast<int>(i));
    qm = std::lcm(qm, t.tile(s.dtype).rows);
    qn = std::lcm(qn, t.tile(s.dtype).cols);
  }
  const bool partial = t.partial_edge_blocks;
  const bool tpu = t.kind == target_kind::tpu;
  // bf16 x bf16 on a host's bf16 unit (AMX): its row block and K step, so that no block ends inside a tile.
  const bool bf16_unit = t.bf16_mxu_rows != 0 && a.dtype == ir::dtype_code::bf16 && b.dtype == ir::dtype_code::bf16;
  dim_walk wm{m, qm, std::lcm(qm, bf16_unit ? t.bf16_mxu_rows : t.mxu_rows), t.block_m, partial};
  dim_walk wn{n, qn, std::lcm(qn, t.mxu_cols), t.block_n, partial};
  dim_walk wk{kk, qk, tpu ? std::lcm(qk, t.mxu_rows) : bf16_unit ? std::lcm(qk, t.bf16_mxu_k) : qk, t.block_k, partial};
  std::size_t bm = wm.first(), bn = wn.first(), bk = wk.first();

  const std::size_t fixed = whole_bytes(p);
  const bool packs = t.kind == target_kind::host;  // see packs_matmul
  auto need = [&](std::size_t bm_, std::size_t bn_, std::size_t bk_) {
    if (packs) return fixed / p.buffers + packed_panel_bytes(bm_, bn_, bk_, t.mxu_cols);
    std::size_t bytes = fixed + bk_ * (bm_ * ir::bytes_of(a.dtype) + bn_ * ir::bytes_of(b.dtype)) * p.buffers;
    for (std::size_t i = 0; i < p.count; ++i)
      if (p.blocks[i].map == index_map::matmul_out) bytes += bm_ * bn_ * ir::bytes_of(p.blocks[i].dtype) * p.buffers;
    return bytes + bm_ * bn_ * 4;  // the f32 accumulator
  };
  // Shrink the largest of bm, bn, bk / 2 until the blocks fit: the per-step arithmetic intensity is
  // bm·bn / (bm + bn), independent of bk, so bk may stay twice as long as the others.
  while (need(bm, bn, bk) > t.vmem_bytes) {
    std::size_t* dims[3] = {&bk, &bn, &bm};
    dim_walk* walks[3] = {&wk, &wn, &wm};
    const std::size_t weight[3] = {bk / 2, bn, bm};
    int best = -1;
    for (int i = 0; i < 3; ++i) {
      if (walks[i]->below(*dims[i]) == 0) continue;
      if (best < 0 || weight[i] > weight[best]) best = i;
    }
    if (best < 0) break;  // the smallest legal blocks still overflow: finish() reports it
    *dims[best] = walks[best]->below(*dims[best]);
  }
  if (partial) balance_blocks(t, batch, m, n, kk, p.count > 3, wm.align, wn.align, bm, bn);
  for (std::size_t i = 0; i < p.count; ++i) {
    block_spec& s = p.blocks[i];
    if (s.map == index_map::whole) continue;
    const std::size_t lead = r == 3 ? 1 : 0;  // one batch element per step
    if (lead) s.block.d[0] = 1;
    s.block.d[lead] = s.map == index_map::matmul_rhs ? bk : bm;
    s.block.d[lead + 1] = s.map == index_map::matmul_lhs ? bk : bn;
  }
  p.grid = r == 3 ? make_dims({batch, ceil_div(m, bm), ceil_div(n, bn), ceil_div(kk, bk)})
                  : make_dims({ceil_div(m, bm), ceil_div(n, bn), ceil_div(kk, bk)});
  for (std::size_t i = 0; i + 1 < p.grid.rank; ++i) p.parallel[i] = true;  // k, the last axis, accumulates
  p.scratch_bytes = packs ? 0 : bm * bn * 4;
  return finish(t, p);
}

}  // namespace detail

// Chooses every operand's block, the grid and the VMEM use of kernel k on target t.
// Contract: blocks obey the tiling rules above and divide their arrays (except on targets with partial
// edge blocks); among those, each block is the largest up to the target's preferences (block_bytes per
// operand for elementwise and row kernels; block_m/n/k for matmul, aligned to the MXU on a TPU and to the
// micro-kernel tile on a host) whose total fits VMEM. Row kernels keep whole rows. Matmul's grid is
// ([batch,] M/bm, N/bn, K/bk) with K last (not parallel) so the out block accumulates in an f32 scratch.
// On failure, error says why and failed_operand / failed_axis / row_length / vmem_bytes say where.
constexpr block_plan plan_blocks(const target& t, const kernel_description& k) {
  switch (k.kind) {
    case pattern::row:
      return detail::plan_row(t, k);
    case pattern::matmul:
      return detail::plan_matmul(t, k);
    default:
      return detail::plan_elementwise(t, k);
  }
}

// Checks user-chosen blocks (each with its array and dtype) against the tiling rules, divisibility and
// VMEM (all blocks x buffers + scratch_bytes). The grid is the first block's: ceil(array / block) per axis.
constexpr block_plan check_blocks(const target& t, const block_spec* specs, std::size_t count, std::size_t scratch_bytes = 0) {
  block_plan p;
  p.vmem_limit = t.vmem_bytes;
  p.buffers = t.buffers();
  p.scratch_bytes = scratch_bytes;
  if (count == 0 || count > max_operands) {
    p.error = tile_error::bad_description;
    return p;
  }
  p.count = static_cast<std::uint8_t>(count);
  for (std::size_t i = 0; i < count; ++i) {
    p.blocks[i] = specs[i];
    if (!detail::check_one(t, specs[i], static_cast<int>(i), p)) return p;
  }
  p.grid.rank = specs[0].array.rank;
  for (std::size_t a = 0; a < p.grid.rank; ++a) {
    p.grid.d[a] = detail::ceil_div(specs[0].array[a], specs[0].block[a]);
    p.parallel[a] = true;
  }
  return detail::finish(t, p);
}

// ---- messages --------------------------------------------------------------------------------------

constexpr message_builder& append_dims(message_builder& m, const ir::dims& d) {
  m << '[';
  for (std::size_t i = 0; i < d.rank; ++i) {
    if (i) m << ',';
    m << static_cast<std::uint64_t>(d[i]);
  }
  return m << ']';
}

// The sentence for a failed plan or check: `op` names the caller ("tessel::check_block_spec"), `kernel`
// the kernel (may be empty). Names the shapes, the bytes needed and available, the rule and the fix.
constexpr message_builder describe_failure(const target& t, const block_plan& p, std::string_view op, std::string_view kernel) {
  message_builder m;
  m << op << ": ";
  if (!kernel.empty()) m << "kernel " << kernel << ": ";  // no quotes: g++ prints them escaped
  const std::size_t at = p.failed_operand < 0 ? 0 : static_cast<std::size_t>(p.failed_operand);
  const block_spec& s = p.blocks[at];
  auto array = [&]() -> message_builder& { return append_dims(m << ir::name_of(s.dtype), s.array); };
  switch (p.error) {
    case tile_error::none:
      m << "no error";
      break;
    case tile_error::bad_description:
      m << "operand " << static_cast<std::uint64_t>(at) << " (";
      array() << ", " << name_of(s.map) << " map, block ";
      append_dims(m, s.block) << ") does not fit a " << name_of(p.kind)
                              << " kernel (block rank must equal the array rank, each block dim in 1..the array dim; elementwise "
                                 "operands share one shape, row operands one row count, matmul needs lhs[M,K], rhs[K,N], out[M,N]); "
                                 "fix: correct the shape or index map";
      break;
    case tile_error::tiling_rule: {
      const vreg_tile q = detail::axis_multiples(t, s.dtype, s.array.rank);
      append_dims(m << "block ", s.block) << " of ";
      array() << " breaks the tiling rule of target " << t.name << ": block dim " << static_cast<std::uint64_t>(p.failed_axis)
              << " is " << static_cast<std::uint64_t>(s.block[p.failed_axis]) << ", but the last two block dims must be divisible by ("
              << static_cast<std::uint64_t>(q.rows) << "," << static_cast<std::uint64_t>(q.cols) << ") for "
              << ir::name_of(s.dtype) << " or equal the array dims; fix: make the last two block dims multiples of "
              << static_cast<std::uint64_t>(q.rows) << " and " << static_cast<std::uint64_t>(q.cols) << " or equal to the array dims";
      break;
    }
    case tile_error::not_divisible:
      append_dims(m << "block ", s.block) << " does not divide ";
      array() << ": dim " << static_cast<std::uint64_t>(p.failed_axis) << " is "
              << static_cast<std::uint64_t>(s.array[p.failed_axis]) << ", not a multiple of "
              << static_cast<std::uint64_t>(s.block[p.failed_axis]) << ", and target " << t.name
              << " does not pad partial edge blocks; fix: choose block dims that divide the array dims";
      break;
    case tile_error::vmem_overflow:
      m << "blocks ";
      for (std::size_t i = 0; i < p.count && i < 3; ++i) {
        if (i) m << ", ";
        append_dims(m << ir::name_of(p.blocks[i].dtype), p.blocks[i].block);
      }
      if (p.count > 3) m << ", ...";
      m << " need " << static_cast<std::uint64_t>(p.vmem_bytes) << " bytes (" << static_cast<std::uint64_t>(p.count)
        << " operands x" << static_cast<std::uint64_t>(p.buffers) << (p.buffers == 2 ? " double-buffered" : "");
      if (p.scratch_bytes) m << " + " << static_cast<std::uint64_t>(p.scratch_bytes) << " f32 accumulator";
      m << "), target " << t.name << " has " << static_cast<std::uint64_t>(t.vmem_bytes)
        << " per core; fix: smaller blocks (or fewer operands per kernel)";
      break;
    case tile_error::row_too_long:
      m << "a row of " << static_cast<std::uint64_t>(p.row_length) << " elements (";
      array() << ") must stay whole in a block, and the smallest block (" << static_cast<std::uint64_t>(p.min_rows) << " rows x "
              << static_cast<std::uint64_t>(p.count) << " operands x" << static_cast<std::uint64_t>(p.buffers) << " buffers) needs "
              << static_cast<std::uint64_t>(p.vmem_bytes) << " bytes, target " << t.name << " has "
              << static_cast<std::uint64_t>(t.vmem_bytes)
              << " per core; fix: split the reduction: reduce blocks of each row, then combine the partial results";
      break;
  }
  return m;
}

}  // namespace tessel::tiling

namespace tessel {

namespace detail {
template <target Target, Shape Array, Shape Block, class D, std::size_t Operands>
constexpr tiling::block_plan same_block_check() {
  tiling::block_spec specs[Operands > 0 ? Operands : 1]{};
  for (auto& s : specs) {
    s.array = ir::dims::from<Array::rank>(Array::dims);
    s.block = ir::dims::from<Block::rank>(Block::dims);
    s.dtype = ir::code_of<D>();
  }
  return tiling::check_blocks(Target, specs, Operands);
}
}  // namespace detail

// Checks a user-chosen block: `Operands` operands of Array (a tessel::shape) in dtype D, each with block
// Block, on Target (e.g. targets::tpu_v5e). Returns the check (grid, VMEM use); a broken rule (tiling,
// divisibility, VMEM) is a compile error that names the block, the array, the rule and the fix.
//   constexpr auto c = tessel::check_block_spec<tessel::targets::tpu_v5e, shape<4096, 1024>, shape<512, 1024>, float, 2>();
template <target Target, Shape Array, Shape Block, DType D = float, std::size_t Operands = 1, fixed_string Op = "tessel::check_block_spec">
consteval tiling::block_plan check_block_spec() {
  constexpr tiling::block_plan p = detail::same_block_check<Target, Array, Block, D, Operands>();
  if constexpr (!p.ok()) {
    raise<fit<[] {
      return tiling::describe_failure(Target, detail::same_block_check<Target, Array, Block, D, Operands>(), Op.view(), "");
    }>()>();
  }
  return p;
}

// Plans kernel K on Target and returns the plan; a kernel that cannot be planned (its smallest legal blocks
// overflow VMEM, a row too long for VMEM, an inconsistent description) is a compile error naming the kernel.
//   constexpr auto p = tessel::check_kernel_fits<tessel::targets::host, tessel::tiling::row_kernel(...)>();
template <target Target, tiling::kernel_description K, fixed_string Op = "tessel::plan">
consteval tiling::block_plan check_kernel_fits() {
  constexpr tiling::block_plan p = tiling::plan_blocks(Target, K);
  if constexpr (!p.ok()) {
    raise<fit<[] { return tiling::describe_failure(Target, tiling::plan_blocks(Target, K), Op.view(), K.name.view()); }>()>();
  }
  return p;
}

}  // namespace tessel
