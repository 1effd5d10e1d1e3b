// Defines run::execute (tessel/run/executor.hpp): the host executor over a type-erased plan, compiled once
// in the tessel library (src/tessel.cpp), or in one translation unit of a header-only user's program
// (TESSEL_IMPLEMENTATION defined before including tessel/tessel.hpp). Kernels call each primitive's
// tile functions through its descriptor, so nothing here depends on the program.
//
// One arena holds the plan's intermediate buffers (plan.arena_bytes, a constant) and each thread's
// scratch (member tile pointers, tiles, rows, GEMM panels); it is the calling thread's, reused by every
// call, and nothing is allocated inside kernels.
#ifndef TESSEL_RUN_IMPLEMENTATION_HPP
#define TESSEL_RUN_IMPLEMENTATION_HPP

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdlib>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "tessel/core/bfloat16.hpp"
#include "tessel/kernels/collective.hpp"
#include "tessel/kernels/gemm.hpp"
#include "tessel/kernels/thread_pool.hpp"
#include "tessel/prim/all.hpp"  // every primitive descriptor, so this translation unit sees them all
#include "tessel/plan/plan.hpp"
#include "tessel/plan/target_view.hpp"
#include "tessel/prim/dot_general.hpp"
#include "tessel/run/executor.hpp"
#include "tessel/run/mesh.hpp"
#include "tessel/run/softmax_rows.hpp"
#include "tessel/target/host.hpp"

namespace tessel::run {

using kernels::thread_pool;

inline std::int64_t steady_ns() {  // kernel_report's clock
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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
  // row kernels: the members a softmax routine runs whole (run/softmax_rows.hpp), if any
  softmax_span softmax{};
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

// A work item's scratch in a thread's region: the primitive's floats, then the thread's accumulator of
// the result when the items sum partials, 64-byte aligned; an epilogue's tiles come after.
inline std::size_t item_scratch_bytes(const ir::item_plan& items, const ir::node& n) {
  const std::size_t floats = ir::aligned_floats(items.scratch_floats) + (items.sums_partials ? ir::aligned_floats(n.shape.size()) : 0);
  return floats * 4;
}

// How a kernel's member holds its values. A broadcast whose readers all take one-value operands
// (ir::splat_fn: binary elementwise, select) is not spread into a tile: it holds the one value of a
// literal or of a one-element stored value, or, in a row kernel, stands for its per-row source's values.
// Spread, they cost a tile's stores and a tile's loads per reader: Adam's constants, relu's 0, a
// softmax's row maximum and row sum.
enum class member_form : std::uint8_t { tile, one_value, per_row };

// What the executor derives from a plan for this machine: every kernel's grid, and the scratch a thread
// needs for the largest kernel (member tile pointers aside).
struct derived_plan {
  std::vector<kernel_grid> grids;
  std::vector<std::uint16_t> tile_slot;  // per member, indexed as plan_view::members (assign_tile_slots)
  std::vector<member_form> form;         // per member, indexed alike (assign_member_forms)
  // Per member, max_operands each: which member of its kernel operand a is, or -1 (member_index, looked
  // up once here rather than per operand per tile: a row kernel over rows of 1024 spent a tenth of its
  // time finding its members' operands).
  std::vector<std::int16_t> operand_slot;
  std::vector<std::uint8_t> whole_rows;  // per member of a row kernel: 1 where it holds whole rows, 0 one value per row
  std::vector<int> streamed;             // values loop and row kernels stream from memory (streamed_values)
  std::size_t scratch_bytes = 0;
  std::size_t shared_bytes = 0;  // one region all threads share: the largest contraction's B packed whole
};

// Whether a contraction packs its B (k x n elements) once for all blocks (kernels::hwy_gemm_pack_b)
// before multiplying: when more than one block of rows reads each column of B, every block of columns
// starts at a panel of the packed form, and, on several threads, the packing saved is worth the pass
// that packs first (all threads wait for it, then read panels another core wrote): AMD EPYC, 2 threads,
// SGEMM 128 and 256 ran 0.50-0.66x oneDNN with it and 0.63-0.94x without; 512 alike; 1024 and 2048 gained.
inline bool packs_b_whole(const kernel_grid& g, std::size_t b_elements, std::size_t threads) {
  const std::size_t nr = kernels::blocking_of().nr;
  const bool saves_enough = threads == 1 || b_elements * (g.m_blocks - 1) >= (std::size_t{1} << 18);
  return !g.by_items && g.m_blocks > 1 && (g.n_blocks == 1 || g.bn % nr == 0) && saves_enough;
}

// Which of kernel kr's members node id is, or -1.
inline int member_index(const plan::plan_view& p, const plan::kernel& kr, int id) {
  for (int m = 0; m < kr.member_count; ++m)
    if (p.members[static_cast<std::size_t>(kr.first_member + m)] == id) return m;
  return -1;
}

// The literal node id stands for (a literal, or a broadcast of one), or null.
inline const ir::node* literal_behind(const plan::plan_view& p, int id) {
  const ir::node& n = p.node(id);
  if (n.prim->kind == ir::prim_kind::literal) return &n;
  if (n.prim->kind == ir::prim_kind::broadcast && p.node(n.operand(0)).prim->kind == ir::prim_kind::literal) return &p.node(n.operand(0));
  return nullptr;
}

// Where kernel kr's members keep their tiles: slot[m] for member m, the number of slots returned. A
// member holds its slot from its evaluation to that of its last reader (through a reshape, which hands
// on its operand's tile, to the reshape's last reader; a per_row broadcast alike), the root and the
// other stored members (plan::stored_member) until they are stored; a freed slot goes to the next
// member. A member per tile had a softmax's seven 4 KiB tiles and the row they read overflow a 32 KiB L1
// (AMD EPYC Zen 4), and a fused backward pass's twenty overflow any L1.
inline std::size_t assign_tile_slots(const plan::plan_view& p, const plan::kernel& kr, const member_form* form, std::uint16_t* slot) {
  const int count = kr.member_count;
  const int* member = p.members + kr.first_member;
  std::vector<int> last(static_cast<std::size_t>(count));
  for (int m = 0; m < count; ++m)
    last[static_cast<std::size_t>(m)] = member[m] == kr.root || plan::stored_member(p, kr, member[m]) ? count : m;
  for (int j = count; j-- > 0;) {  // readers after their operands: a reshape's last reader is known
    const ir::node& n = p.node(member[j]);
    const bool hands_on = n.prim->kind == ir::prim_kind::reshape || form[j] == member_form::per_row;
    const int held_to = hands_on ? last[static_cast<std::size_t>(j)] : j;
    for (std::size_t a = 0; a < n.arity; ++a)
      if (const int m = member_index(p, kr, n.operand(a)); m >= 0) last[static_cast<std::size_t>(m)] = std::max(last[static_cast<std::size_t>(m)], held_to);
  }
  std::vector<int> holder;  // holder[s]: the member last given slot s
  for (int m = 0; m < count; ++m) {
    std::size_t s = 0;
    while (s < holder.size() && last[static_cast<std::size_t>(holder[s])] >= m) ++s;
    if (s == holder.size()) holder.push_back(m);
    else holder[s] = m;
    slot[m] = static_cast<std::uint16_t>(s);
  }
  return holder.size();
}

// Rows shorter than this keep their per-row values spread into tiles: a call per row would cost more.
inline constexpr std::size_t per_row_min_inner = 64;

// Each member's member_form in kernel kr, into form[m].
inline void assign_member_forms(const plan::plan_view& p, const plan::kernel& kr, member_form* form) {
  const int* member = p.members + kr.first_member;
  const bool row = kr.kind == plan::kernel_kind::row;
  for (int m = 0; m < kr.member_count; ++m) {
    form[m] = member_form::tile;
    const ir::node& b = p.node(member[m]);
    if (b.prim->kind != ir::prim_kind::broadcast || member[m] == kr.root) continue;
    bool readers_take_one_value = true;
    for (int j = m + 1; j < kr.member_count; ++j) {
      const ir::node& r = p.node(member[j]);
      for (std::size_t a = 0; a < r.arity; ++a)
        if (r.operand(a) == member[m]) readers_take_one_value = readers_take_one_value && r.prim->evaluate_splat != nullptr;
    }
    if (!readers_take_one_value) continue;
    const int source = b.operand(0);
    const ir::node& s = p.node(source);
    if (member_index(p, kr, source) < 0) {
      if (literal_behind(p, source) != nullptr || (s.shape.size() == 1 && s.prim->kind != ir::prim_kind::generator))
        form[m] = member_form::one_value;
    } else if (row && b.shape == kr.row_shape && s.shape != kr.row_shape && kr.inner >= per_row_min_inner) {
      form[m] = member_form::per_row;
    }
  }
}

// The values loop or row kernel kr reads from memory at its own flat index (operands of its members
// that are not members, literals or generators, with its shape), appended to `out`: the executor asks
// for their next tile while it computes this one. Streams read tile by tile, one after the other, kept
// too little of the memory's bandwidth busy: AMD EPYC (Zen 4), relu(a * x + b) over 2^24 floats, b
// donated, took 6.6 ms on 2 threads without, 5.5 with the next tile fetched into L2, 7.7 into L1.
inline void streamed_values(const plan::plan_view& p, const plan::kernel& kr, std::vector<int>& out) {
  if (kr.kind != plan::kernel_kind::loop && kr.kind != plan::kernel_kind::row) return;
  const int* member = p.members + kr.first_member;
  const std::size_t size = kr.kind == plan::kernel_kind::row ? kr.row_shape.size() : p.node(kr.root).shape.size();
  const auto first = static_cast<std::ptrdiff_t>(out.size());
  for (int m = 0; m < kr.member_count; ++m) {
    const ir::node& n = p.node(member[m]);
    if (n.prim->kind == ir::prim_kind::broadcast || n.prim->kind == ir::prim_kind::generator) continue;
    for (std::size_t a = 0; a < n.arity; ++a) {
      const int id = n.operand(a);
      const ir::node& o = p.node(id);
      const bool stored = member_index(p, kr, id) < 0 && p.materialized[static_cast<std::size_t>(id)];
      if (stored && o.shape.size() == size && std::find(out.begin() + first, out.end(), id) == out.end())
        out.push_back(id);
    }
  }
}

inline derived_plan derive(const plan::plan_view& p) {
  derived_plan d;
  d.grids.reserve(static_cast<std::size_t>(p.kernel_count));
  for (int k = 0; k < p.kernel_count; ++k) {
    const plan::kernel& kr = p.kernels[static_cast<std::size_t>(k)];
    d.tile_slot.resize(std::max(d.tile_slot.size(), static_cast<std::size_t>(kr.first_member + kr.member_count)));
    d.form.resize(d.tile_slot.size());
    assign_member_forms(p, kr, d.form.data() + kr.first_member);
    d.operand_slot.resize(d.tile_slot.size() * ir::max_operands, -1);
    d.whole_rows.resize(d.tile_slot.size());
    for (int m = 0; m < kr.member_count; ++m) {
      const auto i = static_cast<std::size_t>(kr.first_member + m);
      const ir::node& n = p.node(p.members[i]);
      for (std::size_t a = 0; a < n.arity; ++a)
        d.operand_slot[i * ir::max_operands + a] = static_cast<std::int16_t>(member_index(p, kr, n.operand(a)));
      d.whole_rows[i] = kr.kind == plan::kernel_kind::row && n.shape == kr.row_shape;
    }
    kernel_grid& g = d.grids.emplace_back(grid_of(p, k, targets::this_host()));
    g.softmax = find_softmax(p, kr, [&](int id) {
      const int m = member_index(p, kr, id);
      return m < 0 || d.form[static_cast<std::size_t>(kr.first_member + m)] == member_form::tile;
    });
    g.first_stream = d.streamed.size();
    streamed_values(p, kr, d.streamed);
    g.streams = d.streamed.size() - g.first_stream;
    // The spare tiles operands from outside the kernel are converted into, then the members' slots.
    const std::size_t members = assign_tile_slots(p, kr, d.form.data() + kr.first_member, d.tile_slot.data() + kr.first_member) + ir::max_operands;
    std::size_t need = members * tile_elements * 4 + tile_elements * 4;
    if (kr.kind == plan::kernel_kind::row) need = members * (rows_per_pass(kr) * kr.inner + 16) * 4;
    if (kr.kind == plan::kernel_kind::column) need = (members + 1) * tile_elements * 4;  // + the accumulator
    if (plan::item_node(p, k) >= 0)  // the items' scratch and accumulator, then the epilogue's tiles
      need += item_scratch_bytes(g.items, p.node(plan::item_node(p, k)));
    else if (kr.kind == plan::kernel_kind::contraction)
      need += kernels::gemm_scratch_floats() * 4 + g.bm * g.bn * 4;  // the GEMM's panels, the C block
    d.scratch_bytes = std::max(d.scratch_bytes, (need + 63) / 64 * 64);
    const ir::node* dot = kr.kind == plan::kernel_kind::contraction ? &p.node(kr.dot) : nullptr;
    const prim::dot_layout l = dot != nullptr ? prim::layout_of(*dot, p.node(dot->operand(0)), p.node(dot->operand(1))) : prim::dot_layout{};
    if (dot != nullptr && packs_b_whole(g, l.k * l.n, 1)) {
      // B packed as f32 panels of NR columns for every batch element (vdpbf16ps pairs take no more), on
      // any number of threads.
      const std::size_t nr = kernels::blocking_of().nr;
      const std::size_t floats = (l.n + nr - 1) / nr * nr * l.k;
      d.shared_bytes = std::max(d.shared_bytes, (g.batch * floats * 4 + 63) / 64 * 64);
    }
  }
  return d;
}

// What plan p derives to: kept in its slot (plan_view::derived) from the first call on, made by
// whichever thread gets there first (the devices of a mesh start together); made into `local` for a plan
// without a slot.
inline const derived_plan& derived_for(const plan::plan_view& p, derived_plan& local) {
  if (p.derived == nullptr) return local = derive(p);
  if (const void* kept = p.derived->load(std::memory_order_acquire)) return *static_cast<const derived_plan*>(kept);
  // Lives as long as the static plan it belongs to: reachable from the plan's slot until the process ends.
  auto* made = new derived_plan(derive(p));
  const void* expected = nullptr;
  if (p.derived->compare_exchange_strong(expected, made, std::memory_order_acq_rel)) return *made;
  delete made;
  return *static_cast<const derived_plan*>(expected);
}

// Storage <-> tile: bf16 widens to float; other dtypes are the same bytes.
inline void load_tile(ir::dtype_code dtype, const void* storage, std::size_t n, void* tile) {
  if (dtype == ir::dtype_code::bf16) {
    const auto* s = static_cast<const std::uint16_t*>(storage);
    auto* t = static_cast<std::uint32_t*>(tile);
    for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::uint32_t>(s[i]) << 16;
  } else {
    std::memcpy(tile, storage, n * ir::bytes_of(dtype));
  }
}
inline void store_tile(ir::dtype_code dtype, const void* tile, std::size_t n, void* storage) {
  if (dtype == ir::dtype_code::bf16) {
    const auto* t = static_cast<const float*>(tile);
    auto* s = static_cast<std::uint16_t*>(storage);
    for (std::size_t i = 0; i < n; ++i) s[i] = bfloat16::round_to_bits(t[i]);
  } else {
    std::memcpy(storage, tile, n * ir::bytes_of(dtype));
  }
}

inline void splat(const ir::node& literal, ir::dtype_code dtype, std::size_t n, void* tile) {
  const double v = literal.attr.scalar;
  switch (dtype) {
    case ir::dtype_code::f32:
    case ir::dtype_code::bf16: std::fill_n(static_cast<float*>(tile), n, static_cast<float>(v)); break;
    case ir::dtype_code::s32: std::fill_n(static_cast<std::int32_t*>(tile), n, static_cast<std::int32_t>(v)); break;
    case ir::dtype_code::u32: std::fill_n(static_cast<std::uint32_t*>(tile), n, static_cast<std::uint32_t>(v)); break;
    case ir::dtype_code::pred: std::fill_n(static_cast<bool*>(tile), n, v != 0); break;
  }
}

// How broadcast_in_dim node b's result walks its operand: the stride of each result axis into the
// operand (0 where the axis is broadcast), and the runs of its trailing axes: `run` elements that the
// operand holds contiguously (`copies`) or that repeat one of its values, as the attention bias [B,1,T,T]
// spread over heads, within the axes from `inner` on.
struct broadcast_walk {
  std::array<std::size_t, ir::max_rank> stride_of_axis{};
  std::size_t run = 1, inner = 0;
  bool copies = false;

  // The operand element where the run holding result element `at` starts: a few divisions a run instead
  // of an index walk per element.
  std::size_t run_source(const ir::node& b, std::size_t at) const {
    std::size_t rest = at / run, source = 0;
    for (std::size_t axis = inner; axis-- > 0;) {
      source += rest % b.shape.d[axis] * stride_of_axis[axis];
      rest /= b.shape.d[axis];
    }
    return source;
  }
};

inline broadcast_walk walk_of(const ir::node& b, const ir::node& operand) {
  broadcast_walk w;
  std::array<std::size_t, ir::max_rank> operand_strides{};
  std::size_t s = 1;
  for (std::size_t i = operand.shape.rank; i-- > 0;) {
    operand_strides[i] = s;
    s *= operand.shape.d[i];
  }
  for (std::size_t i = 0; i < operand.shape.rank; ++i)
    if (operand.shape.d[i] != 1) w.stride_of_axis[static_cast<std::size_t>(b.attr.ints[i])] = operand_strides[i];
  const std::size_t rank = b.shape.rank;
  w.copies = rank > 0 && w.stride_of_axis[rank - 1] == 1;
  w.inner = rank;
  for (std::size_t axis = rank; axis-- > 0; w.inner = axis) {
    if (b.shape.d[axis] == 1) continue;
    if (w.stride_of_axis[axis] != (w.copies ? w.run : 0)) break;
    w.run *= b.shape.d[axis];
  }
  return w;
}

// Where elements [first, first + n) of broadcast b are one contiguous run of its operand in storage
// (stored as a tile holds it: not bf16 or pred), that run, to be read where it lies; else null. A tile of
// the attention's scores within one head reads the bias [B,1,T,T] so, instead of copying it.
inline const void* broadcast_in_place(const ir::node& b, const ir::node& operand, const void* storage, std::size_t first,
                                      std::size_t n) {
  if (operand.dtype == ir::dtype_code::bf16 || operand.dtype == ir::dtype_code::pred || n == 0) return nullptr;
  const broadcast_walk w = walk_of(b, operand);
  if (!w.copies || first % w.run + n > w.run) return nullptr;
  return static_cast<const unsigned char*>(storage) + (w.run_source(b, first) + first % w.run) * ir::bytes_of(operand.dtype);
}

// Elements [first, first + n) of broadcast_in_dim node b, read from its operand's storage.
inline void gather_broadcast(const ir::node& b, const ir::node& operand, const void* storage, std::size_t first,
                             std::size_t n, void* tile) {
  const std::size_t elem = ir::bytes_of(operand.dtype);
  const std::size_t osize = operand.shape.size();
  const auto* src = static_cast<const unsigned char*>(storage);
  auto put = [&](std::size_t i, std::size_t source) {
    if (operand.dtype == ir::dtype_code::bf16) {
      std::uint16_t h;
      std::memcpy(&h, src + source * 2, 2);
      const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
      std::memcpy(static_cast<unsigned char*>(tile) + i * 4, &w, 4);
    } else {
      std::memcpy(static_cast<unsigned char*>(tile) + i * elem, src + source * elem, elem);
    }
  };
  // Fills tile[i, i + count) with operand element `source` (widened to the tile's type).
  auto fill = [&](std::size_t i, std::size_t count, std::size_t source) {
    if (operand.dtype == ir::dtype_code::pred) {
      std::memset(static_cast<unsigned char*>(tile) + i, src[source], count);
      return;
    }
    std::uint32_t v;
    if (operand.dtype == ir::dtype_code::bf16) {
      std::uint16_t h;
      std::memcpy(&h, src + source * 2, 2);
      v = static_cast<std::uint32_t>(h) << 16;
    } else {
      std::memcpy(&v, src + source * 4, 4);
    }
    std::fill_n(static_cast<std::uint32_t*>(tile) + i, count, v);
  };
  if (osize == 1) {
    fill(0, n, 0);
    return;
  }
  // The two common cases, done with contiguous copies and runs: the operand is the result's trailing
  // dims (a bias over rows) or its leading dims (a per-row value over each row).
  const std::size_t r = operand.shape.rank, rank_out = b.shape.rank;
  bool suffix = true, prefix = true;
  for (std::size_t i = 0; i < r; ++i) {
    const auto axis = static_cast<std::size_t>(b.attr.ints[i]);
    suffix = suffix && axis == rank_out - r + i && operand.shape.d[i] == b.shape.d[axis];
    prefix = prefix && axis == i && operand.shape.d[i] == b.shape.d[axis];
  }
  auto* dst = static_cast<unsigned char*>(tile);
  const std::size_t tile_elem = ir::tile_bytes(operand.dtype);
  if (suffix) {  // runs of the whole operand (bf16 widened a run at a time: the bf16 CNN's bias)
    for (std::size_t i = 0; i < n;) {
      const std::size_t at = (first + i) % osize;
      const std::size_t run = std::min(n - i, osize - at);
      load_tile(operand.dtype, src + at * elem, run, dst + i * tile_elem);
      i += run;
    }
    return;
  }
  if (prefix) {
    const std::size_t inner = b.shape.size() / osize;
    for (std::size_t i = 0; i < n;) {
      const std::size_t at = (first + i) / inner;
      const std::size_t run = std::min(n - i, inner - (first + i) % inner);
      fill(i, run, at);
      i += run;
    }
    return;
  }
  const broadcast_walk w = walk_of(b, operand);
  if (w.run >= 16) {
    for (std::size_t i = 0; i < n;) {
      const std::size_t at = first + i, within = at % w.run;
      const std::size_t len = std::min(n - i, w.run - within);
      const std::size_t source = w.run_source(b, at);
      if (!w.copies) fill(i, len, source);
      else load_tile(operand.dtype, src + (source + within) * elem, len, dst + i * tile_elem);
      i += len;
    }
    return;
  }
  const std::size_t rank = b.shape.rank;
  const auto& stride_of_axis = w.stride_of_axis;
  std::array<std::size_t, ir::max_rank> index{};
  std::size_t rest = first, source = 0;
  for (std::size_t axis = rank; axis-- > 0;) {
    index[axis] = rest % b.shape.d[axis];
    rest /= b.shape.d[axis];
    source += index[axis] * stride_of_axis[axis];
  }
  for (std::size_t i = 0; i < n; ++i) {
    put(i, source);
    for (std::size_t axis = rank; axis-- > 0;) {
      source += stride_of_axis[axis];
      if (++index[axis] < b.shape.d[axis]) break;
      source -= stride_of_axis[axis] * index[axis];
      index[axis] = 0;
    }
  }
}

// Elements [first, first + n) of pad node p (lax.pad: lo, then interior per axis in attr; a negative lo
// crops) into a tile, its operand read from `storage` and the padding value `fill_bits` as a tile holds
// it. Runs along the last axis: outside the operand's box a run is the padding value; inside, the
// operand's row is copied (no interior padding) or placed every step elements.
inline void gather_pad(const ir::node& p, const ir::node& operand, const void* storage, std::uint32_t fill_bits, std::size_t first,
                       std::size_t n, void* tile) {
  const std::size_t rank = p.shape.rank, width = ir::tile_bytes(p.dtype), elem = ir::bytes_of(operand.dtype);
  auto* dst = static_cast<unsigned char*>(tile);
  const auto* src = static_cast<const unsigned char*>(storage);
  auto fill = [&](std::size_t i, std::size_t count) {
    if (width == 1) std::memset(dst + i, static_cast<int>(fill_bits & 0xFFu), count);
    else std::fill_n(reinterpret_cast<std::uint32_t*>(dst + i * 4), count, fill_bits);
  };
  if (rank == 0) {
    load_tile(operand.dtype, src, n, dst);
    return;
  }
  const std::size_t row = p.shape.d[rank - 1];
  const auto lo_last = static_cast<std::ptrdiff_t>(p.attr.ints[rank - 1]);
  const auto step_last = static_cast<std::ptrdiff_t>(p.attr.ints[2 * rank - 1]) + 1;
  const auto size_last = static_cast<std::ptrdiff_t>(operand.shape.d[rank - 1]);
  for (std::size_t i = 0; i < n;) {
    const std::size_t at = first + i, col = at % row, len = std::min(n - i, row - col);
    // The operand row this result row reads, if its outer indices land on operand elements.
    std::size_t rest = at / row, source = 0, stride = static_cast<std::size_t>(size_last);
    bool inside = true;
    for (std::size_t a = rank - 1; a-- > 0;) {
      const auto index = static_cast<std::ptrdiff_t>(rest % p.shape.d[a]);
      rest /= p.shape.d[a];
      const std::ptrdiff_t j = index - static_cast<std::ptrdiff_t>(p.attr.ints[a]), step = static_cast<std::ptrdiff_t>(p.attr.ints[rank + a]) + 1;
      if (j < 0 || j % step != 0 || j / step >= static_cast<std::ptrdiff_t>(operand.shape.d[a])) inside = false;
      else source += static_cast<std::size_t>(j / step) * stride;
      stride *= operand.shape.d[a];
    }
    if (!inside) {
      fill(i, len);
    } else if (step_last == 1) {  // [col, col + len) = padding, then operand elements [begin, end), then padding
      const std::ptrdiff_t c0 = static_cast<std::ptrdiff_t>(col), c1 = c0 + static_cast<std::ptrdiff_t>(len);
      const std::ptrdiff_t begin = std::clamp<std::ptrdiff_t>(lo_last, c0, c1), end = std::clamp<std::ptrdiff_t>(lo_last + size_last, begin, c1);
      fill(i, static_cast<std::size_t>(begin - c0));
      load_tile(operand.dtype, src + (source + static_cast<std::size_t>(begin - lo_last)) * elem, static_cast<std::size_t>(end - begin),
                dst + (i + static_cast<std::size_t>(begin - c0)) * width);
      fill(i + static_cast<std::size_t>(end - c0), static_cast<std::size_t>(c1 - end));
    } else {
      for (std::size_t c = 0; c < len; ++c) {
        const std::ptrdiff_t j = static_cast<std::ptrdiff_t>(col + c) - lo_last;
        if (j < 0 || j % step_last != 0 || j / step_last >= size_last) fill(i + c, 1);
        else load_tile(operand.dtype, src + (source + static_cast<std::size_t>(j / step_last)) * elem, 1, dst + (i + c) * width);
      }
    }
    i += len;
  }
}

class executor {
 public:
  executor(const plan::plan_view& p, const void* const* parameters, void* const* outputs)
      : p_(p), parameters_(parameters), outputs_(outputs) {}

  void run() {
    thread_pool& pool = thread_pool::host();
    threads_ = pool.size();
    const derived_plan& derived = derived_for(p_, local_derived_);
    grids_ = &derived.grids;
    tile_slot_ = derived.tile_slot.data();
    form_ = derived.form.data();
    operand_slot_ = derived.operand_slot.data();
    whole_rows_ = derived.whole_rows.data();
    streamed_ = derived.streamed.data();
    pointers_per_thread_ = (p_.max_members * sizeof(const void*) + 63) / 64 * 64;
    scratch_per_thread_ = pointers_per_thread_ + derived.scratch_bytes;
    const std::size_t total = p_.arena_bytes + scratch_per_thread_ * threads_ + derived.shared_bytes + plan::arena_alignment;
    arena_ = thread_arena(total);
    scratch_ = arena_ + (p_.arena_bytes + plan::arena_alignment - 1) / plan::arena_alignment * plan::arena_alignment;
    shared_ = reinterpret_cast<float*>(scratch_ + scratch_per_thread_ * threads_);
    run_range(0, p_.kernel_count, pool);
    for (std::size_t o = 0; o < p_.program.output_count; ++o) {
      const int id = p_.program.outputs[o];
      const int first = p_.output_index[static_cast<std::size_t>(id)];
      if (first != static_cast<int>(o)) std::memcpy(outputs_[o], outputs_[first], p_.bytes(id));
    }
  }

 private:
  // The calling thread's arena: kept from one call to the next and grown to the largest plan run on the
  // thread, so a step called again maps no new pages (the caching allocators of PyTorch and XLA keep
  // their memory the same way). It is freed when the thread ends. One of 2 MiB or more is 2 MiB aligned
  // and asks for transparent huge pages.
  static unsigned char* thread_arena(std::size_t bytes) {
    struct arena {
      unsigned char* data = nullptr;
      std::size_t bytes = 0;
      ~arena() { std::free(data); }
    };
    thread_local arena a;
    if (a.bytes < bytes) {
      std::free(a.data);
      a = {};
      constexpr std::size_t huge = std::size_t{2} << 20;
      const std::size_t align = bytes >= huge ? huge : 64;
      const std::size_t size = (bytes + align - 1) / align * align;
      void* p = std::aligned_alloc(align, size);
      if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__)
      if (align == huge) madvise(p, size, MADV_HUGEPAGE);
#endif
      a.data = static_cast<unsigned char*>(p);
      a.bytes = size;
    }
    return a.data;
  }

  const ir::node& nd(int id) const { return p_.node(id); }

  // The buffer a kernel stores (a copy kernel of a parameter stores into its output slot).
  const void* result_of(const plan::kernel& kr) const {
    const int slot = p_.output_index[static_cast<std::size_t>(kr.root)];
    return kr.kind == plan::kernel_kind::copy && slot >= 0 ? outputs_[slot] : storage(kr.root);
  }

  // Where a materialised node's storage is.
  void* storage(int id) const {
    const auto i = static_cast<std::size_t>(id);
    if (p_.alias_of[i] >= 0) return storage(p_.alias_of[i]);
    const ir::node& n = nd(id);
    if (p_.output_index[i] >= 0 && n.prim->kind != ir::prim_kind::parameter) return outputs_[p_.output_index[i]];
    if (n.prim->kind == ir::prim_kind::parameter) return const_cast<void*>(parameters_[n.attr.ints[0]]);
    return arena_ + p_.arena_offset[i];
  }

  // Which of kernel kr's members node id is (its index into tile_of), or -1.
  int slot_of(const plan::kernel& kr, int id) const { return member_index(p_, kr, id); }
  // The same for operand a of member m.
  int operand_slot(const plan::kernel& kr, int m, std::size_t a) const {
    return operand_slot_[static_cast<std::size_t>(kr.first_member + m) * ir::max_operands + a];
  }

  // Member m's tile among `tiles` (one every `stride` bytes): after the spare tiles, in its slot.
  unsigned char* member_tile(const plan::kernel& kr, int m, unsigned char* tiles, std::size_t stride) const {
    return tiles + (ir::max_operands + tile_slot_[kr.first_member + m]) * stride;
  }

  // Computes the members of a loop-shaped kernel on flat range [first, first + n); tile_of[m] receives
  // member m's tile. `given` (optional) supplies the contraction's result for the dot member.
  void eval_members(const plan::kernel& kr, std::size_t first, std::size_t n, unsigned char* tiles, std::size_t stride,
                    const void** tile_of, const float* given, std::uint64_t direct = 0) const {
    for (int m = 0; m < kr.member_count; ++m) {
      const int id = p_.members[static_cast<std::size_t>(kr.first_member + m)];
      const ir::node& node = nd(id);
      void* out = member_tile(kr, m, tiles, stride);
      tile_of[m] = out;
      switch (node.prim->kind) {
        case ir::prim_kind::contraction: tile_of[m] = given; break;
        case ir::prim_kind::generator: node.prim->generate(node, first, n, out); break;
        case ir::prim_kind::broadcast:
          if (form_of(kr, m) == member_form::one_value) one_value_into(node, out);
          else tile_of[m] = broadcast_into(kr, node, first, n, out, tile_of);
          break;
        case ir::prim_kind::reshape: tile_of[m] = operand_tile(kr, node.operand(0), node.dtype, first, n, out, tile_of); break;
        case ir::prim_kind::layout: pad_into(node, first, n, out); break;
        default: {
          // The root, last of the members and stored as its tile holds it (not bf16), is evaluated
          // straight into its storage: no copy of the tile afterwards (store_root sees it there); so are
          // the stored members in `direct` (direct_members).
          if ((id == kr.root && m + 1 == kr.member_count && node.dtype != ir::dtype_code::bf16) ||
              (m < 64 && (direct >> m & 1u) != 0)) {
            out = static_cast<unsigned char*>(storage(id)) + first * ir::bytes_of(node.dtype);
            tile_of[m] = out;
          }
          // Operands outside the kernel are read in place or converted into the spare tiles.
          const void* in[ir::max_operands];
          unsigned splats = 0;
          for (std::size_t a = 0; a < node.arity; ++a)
            in[a] = operand_of(kr, node, a, operand_slot(kr, m, a), first, n, tiles + a * stride, tile_of, splats);
          evaluate(node, in, splats, out, n);
        }
      }
    }
  }

  // Operand a of member `node` on [first, first + n), member m of the kernel or -1 (slot_of): one value
  // (its bit set in `splats`) where the member takes one and the operand is a literal or a one_value
  // member, else a tile as operand_tile gives it.
  const void* operand_of(const plan::kernel& kr, const ir::node& node, std::size_t a, int m, std::size_t first, std::size_t n,
                         void* spare, const void** tile_of, unsigned& splats) const {
    const int id = node.operand(a);
    const bool takes_one_value = node.prim->evaluate_splat != nullptr;
    if (m >= 0) {
      if (takes_one_value && form_of(kr, m) == member_form::one_value) splats |= 1u << a;
      return tile_of[m];
    }
    if (const ir::node* lit = takes_one_value ? literal_behind(p_, id) : nullptr) {
      splats |= 1u << a;
      splat(*lit, nd(id).dtype, 1, spare);
      return spare;
    }
    return outside_tile(id, nd(id).dtype, first, n, spare);
  }

  static void evaluate(const ir::node& node, const void* const* in, unsigned splats, void* out, std::size_t n) {
    if (node.prim->evaluate_splat != nullptr) node.prim->evaluate_splat(node, in, splats, out, n);
    else node.prim->evaluate(node, in, out, n);
  }

  member_form form_of(const plan::kernel& kr, int m) const { return form_[kr.first_member + m]; }

  // A pad member (the only layout primitive a loop or row kernel takes: plan.hpp's is_pad) on [first, first + n).
  void pad_into(const ir::node& pad, std::size_t first, std::size_t n, void* out) const {
    std::uint32_t fill_bits = 0;
    if (const ir::node* lit = literal_behind(p_, pad.operand(1))) splat(*lit, pad.dtype, 1, &fill_bits);
    else load_tile(pad.dtype, storage(pad.operand(1)), 1, &fill_bits);
    gather_pad(pad, nd(pad.operand(0)), storage(pad.operand(0)), fill_bits, first, n, out);
  }

  // The one value of a one_value broadcast: its literal's, or its one-element operand's, as a tile holds it.
  void one_value_into(const ir::node& b, void* out) const {
    const int source = b.operand(0);
    if (const ir::node* lit = literal_behind(p_, source)) splat(*lit, b.dtype, 1, out);
    else load_tile(b.dtype, storage(source), 1, out);
  }

  // A tile of node id's values on [first, first + n): a member's tile, the storage itself when no
  // conversion is needed, or a copy into `spare`.
  const void* operand_tile(const plan::kernel& kr, int id, ir::dtype_code dtype, std::size_t first, std::size_t n, void* spare,
                           const void** tile_of) const {
    const int m = slot_of(kr, id);
    return m >= 0 ? tile_of[m] : outside_tile(id, dtype, first, n, spare);
  }

  // The same for a value no member of the kernel computes.
  const void* outside_tile(int id, ir::dtype_code dtype, std::size_t first, std::size_t n, void* spare) const {
    const ir::node& operand = nd(id);
    if (const ir::node* lit = literal_behind(p_, id)) {
      splat(*lit, dtype, n, spare);
      return spare;
    }
    if (operand.prim->kind == ir::prim_kind::generator && p_.kernel_of[static_cast<std::size_t>(id)] < 0) {
      operand.prim->generate(operand, first, n, spare);
      return spare;
    }
    if (operand.prim->kind == ir::prim_kind::broadcast &&
        plan::is_broadcast_view(operand, p_.kernel_of[static_cast<std::size_t>(id)], nd(operand.operand(0))))
      return stored_broadcast(operand, first, n, spare);
    const auto* base = static_cast<const unsigned char*>(storage(id));
    if (operand.dtype != ir::dtype_code::bf16) return base + first * ir::bytes_of(operand.dtype);
    load_tile(operand.dtype, base + first * 2, n, spare);
    return spare;
  }

  // Broadcast b's elements [first, first + n): where its tile lies, `out` or a run of its operand read in
  // place.
  const void* broadcast_into(const plan::kernel& kr, const ir::node& b, std::size_t first, std::size_t n, void* out,
                             const void** tile_of) const {
    const int source = b.operand(0);
    const ir::node& operand = nd(source);
    const int m = slot_of(kr, source);
    if (m >= 0) {
      // A member of this loop, contraction or column kernel has the kernel's element count, as the
      // broadcast does: the broadcast only adds axes of size 1 (a per-row value reshaped to [rows, 1]),
      // so the elements are the same in the same order. (Row kernels spread per-row values in
      // broadcast_rows.)
      std::memcpy(out, tile_of[m], n * ir::tile_bytes(b.dtype));
    } else if (const ir::node* lit = literal_behind(p_, source)) {
      splat(*lit, b.dtype, n, out);
    } else if (operand.prim->kind == ir::prim_kind::generator && p_.kernel_of[static_cast<std::size_t>(source)] < 0) {
      broadcast_generated(b, operand, first, n, out);
    } else {
      return stored_broadcast(b, first, n, out);
    }
    return out;
  }

  // Broadcast b's elements [first, first + n) from its stored operand: the run they are read in place where
  // they are one, else gathered into `out`.
  const void* stored_broadcast(const ir::node& b, std::size_t first, std::size_t n, void* out) const {
    const ir::node& operand = nd(b.operand(0));
    const void* from = storage(b.operand(0));
    if (const void* in_place = broadcast_in_place(b, operand, from, first, n)) return in_place;
    gather_broadcast(b, operand, from, first, n, out);
    return out;
  }

  // A broadcast of an iota that no kernel stores (vmap leaves an iota unbatched under a batched broadcast,
  // as in a vmapped random draw): its elements are computed where they are read. Where the iota is the
  // result's trailing dims, only the tile's runs of it; otherwise the whole iota, stored, then gathered.
  static void broadcast_generated(const ir::node& b, const ir::node& operand, std::size_t first, std::size_t n, void* out) {
    const std::size_t osize = operand.shape.size(), r = operand.shape.rank;
    bool suffix = operand.dtype != ir::dtype_code::bf16 && operand.dtype != ir::dtype_code::pred;
    for (std::size_t i = 0; i < r; ++i) {
      const auto axis = static_cast<std::size_t>(b.attr.ints[i]);
      suffix = suffix && axis == b.shape.rank - r + i && operand.shape.d[i] == b.shape.d[axis];
    }
    auto* dst = static_cast<unsigned char*>(out);
    if (suffix) {
      for (std::size_t i = 0; i < n;) {
        const std::size_t at = (first + i) % osize;
        const std::size_t run = std::min(n - i, osize - at);
        operand.prim->generate(operand, at, run, dst + i * ir::tile_bytes(operand.dtype));
        i += run;
      }
      return;
    }
    thread_local std::vector<unsigned char> tile, stored;
    tile.resize(osize * ir::tile_bytes(operand.dtype));
    stored.resize(osize * ir::bytes_of(operand.dtype));
    operand.prim->generate(operand, 0, osize, tile.data());
    store_tile(operand.dtype, tile.data(), osize, stored.data());
    gather_broadcast(b, operand, stored.data(), first, n, out);
  }

  void store_root(const plan::kernel& kr, std::size_t first, std::size_t n, const void** tile_of) const {
    const int m = slot_of(kr, kr.root);
    const ir::node& root = nd(kr.root);
    void* to = static_cast<unsigned char*>(storage(kr.root)) + first * ir::bytes_of(root.dtype);
    if (tile_of[m] != to) store_tile(root.dtype, tile_of[m], n, to);
  }

  // The bytes kernel kr stores: its root's and its other stored members'.
  std::size_t stored_bytes(const plan::kernel& kr) const {
    std::size_t bytes = p_.bytes(kr.root);
    if (kr.stores_members)
      for (int m = 0; m < kr.member_count; ++m)
        if (const int id = p_.members[static_cast<std::size_t>(kr.first_member + m)]; plan::stored_member(p_, kr, id)) bytes += p_.bytes(id);
    return bytes;
  }

  // The stored members (bit m for member m < 64; not bf16, whose tile holds f32) that can be computed
  // straight into their storage: those whose storage no later member reads as an operand from outside the
  // kernel.
  // A donated parameter's buffer that a result takes is one such operand (Adam's update reading m after
  // the new m is computed): that result is stored from its tile once the tile is done (store_members).
  std::uint64_t direct_members(const plan::kernel& kr) const {
    std::uint64_t direct = 0;
    for (int m = 0; m < kr.member_count && m < 64; ++m) {
      const int id = p_.members[static_cast<std::size_t>(kr.first_member + m)];
      if (!plan::stored_member(p_, kr, id) || nd(id).dtype == ir::dtype_code::bf16 || nd(id).prim->kind != ir::prim_kind::elementwise)
        continue;
      const void* to = storage(id);
      bool read_later = false;
      for (int j = m + 1; j < kr.member_count && !read_later; ++j) {
        const ir::node& later = nd(p_.members[static_cast<std::size_t>(kr.first_member + j)]);
        for (std::size_t a = 0; a < later.arity; ++a)
          if (const int o = later.operand(a); operand_slot(kr, j, a) < 0 && p_.materialized[static_cast<std::size_t>(o)] && storage(o) == to)
            read_later = true;
      }
      if (!read_later) direct |= std::uint64_t{1} << m;
    }
    return direct;
  }

  // A loop's stored members besides its root, once every member of the tile is computed: a result
  // written into a donated parameter's buffer must not change what a later member reads there.
  void store_members(const plan::kernel& kr, std::size_t first, std::size_t n, const void** tile_of) const {
    for (int m = 0; m < kr.member_count; ++m) {
      const int id = p_.members[static_cast<std::size_t>(kr.first_member + m)];
      if (!plan::stored_member(p_, kr, id)) continue;
      const ir::node& node = nd(id);
      void* to = static_cast<unsigned char*>(storage(id)) + first * ir::bytes_of(node.dtype);
      if (tile_of[m] != to) store_tile(node.dtype, tile_of[m], n, to);
    }
  }

  // Each thread's scratch: the member tiles' pointers, then the tiles (and GEMM panels).
  unsigned char* thread_scratch(std::size_t t) const { return scratch_ + t * scratch_per_thread_ + pointers_per_thread_; }
  const void** tile_pointers(std::size_t t) const { return reinterpret_cast<const void**>(scratch_ + t * scratch_per_thread_); }

  // Kernels [begin, end) in order; a control kernel runs its regions' ranges, which follow it, and the
  // walk continues after them.
  void run_range(int begin, int end, thread_pool& pool) {
    for (int k = begin; k < end;) {
      const plan::kernel& kr = p_.kernels[static_cast<std::size_t>(k)];
      if (kr.kind != plan::kernel_kind::control) {
        run_kernel(kr, k, pool);
        ++k;
        continue;
      }
      const ir::frozen_construct& fc = p_.program.construct(kr.construct);
      if (fc.kind == ir::construct_kind::scan) run_scan(fc, pool);
      else run_switch(fc, pool);
      k = p_.region_end[static_cast<std::size_t>(fc.first_region + fc.region_count - 1)];
    }
  }

  // Copies value `from` (a slice of it, from byte from_offset, when it is stacked) into `to` (or a slice).
  void copy_value(int from, int to, std::size_t from_offset = 0, std::size_t to_offset = 0, std::size_t bytes = 0) const {
    const auto* src = static_cast<const unsigned char*>(storage(from)) + from_offset;
    auto* dst = static_cast<unsigned char*>(storage(to)) + to_offset;
    if (src != dst) std::memcpy(dst, src, bytes != 0 ? bytes : p_.bytes(to));
  }
  bool materialized(int id) const { return p_.materialized[static_cast<std::size_t>(id)]; }

  // scan: carries start as the inputs; each step copies x slices into the body's parameters, runs the
  // body's kernels, writes the ys into the stacked outputs and copies the carries back (through a staging
  // buffer when a new carry is an old one, as in a swap).
  void run_scan(const ir::frozen_construct& fc, thread_pool& pool) {
    const auto& prog = p_.program;
    const ir::frozen_region& r = prog.region(fc.first_region);
    auto input = [&](int i) { return prog.region_int(fc.inputs + i); };
    auto param = [&](int i) { return prog.region_int(r.params + i); };
    auto result = [&](int i) { return prog.region_int(r.results + i); };
    auto output = [&](int i) { return prog.region_int(fc.outputs + i); };
    const int nc = fc.carries, nx = fc.input_count - nc;
    for (int c = 0; c < nc; ++c) copy_value(input(c), param(c));
    bool staged = false;
    std::size_t carry_bytes = 0;
    for (int c = 0; c < nc; ++c) {
      staged = staged || nd(result(c)).prim->kind == ir::prim_kind::region_parameter;
      carry_bytes += p_.bytes(param(c));
    }
    std::vector<unsigned char> staging(staged ? carry_bytes : 0);
    const int begin = p_.region_begin[static_cast<std::size_t>(fc.first_region)];
    const int end = p_.region_end[static_cast<std::size_t>(fc.first_region)];
    for (int step = 0; step < fc.length; ++step) {
      const auto i = static_cast<std::size_t>(fc.reverse ? fc.length - 1 - step : step);
      for (int j = 0; j < nx; ++j)
        if (materialized(param(nc + j))) copy_value(input(nc + j), param(nc + j), i * p_.bytes(param(nc + j)));
      run_range(begin, end, pool);
      for (int o = nc; o < fc.output_count; ++o)
        if (materialized(output(o))) copy_value(result(o), output(o), 0, i * p_.bytes(result(o)), p_.bytes(result(o)));
      if (staged) {
        std::size_t at = 0;
        for (int c = 0; c < nc; ++c) {
          std::memcpy(staging.data() + at, storage(result(c)), p_.bytes(param(c)));
          at += p_.bytes(param(c));
        }
        at = 0;
        for (int c = 0; c < nc; ++c) {
          std::memcpy(storage(param(c)), staging.data() + at, p_.bytes(param(c)));
          at += p_.bytes(param(c));
        }
      } else {
        for (int c = 0; c < nc; ++c) copy_value(result(c), param(c));
      }
    }
    for (int c = 0; c < nc; ++c)
      if (materialized(output(c))) copy_value(param(c), output(c));
  }

  // switch: the index (s32, u32 or pred), clamped into range, chooses the region that runs.
  void run_switch(const ir::frozen_construct& fc, thread_pool& pool) {
    const auto& prog = p_.program;
    const ir::node& index = nd(fc.index);
    const void* at = storage(fc.index);
    std::int64_t b = 0;
    if (index.dtype == ir::dtype_code::pred) b = *static_cast<const bool*>(at) ? 1 : 0;
    else if (index.dtype == ir::dtype_code::u32) b = *static_cast<const std::uint32_t*>(at);
    else b = *static_cast<const std::int32_t*>(at);
    b = std::clamp<std::int64_t>(b, 0, fc.region_count - 1);
    const int region = fc.first_region + static_cast<int>(b);
    const ir::frozen_region& r = prog.region(region);
    for (int i = 0; i < r.param_count; ++i)
      if (materialized(prog.region_int(r.params + i))) copy_value(prog.region_int(fc.inputs + i), prog.region_int(r.params + i));
    run_range(p_.region_begin[static_cast<std::size_t>(region)], p_.region_end[static_cast<std::size_t>(region)], pool);
    for (int o = 0; o < fc.output_count; ++o)
      if (materialized(prog.region_int(fc.outputs + o))) copy_value(prog.region_int(r.results + o), prog.region_int(fc.outputs + o));
  }

  void run_kernel(const plan::kernel& kr, int index, thread_pool& pool) {
    const kernel_observer observe = kernel_observer_slot().load(std::memory_order_relaxed);
    if (observe != nullptr) {  // one load and a branch when nobody observes
      const std::int64_t start = steady_ns();
      dispatch(kr, index, pool);
      observe({.kind = plan::name_of(kr.kind), .index = index, .start_ns = start, .end_ns = steady_ns(),
               .bytes = static_cast<double>(stored_bytes(kr)),
               .plan = &p_, .result = result_of(kr)});
      return;
    }
    dispatch(kr, index, pool);
  }

  void dispatch(const plan::kernel& kr, int index, thread_pool& pool) {
    const kernel_grid& g = (*grids_)[static_cast<std::size_t>(index)];
    const block_observer blocks = block_observer_slot().load(std::memory_order_relaxed);
    switch (kr.kind) {
      case plan::kernel_kind::loop: run_loop(kr, g, {blocks, index}, pool); break;
      case plan::kernel_kind::row: run_row(kr, g, {blocks, index}, pool); break;
      case plan::kernel_kind::column: run_column(kr, g, {blocks, index}, pool); break;
      case plan::kernel_kind::contraction:
      case plan::kernel_kind::layout:
        if (g.by_items) run_items(kr, g, {blocks, index}, pool);
        else if (kr.kind == plan::kernel_kind::contraction) run_contraction(kr, g, {blocks, index}, pool);
        else run_whole(kr);
        break;
      case plan::kernel_kind::generic: run_whole(kr); break;
      case plan::kernel_kind::copy: run_copy(kr); break;
      case plan::kernel_kind::control: break;  // run by run_range
    }
  }

  // Tells the block observer, if any, that a block ran.
  struct block_report {
    block_observer observe = nullptr;
    int kernel = 0;
    void operator()(std::size_t block, std::size_t blocks) const {
      if (observe != nullptr) observe(kernel, block, blocks);
    }
  };

  void run_loop(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
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

  // A product's epilogue on flat range [first, first + count) of its result, whose values `given` holds
  // as f32: the members computed tile by tile, the root and the other stored members stored.
  void run_epilogue(const plan::kernel& kr, std::size_t first, std::size_t count, const float* given, unsigned char* tiles_mem,
                    const void** tile_of, std::uint64_t direct) const {
    for (std::size_t off = 0; off < count; off += tile_elements) {
      const std::size_t n = std::min(tile_elements, count - off);
      eval_members(kr, first + off, n, tiles_mem, tile_elements * 4, tile_of, given + off, direct);
      store_root(kr, first + off, n, tile_of);
      if (kr.stores_members) store_members(kr, first + off, n, tile_of);
    }
  }

  // Asks for elements [first, first + n) of kernel g's streamed values (derived_plan::streamed) to be
  // brought into L2 (prefetcht1; into L1 they evicted the tile being computed). On x86 the instruction is
  // written out: g++ 12 -O2 dropped __builtin_prefetch (and _mm_prefetch) from this loop, leaving no
  // prefetch in the executor at all.
  void prefetch_streams(const kernel_grid& g, std::size_t first, std::size_t n) const {
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
  void run_row(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
    pool.parallel_for(g.blocks, 1, [&](std::size_t begin, std::size_t end, std::size_t t) {
      for (std::size_t block = begin; block < end; ++block) {
        const std::size_t first_row = block * g.rows;
        run_rows(kr, g, first_row, std::min(kr.outer, first_row + g.rows), t);
        report(block, g.blocks);
      }
    });
  }

  // Rows [begin, end) of a row kernel, rows_per_pass(kr) at a time, on thread t.
  void run_rows(const plan::kernel& kr, const kernel_grid& g, std::size_t begin, std::size_t end, std::size_t t) const {
    const std::size_t inner = kr.inner;
    const std::size_t per_pass = rows_per_pass(kr);
    const std::size_t stride = (per_pass * inner + 16) * 4;
    unsigned char* tiles = thread_scratch(t);
    const void** tile_of = tile_pointers(t);
    const bool softmax = g.softmax.found() && softmax_rows_applies();
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
  int run_softmax(const plan::kernel& kr, const softmax_span& span, std::size_t o, std::size_t rows, unsigned char* tiles,
                  std::size_t stride, const void** tile_of) const {
    const int* member = p_.members + kr.first_member;
    const int y = member[span.last];
    void* out = y == kr.root && span.last + 1 == kr.member_count
                    ? static_cast<unsigned char*>(storage(y)) + o * kr.inner * sizeof(float)
                    : member_tile(kr, span.last, tiles, stride);
    const auto* x = static_cast<const float*>(operand_tile(kr, span.x, ir::dtype_code::f32, o * kr.inner, rows * kr.inner, tiles, tile_of));
    softmax_rows(nd(member[span.first]), nd(member[span.sum]), x, static_cast<float*>(out), rows, kr.inner);
    tile_of[span.last] = out;
    return span.last;
  }

  // Member `node` over `rows` whole rows where the operands with a bit in `per_row` hold one value per
  // row: row by row, each such value passed as one value.
  void evaluate_by_rows(const ir::node& node, const void* const* in, unsigned splats, unsigned per_row, std::size_t rows,
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
  const void* broadcast_rows(const plan::kernel& kr, const ir::node& b, bool full, std::size_t first, std::size_t rows,
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
  void run_column(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
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
  void run_columns(const plan::kernel& kr, std::size_t block_first, std::size_t block_count, std::size_t t) const {
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

  // A kernel of work items (convolutions, pooling, large transposes and slices): the primitive runs each
  // item the plan lists on the thread that takes it, with that thread's scratch. A contraction's items
  // hand their result blocks to the fused epilogue, run on the block by the same thread. Items that sum
  // partials are dealt out in fixed shares, one accumulator per share, added in share order at the end:
  // the sum does not depend on which thread was free first, so a step gives the same bits every time.
  void run_items(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
    const ir::node& n = nd(kr.kind == plan::kernel_kind::contraction ? kr.dot : kr.root);
    const ir::node* operands[ir::max_operands];
    const void* in[ir::max_operands];
    for (std::size_t a = 0; a < n.arity; ++a) {
      operands[a] = &nd(n.operand(a));
      in[a] = storage(n.operand(a));
    }
    const std::size_t own = ir::aligned_floats(g.items.scratch_floats), result = n.shape.size();
    const std::size_t tiles_offset = item_scratch_bytes(g.items, n);
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
    if (g.items.sums_partials)
      for (std::size_t t = 0; t < threads_; ++t) std::fill_n(scratch(t) + own, result, 0.0f);
    auto args_for = [&](std::size_t t, std::size_t share) {
      return ir::item_args{.n = &n,
                           .operands = operands,
                           .in = in,
                           .out = storage(kr.root),
                           .sink = kr.kind == plan::kernel_kind::contraction ? &sink : nullptr,
                           .scratch = scratch(t),
                           .partial = scratch(share) + own,
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
    // Share s (one per thread of the pool) is items [s * items / threads, (s + 1) * items / threads),
    // summed into the accumulator in thread s's scratch by whichever thread runs it.
    pool.parallel_for(threads_, 1, [&](std::size_t begin, std::size_t end, std::size_t t) {
      for (std::size_t share = begin; share < end; ++share) {
        const ir::item_args args = args_for(t, share);
        for (std::size_t item = share * g.blocks / threads_; item < (share + 1) * g.blocks / threads_; ++item) {
          n.prim->run_item(args, g.items, item);
          report(item, g.blocks);
        }
      }
    });
    float* total = scratch(0) + own;  // shares of no item hold zeros
    for (std::size_t t = 1; t < threads_; ++t) {
      const float* other = scratch(t) + own;
      for (std::size_t i = 0; i < result; ++i) total[i] += other[i];
    }
    store_tile(n.dtype, total, result, storage(kr.root));
  }

  // A GEMM and its epilogue over the plan's (batch, M / bm, N / bn) blocks: the kernel multiplies each
  // C block with the plan's blocks as its MC, NC and KC, and the epilogue runs on the block while it is
  // in cache, on the thread that made it. Where several blocks of rows read B, the threads first pack
  // B whole into the shared region, a range of panels each, and every block then reads it from there.
  void run_contraction(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const {
    const ir::node& dot = nd(kr.dot);
    const ir::node& lhs = nd(dot.operand(0));
    const ir::node& rhs = nd(dot.operand(1));
    const prim::dot_layout d = prim::layout_of(dot, lhs, rhs);
    const std::size_t lhs_elem = ir::bytes_of(lhs.dtype), rhs_elem = ir::bytes_of(rhs.dtype);
    const auto* lbase = static_cast<const unsigned char*>(storage(dot.operand(0)));
    const auto* rbase = static_cast<const unsigned char*>(storage(dot.operand(1)));
    kernels::gemm_blocking blocks = kernels::blocking_of();
    blocks.mc = g.bm;
    blocks.nc = g.bn;
    blocks.kc = g.bk;
    const kernels::gemm_blocked_fn gemm = kernels::select_blocked_gemm();
    kernels::packed_b_layout packed{};
    if (packs_b_whole(g, d.k * d.n, threads_) && !kernels::hwy_gemm_reads_b_in_place(d.rhs, g.bm, g.bn))
      packed = kernels::hwy_gemm_packed_b_layout(d.lhs, d.rhs, d.n, d.k, blocks);
    if (packed.panels > 0) {
      // Panels grouped so that a thread packs a few whole ones at a time, batch element by element.
      const std::size_t grain = std::max<std::size_t>(1, packed.panels / (2 * threads_));
      pool.parallel_for(g.batch * packed.panels, grain, [&](std::size_t begin, std::size_t end, std::size_t) {
        while (begin < end) {
          const std::size_t b = begin / packed.panels, first = begin % packed.panels;
          const std::size_t last = std::min(packed.panels, first + (end - begin));
          kernels::matrix_view rhs_b = d.rhs;
          rhs_b.data = rbase + b * d.rhs_batch_stride * rhs_elem;
          kernels::hwy_gemm_pack_b(rhs_b, d.n, d.k, blocks, packed, first, last, shared_ + b * packed.floats());
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
      prim::dot_layout local = d;
      for (std::size_t block = begin; block < end; ++block) {
        const std::size_t b = block / (g.m_blocks * g.n_blocks);
        const std::size_t i = block / g.n_blocks % g.m_blocks, j = block % g.n_blocks;
        const std::size_t m0 = i * g.bm, m1 = std::min(d.m, m0 + g.bm);
        const std::size_t n0 = j * g.bn, width = std::min(d.n, n0 + g.bn) - n0;
        local.lhs.data = lbase + b * d.lhs_batch_stride * lhs_elem;
        local.rhs.data = rbase + (b * d.rhs_batch_stride + n0 * d.rhs.col_stride) * rhs_elem;
        const std::size_t base = (b * d.m + m0) * d.n + n0;
        float* const c = direct != nullptr ? direct + base : panel;
        const std::size_t ldc = direct != nullptr ? d.n : width;
        if (packed.panels > 0)
          kernels::hwy_gemm_rows_packed(local.lhs, shared_ + b * packed.floats() + n0 / packed.nr * packed.panel_floats,
                                        packed, m0, m1, width, d.k, c, ldc, gemm_mem, blocks);
        else
          gemm(local.lhs, local.rhs, m0, m1, width, d.k, c, ldc, gemm_mem, blocks);
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

  void run_whole(const plan::kernel& kr) const {
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
  void run_generic_reduce(const ir::node& n, const ir::node& operand, const void* in, void* out) const {
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

  void run_copy(const plan::kernel& kr) const {
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

  const plan::plan_view& p_;
  const void* const* parameters_;
  void* const* outputs_;
  derived_plan local_derived_;  // for a plan without a slot (plan_view::derived)
  const std::vector<kernel_grid>* grids_ = nullptr;
  const std::uint16_t* tile_slot_ = nullptr;  // derived_plan::tile_slot
  const member_form* form_ = nullptr;         // derived_plan::form
  const std::int16_t* operand_slot_ = nullptr;  // derived_plan::operand_slot
  const std::uint8_t* whole_rows_ = nullptr;    // derived_plan::whole_rows
  const int* streamed_ = nullptr;             // derived_plan::streamed
  unsigned char* arena_ = nullptr;
  unsigned char* scratch_ = nullptr;
  float* shared_ = nullptr;  // derived_plan::shared_bytes, 64-byte aligned, after every thread's scratch
  std::size_t scratch_per_thread_ = 0, pointers_per_thread_ = 0, threads_ = 1;
};

void execute(const plan::plan_view& plan, const void* const* parameters, void* const* outputs) {
  executor(plan, parameters, outputs).run();
}

namespace {

// The device threads past the caller's, started when a mesh first needs them and kept (each keeps its
// arena). One mesh runs at a time.
class device_threads {
 public:
  static device_threads& get() {
    static device_threads threads;
    return threads;
  }

  void run(const std::size_t* sizes, std::size_t rank, std::size_t process_axes, void (*body)(void*, std::size_t), void* context) {
    std::lock_guard call(call_mutex_);
    kernels::communicator comm(sizes, rank, process_axes);
    const std::size_t devices = comm.local_devices();
    while (workers_.size() + 1 < devices) {
      const std::size_t device = workers_.size() + 1;
      workers_.emplace_back([this, device] { work(device); });
    }
    {
      std::lock_guard lock(mutex_);
      body_ = body;
      context_ = context;
      comm_ = &comm;
      devices_ = devices;
      pending_ = devices - 1;
      ++generation_;
    }
    wake_.notify_all();
    run_as(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    comm_ = nullptr;
  }

  ~device_threads() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

 private:
  // `local`: the device's place among this process's devices.
  void run_as(std::size_t local) {
    kernels::device_context& d = kernels::this_device();
    bool& serial = thread_pool::serial_here();
    const bool was_serial = serial;
    const std::size_t device = comm_->first_local() + local;
    d = {comm_, device};
    serial = devices_ > 1;
    body_(context_, device);
    serial = was_serial;
    d = {};
  }

  void work(std::size_t device) {
    std::size_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (device >= devices_) continue;
      }
      run_as(device);
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex call_mutex_, mutex_;
  std::condition_variable wake_, done_;
  void (*body_)(void*, std::size_t) = nullptr;
  void* context_ = nullptr;
  kernels::communicator* comm_ = nullptr;
  std::size_t devices_ = 0, pending_ = 0, generation_ = 0;
  bool stopping_ = false;
};

}  // namespace

void on_devices(const std::size_t* axis_sizes, std::size_t rank, std::size_t process_axes, void (*body)(void*, std::size_t),
                void* context) {
  device_threads::get().run(axis_sizes, rank, process_axes, body, context);
}

}  // namespace tessel::run

#endif  // TESSEL_RUN_IMPLEMENTATION_HPP
