#pragma once
// What the executor derives from a plan for this machine, once per plan: each kernel's grid, how each
// member holds its values and which tile slot it takes, the values a kernel streams, and the scratch a
// thread needs.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessel/kernels/gemm.hpp"
#include "tessel/plan/plan.hpp"
#include "tessel/run/grid.hpp"
#include "tessel/prim/family/softmax_rows.hpp"
#include "tessel/target/host.hpp"

namespace tessel::run {

// A work item's scratch in a thread's region: the primitive's floats, 64-byte aligned; an epilogue's tiles
// come after.
inline std::size_t item_scratch_bytes(const ir::item_plan& items) { return ir::aligned_floats(items.scratch_floats) * 4; }

// The accumulators of items that sum partials (ir::item_plan), one a share, in the region the threads share.
inline std::size_t partial_sums_bytes(const ir::item_plan& items, const ir::node& n) {
  return items.sums_partials ? ir::partial_shares * ir::aligned_floats(n.shape.size()) * 4 : 0;
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
  std::size_t shared_bytes = 0;  // one region all threads share: the largest contraction's B packed whole, or partial sums
};

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

// The softmax row kernel kr holds, if any, that the routine can run (prim/family/softmax_rows.hpp finds the
// pattern): x's tile holds its rows whole (a member broadcast may hold one value per row; `form` is the
// members'), and nothing after the softmax reads, nor the kernel stores, anything of it but y.
inline prim::softmax_span softmax_of(const plan::plan_view& p, const plan::kernel& kr, const member_form* form) {
  const int* member = p.members + kr.first_member;
  auto fits = [&](const prim::softmax_span& span) {
    const int x = member_index(p, kr, span.x);
    if (x >= 0 && form[x] != member_form::tile) return false;
    for (int k = span.first; k < span.last; ++k) {  // r1 .. b2 read only by each other, neither stored nor the root
      if (member[k] == kr.root || plan::stored_member(p, kr, member[k])) return false;
      for (int later = span.last + 1; later < kr.member_count; ++later) {
        const ir::node& n = p.node(member[later]);
        for (std::size_t a = 0; a < n.arity; ++a)
          if (n.operand(a) == member[k]) return false;
      }
    }
    return true;
  };
  return prim::find_softmax(kr.member_count, [&](int j) { return member[j]; }, [&](int id) -> const ir::node& { return p.node(id); },
                            kr.row_shape, kr.inner, fits);
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
    if (kr.kind == plan::kernel_kind::row) g.softmax = softmax_of(p, kr, d.form.data() + kr.first_member);
    g.first_stream = d.streamed.size();
    streamed_values(p, kr, d.streamed);
    g.streams = d.streamed.size() - g.first_stream;
    // The spare tiles operands from outside the kernel are converted into, then the members' slots.
    const std::size_t members = assign_tile_slots(p, kr, d.form.data() + kr.first_member, d.tile_slot.data() + kr.first_member) + ir::max_operands;
    std::size_t need = members * tile_elements * 4 + tile_elements * 4;
    if (kr.kind == plan::kernel_kind::row) need = members * (rows_per_pass(kr) * kr.inner + 16) * 4;
    if (kr.kind == plan::kernel_kind::column) need = (members + 1) * tile_elements * 4;  // + the accumulator
    if (plan::item_node(p, k) >= 0) {  // the items' scratch, then the epilogue's tiles
      need += item_scratch_bytes(g.items);
      d.shared_bytes = std::max(d.shared_bytes, partial_sums_bytes(g.items, p.node(plan::item_node(p, k))));
    } else if (kr.kind == plan::kernel_kind::contraction)
      need += kernels::gemm_scratch_floats() * 4 + g.bm * g.bn * 4;  // the GEMM's panels, the C block
    d.scratch_bytes = std::max(d.scratch_bytes, (need + 63) / 64 * 64);
    const ir::node* dot = kr.kind == plan::kernel_kind::contraction ? &p.node(kr.dot) : nullptr;
    const ir::gemm_extent l = dot != nullptr ? dot->prim->extent(*dot, p.node(dot->operand(0)), p.node(dot->operand(1))) : ir::gemm_extent{};
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

}  // namespace tessel::run
