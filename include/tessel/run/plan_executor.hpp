#pragma once
// The host executor's state for one call of a plan: the kernels walked in order (scan and switch run
// their regions), a kernel's members evaluated tile by tile (a contraction's epilogue too), and its
// stores. The kinds of kernel it runs are defined in run/loops.hpp, run/items.hpp and run/contraction.hpp.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tessel/kernels/thread_pool.hpp"
#include "tessel/plan/plan.hpp"
#include "tessel/run/arena.hpp"
#include "tessel/run/derived_plan.hpp"
#include "tessel/run/executor.hpp"
#include "tessel/run/grid.hpp"
#include "tessel/prim/family/softmax_rows.hpp"
#include "tessel/run/tiles.hpp"

namespace tessel::run {

using kernels::thread_pool;

inline std::int64_t steady_ns() {  // kernel_report's clock
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
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

  // run/loops.hpp defines these.
  void run_loop(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const;
  void prefetch_streams(const kernel_grid& g, std::size_t first, std::size_t n) const;
  void run_row(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const;
  void run_rows(const plan::kernel& kr, const kernel_grid& g, std::size_t begin, std::size_t end, std::size_t t) const;
  int run_softmax(const plan::kernel& kr, const prim::softmax_span& span, std::size_t o, std::size_t rows, unsigned char* tiles,
                  std::size_t stride, const void** tile_of) const;
  void evaluate_by_rows(const ir::node& node, const void* const* in, unsigned splats, unsigned per_row, std::size_t rows,
                        std::size_t inner, void* out) const;
  const void* broadcast_rows(const plan::kernel& kr, const ir::node& b, bool full, std::size_t first, std::size_t rows,
                             std::size_t n, void* out, const void** tile_of) const;
  void run_column(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const;
  void run_columns(const plan::kernel& kr, std::size_t block_first, std::size_t block_count, std::size_t t) const;
  void run_whole(const plan::kernel& kr) const;
  void run_generic_reduce(const ir::node& n, const ir::node& operand, const void* in, void* out) const;
  void run_copy(const plan::kernel& kr) const;

  // run/items.hpp defines it.
  void run_items(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const;

  // run/contraction.hpp defines it.
  void run_contraction(const plan::kernel& kr, const kernel_grid& g, block_report report, thread_pool& pool) const;

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

}  // namespace tessel::run
