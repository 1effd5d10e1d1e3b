#pragma once
// The planner: from a traced program to kernels, buffers and their lifetimes, all at compile time.
//
// Fusion (like XLA's loop and input fusion): nodes are visited from the outputs back; a node joins the
// kernel of its consumers when all of them are in one kernel and the kernel's loop can compute it:
//   loop         elementwise work over one flat index space (reshapes are free, broadcasts are loads)
//   row          a loop over outer indices whose body holds whole rows: reductions over trailing axes
//                and their consumers (softmax, log_softmax, layer norm: one pass over the data)
//   column       a reduction over leading axes with its elementwise producers (bias gradients)
//   contraction  dot_general with its elementwise epilogue, applied to each block of rows while hot
//   layout / generic  one primitive on whole buffers (transpose, argmax, other reductions)
// Every other node is materialised: parameters and outputs use the caller's memory; the rest get a slot
// in one arena, assigned first-fit over their lifetimes, so the peak is a constant of the plan. A reshape
// of a parameter that must be materialised (a scan's xs, a GEMM operand) is the parameter's own bytes
// (row-major: same order), so it takes no buffer and no kernel.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tessel/ir/program.hpp"
#include "tessel/ir/region.hpp"

namespace tessel::plan {

// control: a scan or switch (ir/graph.hpp); its regions' kernels follow it, each region a contiguous range
// (plan.region_begin/end) that the executor runs once per step (scan) or for the chosen branch (switch).
enum class kernel_kind : std::uint8_t { loop, row, column, contraction, layout, generic, copy, control };

constexpr std::string_view name_of(kernel_kind k) {
  constexpr std::string_view names[] = {"loop", "row", "column", "contraction", "layout", "generic", "copy", "control"};
  return names[static_cast<int>(k)];
}

struct kernel {
  kernel_kind kind = kernel_kind::loop;
  int root = -1;           // the node the kernel stores (its iteration space for loop kernels)
  int dot = -1;            // contraction: the dot_general node
  int first_member = 0;    // members (nodes computed inside, ascending) are plan.members[first, first + count)
  int member_count = 0;
  std::size_t outer = 1;   // row and column kernels: outer iterations and elements per row
  std::size_t inner = 1;
  ir::dims row_shape{};    // row kernels: the full (outer ++ inner) shape; column: the reduced operand's shape
  bool uniform = true;     // loop kernels: every member has the root's shape (not only its size) and reads
                           // its operands at the element it computes (no pad)
  int region = -1;         // the region whose kernel range holds this kernel (-1: the program's own)
  int construct = -1;      // control kernels: the construct they run
  bool stores_members = false;  // loop and contraction kernels: results of the program other than the
                                // root are members, stored too (stored_member)
};

// Whether member `id` of kernel kr is stored besides its root: a result of the program that only this
// loop reads (multi-output fusion, as XLA's): Adam's new moments, computed in the loop that updates the
// parameter from them, were each a loop of its own that the update read back. A product may then join
// the loop as a contraction's (the moments' gradient).
template <class P>
constexpr bool stored_member(const P& p, const kernel& kr, int id) {
  return kr.stores_members && id != kr.root && p.output_index[static_cast<std::size_t>(id)] >= 0;
}

inline constexpr std::size_t arena_alignment = 64;
inline constexpr std::size_t row_budget_elements = 16384;  // a row kernel keeps whole rows in L1/L2

template <std::size_t N, std::size_t Outputs>
struct plan {
  static constexpr std::size_t max_members = N;
  ir::program<N, Outputs> program{};
  std::array<kernel, N> kernels{};
  int kernel_count = 0;
  std::array<int, N> members{};
  std::array<int, N> kernel_of{};          // the kernel computing a node; -1 for parameters and literals
  std::array<bool, N> materialized{};      // has a buffer: parameter, output or arena slot
  std::array<std::int64_t, N> arena_offset{};  // -1 when not in the arena
  std::array<int, N> output_index{};       // first output slot a node is stored to, -1 if none
  std::array<int, N> last_reader{};        // the last kernel that reads a node's buffer
  std::array<int, N> alias_of{};           // a reshape stored in its operand's buffer: that operand; else -1
  std::array<int, ir::max_regions> region_begin{};  // each region's kernels: [region_begin, region_end)
  std::array<int, ir::max_regions> region_end{};
  std::size_t arena_bytes = 0;             // peak bytes of intermediate buffers
  std::size_t output_bytes = 0;
  std::size_t parameter_bytes = 0;

  constexpr const ir::node& node(int id) const { return program.nodes[static_cast<std::size_t>(id)]; }
  constexpr std::size_t bytes(int id) const { return node(id).shape.size() * ir::bytes_of(node(id).dtype); }
};

// Values so cheap that every kernel reading them computes them itself instead of reading a buffer:
// literals, their broadcasts, and iota.
template <std::size_t N, std::size_t O>
constexpr bool is_inline_constant(const ir::program<N, O>& p, int id) {
  const ir::node& n = p.nodes[static_cast<std::size_t>(id)];
  if (n.prim->kind == ir::prim_kind::literal || n.prim->kind == ir::prim_kind::generator) return true;
  return n.prim->kind == ir::prim_kind::broadcast && p.nodes[static_cast<std::size_t>(n.operands[0])].prim->kind == ir::prim_kind::literal;
}

// A broadcast that no kernel computes and that is not a literal's: its readers, all elementwise, gather
// it from its operand's buffer (the executor's outside_tile), as they would a broadcast among their
// members, instead of reading it stored whole. The attention bias [B, 1, T, T], an invariant of the scan
// over layers, is spread over heads so.
constexpr bool is_broadcast_view(const ir::node& n, int kernel, const ir::node& operand) {
  return n.prim->kind == ir::prim_kind::broadcast && kernel < 0 && operand.prim->kind != ir::prim_kind::literal;
}

namespace detail {

// checkpoint's and custom_vjp's marker (prim/remat.hpp, transform/custom_vjp.hpp): the identity on operand 0.
constexpr bool is_call_result(const ir::node& n) { return n.prim->name == "checkpoint" || n.prim->name == "custom_vjp_call"; }

// lax.pad, which a loop computes a tile at a time, reading its operand where it is stored (the executor's
// gather_pad): the transpose of a slice, as q, k and v's cotangents padded back to [B, T, 3D] and summed.
constexpr bool is_pad(const ir::node& n) { return n.prim->name == "pad"; }

constexpr bool is_trailing_split(const ir::dims& full, const ir::dims& outer) {
  if (outer.rank > full.rank) return false;
  for (std::size_t i = 0; i < outer.rank; ++i)
    if (full.d[i] != outer.d[i]) return false;
  return true;
}

// A reduction's axes are the trailing ones of its operand ([k, rank)).
constexpr bool reduces_trailing(const ir::node& r, const ir::node& operand) {
  const std::size_t k = operand.shape.rank - r.attr.count;
  for (std::size_t i = 0; i < r.attr.count; ++i)
    if (static_cast<std::size_t>(r.attr.ints[i]) != k + i) return false;
  return true;
}
constexpr bool reduces_leading(const ir::node& r) {
  for (std::size_t i = 0; i < r.attr.count; ++i)
    if (static_cast<std::size_t>(r.attr.ints[i]) != i) return false;
  return true;
}

template <std::size_t N, std::size_t O>
struct builder {
  const ir::program<N, O>& p;
  plan<N, O>& out;
  std::array<int, N> user_count{};  // users among live nodes
  std::array<bool, N> live{};
  std::array<int, N> common_kernel{};  // the kernel all users are in, -1 none yet, -2 several
  std::array<bool, N> is_output{};
  std::array<bool, N> whole_buffer_operand{};  // read by a kernel that needs a real buffer (layout, GEMM, ...)
  std::array<bool, N> read_elementwise{};      // every live reader is an elementwise node
  std::array<int, N> region_of{};              // the innermost region whose parameters a node depends on, or -1
  std::array<bool, ir::max_constructs> construct_live{};

  // Regions: each node's by the one rule (ir/region.hpp).
  constexpr int parent_of(int r) const { return ir::parent_region(p, r); }
  constexpr bool contains(int outer, int r) const { return ir::region_inside(p, r, outer); }  // -1 contains all
  constexpr void find_regions() { ir::assign_regions(p, 0, static_cast<int>(N), region_of); }
  // A node the executor copies whole (a construct's input, a body's result, a carry parameter).
  constexpr void keep(int id) {
    ++user_count[static_cast<std::size_t>(id)];
    whole_buffer_operand[static_cast<std::size_t>(id)] = true;
    common_kernel[static_cast<std::size_t>(id)] = -2;
  }
  // Control node `id` is live: its construct's inputs, the bodies' results and carries are used.
  constexpr void use_construct(int id) {
    const ir::node& n = nd(id);
    const int c = static_cast<int>(n.attr.ints[0]);
    const int o = static_cast<int>(n.attr.ints[1]);
    const ir::frozen_construct& fc = p.construct(c);
    for (int r = fc.first_region; r < fc.first_region + fc.region_count; ++r) keep(p.region_int(p.region(r).results + o));
    if (construct_live[static_cast<std::size_t>(c)]) return;
    construct_live[static_cast<std::size_t>(c)] = true;
    for (int i = 0; i < fc.input_count; ++i) keep(p.region_int(fc.inputs + i));
    if (fc.index >= 0) keep(fc.index);
    if (fc.kind == ir::construct_kind::scan)
      for (int k = 0; k < fc.carries; ++k) {
        const ir::frozen_region& r = p.region(fc.first_region);
        if (k != o) keep(p.region_int(r.results + k));
        live[static_cast<std::size_t>(p.region_int(r.params + k))] = true;
        keep(p.region_int(r.params + k));
      }
  }

  constexpr const ir::node& nd(int id) const { return p.nodes[static_cast<std::size_t>(id)]; }

  constexpr int new_kernel(kernel_kind kind, int root) {
    kernel k;
    k.kind = kind;
    k.root = root;
    k.region = region_of[static_cast<std::size_t>(root)];
    if (kind == kernel_kind::loop) k.row_shape = nd(root).shape;
    out.kernels[static_cast<std::size_t>(out.kernel_count)] = k;
    return out.kernel_count++;
  }

  // A loop takes elementwise work on one value per row of its shape (a log_softmax's log of the row sums,
  // which the loop's broadcast spreads) by becoming a row kernel over those rows, as a reduction that
  // joins it does (below): the reduction behind the value can then join too, and the rows are read once.
  // A log_softmax of 4096 x 1024 was four kernels, its shifted rows stored and read twice. Not for a
  // scalar (one row), nor for a loop holding a reshape: the executor's row kernels evaluate none (a loop
  // hands its reshape the operand's tile).
  constexpr bool becomes_rows(int id, kernel& k) const {
    const ir::node& n = nd(id);
    const ir::dims& full = nd(k.root).shape;
    const std::size_t size = n.shape.size();
    if (!k.uniform || k.stores_members || n.shape.rank == 0 || size >= full.size() || n.shape.rank >= full.rank ||
        !is_trailing_split(full, n.shape) || full.size() / size > row_budget_elements || !spread_along_rows(id, k))
      return false;
    if (holds_reshape(k)) return false;
    k.kind = kernel_kind::row;
    k.row_shape = full;
    k.outer = size;
    k.inner = full.size() / size;
    return true;
  }

  // The executor's row kernels evaluate no reshape (a loop hands its reshape the operand's tile), so a loop
  // holding one stays a loop.
  constexpr bool holds_reshape(const kernel& k) const {
    const auto index = static_cast<int>(&k - out.kernels.data());
    for (std::size_t i = 0; i < N; ++i)
      if (out.kernel_of[i] == index && nd(static_cast<int>(i)).prim->kind == ir::prim_kind::reshape) return true;
    return false;
  }

  // A row kernel reads a value of one element per row (its rows' leading shape) as spread along each row:
  // every member of k reading node `id` must take it at its own shape or broadcast it to the rows' leading
  // axes. Spread over other axes (a row sum broadcast down the columns, broadcast_in_dim<[3,3], 1>; a batch
  // axis that vmap put between them), the value varies along a row: no row kernel (the oracle suite found
  // one computing x - rowsum[i] for x - rowsum[j]).
  constexpr bool spread_along_rows(int id, const kernel& k) const {
    const ir::dims& shape = nd(id).shape;
    const auto index = static_cast<int>(&k - out.kernels.data());
    for (std::size_t i = 0; i < N; ++i) {
      if (out.kernel_of[i] != index) continue;
      const ir::node& m = p.nodes[i];
      for (std::size_t a = 0; a < m.arity; ++a) {
        if (m.operands[a] != id) continue;
        if (m.prim->kind != ir::prim_kind::broadcast) {
          if (!(m.shape == shape)) return false;
          continue;
        }
        for (std::size_t d = 0; d < shape.rank; ++d)
          if (m.attr.ints[d] != static_cast<std::int64_t>(d)) return false;
      }
    }
    return true;
  }

  // Can node `id` be computed inside kernel k (whose members so far are its consumers)?
  constexpr bool can_join(int id, kernel& k) const {
    const ir::node& n = nd(id);
    const std::size_t size = n.shape.size();
    switch (n.prim->kind) {
      case ir::prim_kind::elementwise:
      case ir::prim_kind::generator:
        if (k.kind == kernel_kind::loop && n.prim->kind == ir::prim_kind::elementwise && size != nd(k.root).shape.size())
          return becomes_rows(id, k);
        if (k.kind == kernel_kind::loop || k.kind == kernel_kind::contraction) return size == nd(k.root).shape.size();
        if (k.kind == kernel_kind::row)
          return n.shape == k.row_shape ||
                 (k.inner != 0 && size == k.outer && is_trailing_split(k.row_shape, n.shape) && spread_along_rows(id, k));
        if (k.kind == kernel_kind::column) return n.shape == k.row_shape;
        return false;
      case ir::prim_kind::broadcast:
        if (k.kind == kernel_kind::loop || k.kind == kernel_kind::contraction) return size == nd(k.root).shape.size();
        if (k.kind == kernel_kind::row)
          return n.shape == k.row_shape || (size == k.outer && is_trailing_split(k.row_shape, n.shape) && spread_along_rows(id, k));
        if (k.kind == kernel_kind::column) return n.shape == k.row_shape;
        return false;
      case ir::prim_kind::reshape:
        return (k.kind == kernel_kind::loop || k.kind == kernel_kind::contraction) && size == nd(k.root).shape.size();
      case ir::prim_kind::layout:
        return is_pad(n) && k.kind == kernel_kind::loop && n.shape == nd(k.root).shape;
      case ir::prim_kind::reduce: {
        if (n.prim->reduce_row == nullptr) return false;
        const ir::node& operand = nd(n.operand(0));
        if (!reduces_trailing(n, operand)) return false;
        const std::size_t inner = operand.shape.size() / (size == 0 ? 1 : size);
        if (inner > row_budget_elements) return false;
        if (k.kind == kernel_kind::loop) {
          // The loop becomes a row kernel over this reduction's outer indices, if every member so far
          // has the root's shape and that is the reduction's result (logsumexp) or operand (softmax).
          if (!k.uniform || k.stores_members || !(nd(k.root).shape == n.shape || nd(k.root).shape == operand.shape) ||
              !spread_along_rows(id, k) || holds_reshape(k))
            return false;
          k.kind = kernel_kind::row;
          k.row_shape = operand.shape;
          k.outer = size;
          k.inner = inner;
          return true;
        }
        if (k.kind == kernel_kind::row) return operand.shape == k.row_shape && size == k.outer && spread_along_rows(id, k);
        return false;
      }
      case ir::prim_kind::contraction:
        // A loop that stores members takes the product too (Adam's update of a weight as the epilogue of
        // its gradient's product: the gradient never reaches memory).
        if (k.kind != kernel_kind::loop || !(nd(k.root).shape == n.shape)) return false;
        k.kind = kernel_kind::contraction;
        k.dot = id;
        return true;
      default:
        return false;
    }
  }

  // The plan: which nodes are live, which kernel computes each, and the kernels in the order they run.
  constexpr void run() {
    mark_live();
    // Members are collected per kernel in reverse; kernels are numbered as created and renumbered below.
    for (std::size_t i = N; i-- > 0;)
      if (live[i]) place(static_cast<int>(i));
    order_kernels();
  }

  // Every node's entries reset; the outputs, the live nodes, their users, and the nodes read only
  // elementwise.
  constexpr void mark_live() {
    for (std::size_t i = 0; i < N; ++i) {
      out.kernel_of[i] = -1;
      out.arena_offset[i] = -1;
      out.output_index[i] = -1;
      out.last_reader[i] = -1;
      out.alias_of[i] = -1;
      common_kernel[i] = -1;
    }
    find_regions();
    for (std::size_t o = 0; o < O; ++o) {
      is_output[static_cast<std::size_t>(p.outputs[o])] = true;
      if (out.output_index[static_cast<std::size_t>(p.outputs[o])] == -1)
        out.output_index[static_cast<std::size_t>(p.outputs[o])] = static_cast<int>(o);
    }
    // Dead code: only nodes an output depends on are planned (derivative rules emit some that are not).
    for (std::size_t i = N; i-- > 0;) {
      if (!is_output[i] && user_count[i] == 0 && !live[i]) continue;
      live[i] = true;
      const ir::node& n = p.nodes[i];
      if (n.prim->kind == ir::prim_kind::control) use_construct(static_cast<int>(i));
      for (std::size_t a = 0; a < n.arity; ++a) ++user_count[static_cast<std::size_t>(n.operands[a])];
    }
    for (std::size_t i = 0; i < N; ++i) read_elementwise[i] = true;
    for (std::size_t i = 0; i < N; ++i) {
      const ir::node& n = p.nodes[i];
      if (live[i] && n.prim->kind != ir::prim_kind::elementwise)
        for (std::size_t a = 0; a < n.arity; ++a) read_elementwise[static_cast<std::size_t>(n.operands[a])] = false;
    }
  }

  // Live node `id`: inlined where it is read, an alias of its operand's bytes, a member of the kernel that
  // reads it, or the root of a new kernel.
  constexpr void place(int id) {
    const auto ii = static_cast<std::size_t>(id);
    const ir::node& n = p.nodes[ii];
    const auto kind = n.prim->kind;
    if (kind == ir::prim_kind::region_parameter) {
      out.materialized[ii] = true;
      return;
    }
    if (kind == ir::prim_kind::control) {
      place_control(id);
      return;
    }
    // Recomputed wherever it is read, unless a whole-buffer kernel reads it.
    if (!is_output[ii] && !whole_buffer_operand[ii] && is_inline_constant(p, id)) return;
    if (kind == ir::prim_kind::parameter) {
      out.materialized[ii] = true;
      if (!is_output[ii]) return;
    }
    if (kind == ir::prim_kind::literal && !is_output[ii] && !whole_buffer_operand[ii]) return;  // inlined in loops
    int k = -1;
    if (!is_output[ii] && common_kernel[ii] >= 0 && can_join(id, out.kernels[static_cast<std::size_t>(common_kernel[ii])]))
      k = common_kernel[ii];
    // A result that only one uniform loop reads, elementwise of the loop's shape, is computed in that
    // loop and stored from it (stored_member): one pass over its operands instead of a loop storing it
    // and the reader loading it back. No reduction joins the loop then (it stays a loop or takes a product).
    if (k < 0 && is_output[ii] && common_kernel[ii] >= 0 && kind == ir::prim_kind::elementwise) {
      kernel& reader = out.kernels[static_cast<std::size_t>(common_kernel[ii])];
      if (reader.kind == kernel_kind::loop && reader.uniform && n.shape == nd(reader.root).shape) {
        k = common_kernel[ii];
        reader.stores_members = true;
        out.materialized[ii] = true;
      }
    }
    // A broadcast that no loop takes in, read by elementwise work only (in several kernels, or in a loop
    // body while defined outside it), is gathered by each reader from its operand (is_broadcast_view).
    if (k < 0 && kind == ir::prim_kind::broadcast && !is_output[ii] && !whole_buffer_operand[ii] && read_elementwise[ii] &&
        n.shape.size() > nd(n.operand(0)).shape.size()) {
      common_kernel[static_cast<std::size_t>(n.operand(0))] = -2;
      whole_buffer_operand[static_cast<std::size_t>(n.operand(0))] = true;
      return;
    }
    // A reshape, or a call's result (checkpoint, custom_vjp: the identity on the function's result), that no
    // loop takes in is its operand's bytes (through reshapes and calls): a parameter's, or in the same region
    // (an alias's readers extend its operand's life, which is only sound within one region) those of a kernel
    // that stores a whole buffer anyway (a layout change, a contraction, a reduction); a call's operand is
    // stored once rather than stored and copied, whatever its kernel.
    const bool call = is_call_result(n);
    if (k < 0 && (kind == ir::prim_kind::reshape || call) && !is_output[ii]) {
      int from = n.operand(0);
      while (nd(from).prim->kind == ir::prim_kind::reshape || is_call_result(nd(from))) from = nd(from).operand(0);
      const auto from_kind = nd(from).prim->kind;
      const bool whole = from_kind == ir::prim_kind::layout || from_kind == ir::prim_kind::contraction || from_kind == ir::prim_kind::reduce;
      if (from_kind == ir::prim_kind::parameter || ((whole || call) && region_of[static_cast<std::size_t>(from)] == region_of[ii])) {
        out.materialized[ii] = true;
        out.alias_of[ii] = from;
        common_kernel[static_cast<std::size_t>(from)] = -2;  // stored whole, in no consumer's loop
        whole_buffer_operand[static_cast<std::size_t>(from)] = true;
        return;
      }
    }
    if (k < 0) k = create_kernel(id);
    out.kernel_of[ii] = k;
    kernel& kr = out.kernels[static_cast<std::size_t>(k)];
    if (!(n.shape == nd(kr.root).shape) || kind == ir::prim_kind::layout) kr.uniform = false;
    ++kr.member_count;  // provisional count; members are laid out after the sweep
    // Tell the operands which kernel consumes them.
    for (std::size_t a = 0; a < n.arity; ++a) {
      auto& c = common_kernel[static_cast<std::size_t>(n.operands[a])];
      c = (c == -1 || c == k) && region_of[static_cast<std::size_t>(n.operands[a])] == region_of[ii] ? k : -2;
    }
    // Kernels that compute whole buffers need materialised operands, and so does a pad a loop computes
    // (but for a literal padding value, which the loop splats).
    const bool loop_pad = kind == ir::prim_kind::layout && kr.kind != kernel_kind::layout;
    if (kr.kind == kernel_kind::layout || kr.kind == kernel_kind::generic || id == kr.dot || loop_pad)
      for (std::size_t a = 0; a < n.arity; ++a) {
        if (loop_pad && a == 1 && nd(n.operands[a]).prim->kind == ir::prim_kind::literal) continue;
        common_kernel[static_cast<std::size_t>(n.operands[a])] = -2;
        whole_buffer_operand[static_cast<std::size_t>(n.operands[a])] = true;
      }
  }

  // A control node: one kernel per construct, at its first live output.
  constexpr void place_control(int id) {
    const auto ii = static_cast<std::size_t>(id);
    const ir::node& n = p.nodes[ii];
    out.materialized[ii] = true;
    const int c = static_cast<int>(n.attr.ints[0]);
    int k = -1;
    for (int j = 0; j < out.kernel_count; ++j)
      if (out.kernels[static_cast<std::size_t>(j)].construct == c) k = j;
    if (k < 0) {
      k = new_kernel(kernel_kind::control, id);
      out.kernels[static_cast<std::size_t>(k)].construct = c;
    }
    out.kernels[static_cast<std::size_t>(k)].root = id;
    out.kernel_of[ii] = k;
    ++out.kernels[static_cast<std::size_t>(k)].member_count;
  }

  // A new kernel with node `id` as its root, of the kind its primitive asks for.
  constexpr int create_kernel(int id) {
    const auto ii = static_cast<std::size_t>(id);
    const ir::node& n = p.nodes[ii];
    const auto kind = n.prim->kind;
    out.materialized[ii] = true;
    kernel_kind kk = kernel_kind::loop;
    if (kind == ir::prim_kind::layout) kk = kernel_kind::layout;
    if (kind == ir::prim_kind::literal || kind == ir::prim_kind::parameter) kk = kernel_kind::copy;
    if (kind == ir::prim_kind::contraction) kk = kernel_kind::contraction;
    if (kind == ir::prim_kind::reduce) {
      const ir::node& operand = nd(n.operand(0));
      const std::size_t inner = operand.shape.size() / (n.shape.size() == 0 ? 1 : n.shape.size());
      if (n.prim->reduce_row != nullptr && reduces_trailing(n, operand) && inner <= row_budget_elements)
        kk = kernel_kind::row;
      else if (n.prim->combine != nullptr && reduces_leading(n))
        kk = kernel_kind::column;
      else
        kk = kernel_kind::generic;
    }
    const int k = new_kernel(kk, id);
    kernel& created = out.kernels[static_cast<std::size_t>(k)];
    if (kk == kernel_kind::contraction) created.dot = id;
    if (kk == kernel_kind::row || kk == kernel_kind::column) {
      const ir::node& operand = nd(n.operand(0));
      created.row_shape = operand.shape;
      created.outer = n.shape.size();
      created.inner = operand.shape.size() / (created.outer == 0 ? 1 : created.outer);
    }
    return k;
  }

  // Orders kernels by root (a topological order, since every member precedes its root), each construct's
  // regions right after its control kernel, and lays out members.
  constexpr void order_kernels() {
    std::array<int, N> by_root{};
    std::array<int, N> order{};
    std::array<int, N> renumber{};
    int count = 0;
    for (std::size_t i = 0; i < N; ++i)
      if (out.kernel_of[i] >= 0 && out.kernels[static_cast<std::size_t>(out.kernel_of[i])].root == static_cast<int>(i))
        by_root[static_cast<std::size_t>(count++)] = out.kernel_of[i];
    int placed = 0;
    place_region(-1, by_root, count, order, placed);
    std::array<kernel, N> sorted{};
    for (int k = 0; k < count; ++k) {
      sorted[static_cast<std::size_t>(k)] = out.kernels[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])];
      renumber[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = k;
    }
    int next = 0;
    for (int k = 0; k < count; ++k) {
      sorted[static_cast<std::size_t>(k)].first_member = next;
      sorted[static_cast<std::size_t>(k)].member_count = 0;
      next += out.kernels[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])].member_count;
    }
    for (std::size_t i = 0; i < N; ++i) {
      if (out.kernel_of[i] < 0) continue;
      const int k = renumber[static_cast<std::size_t>(out.kernel_of[i])];
      out.kernel_of[i] = k;
      kernel& kr = sorted[static_cast<std::size_t>(k)];
      out.members[static_cast<std::size_t>(kr.first_member + kr.member_count++)] = static_cast<int>(i);
    }
    out.kernels = sorted;
    out.kernel_count = count;
  }

  // Appends region r's kernels (in root order) to `order`, each control kernel followed by its regions.
  constexpr void place_region(int r, const std::array<int, N>& by_root, int count, std::array<int, N>& order, int& placed) {
    for (int j = 0; j < count; ++j) {
      const kernel& kr = out.kernels[static_cast<std::size_t>(by_root[static_cast<std::size_t>(j)])];
      if (kr.region != r) continue;
      order[static_cast<std::size_t>(placed++)] = by_root[static_cast<std::size_t>(j)];
      if (kr.kind != kernel_kind::control) continue;
      const ir::frozen_construct& fc = p.construct(kr.construct);
      for (int b = fc.first_region; b < fc.first_region + fc.region_count; ++b) {
        out.region_begin[static_cast<std::size_t>(b)] = placed;
        place_region(b, by_root, count, order, placed);
        out.region_end[static_cast<std::size_t>(b)] = placed;
      }
    }
  }

  // The last kernel during which a read at kernel k (in region r) keeps `id` alive: reading a value from
  // outside a region holds it until the region's last run, the end of its kernel range.
  constexpr int read_until(int k, int r, int id) const {
    const int def = region_of[static_cast<std::size_t>(id)];
    int outermost = -1;
    for (; r >= 0 && !contains(r, def); r = parent_of(r)) outermost = r;
    return outermost < 0 ? k : std::max(k, out.region_end[static_cast<std::size_t>(outermost)] - 1);
  }
  constexpr int construct_end(const ir::frozen_construct& fc) const {
    return out.region_end[static_cast<std::size_t>(fc.first_region + fc.region_count - 1)] - 1;
  }
  constexpr void read(int id, int until) {
    out.last_reader[static_cast<std::size_t>(id)] = std::max(out.last_reader[static_cast<std::size_t>(id)], until);
  }

  // A scan's new carry `id` can be computed in its parameter's buffer (saving the copy back each step,
  // which for a gradient accumulator is the size of a weight) when its kernel is the parameter's last
  // reader and reads it only elementwise at the index it writes, and the parameter is no result itself.
  // Returns that parameter, or -1.
  constexpr int in_place_carry(int id) const {
    const int r = region_of[static_cast<std::size_t>(id)];
    if (r < 0) return -1;
    const ir::frozen_region& reg = p.region(r);
    const ir::frozen_construct& fc = p.construct(reg.construct);
    if (fc.kind != ir::construct_kind::scan) return -1;
    int param = -1;
    for (int k = 0; k < fc.carries && param < 0; ++k)
      if (p.region_int(reg.results + k) == id) param = p.region_int(reg.params + k);
    if (param < 0 || !(nd(param).shape == nd(id).shape) || nd(param).dtype != nd(id).dtype) return -1;
    for (int j = 0; j < reg.result_count; ++j)
      if (p.region_int(reg.results + j) == param) return -1;
    const int k = out.kernel_of[static_cast<std::size_t>(id)];
    const kernel& kr = out.kernels[static_cast<std::size_t>(k)];
    if ((kr.kind != kernel_kind::loop && kr.kind != kernel_kind::contraction) || out.last_reader[static_cast<std::size_t>(param)] > k) return -1;
    for (int m = 0; m < kr.member_count; ++m) {
      const int member = out.members[static_cast<std::size_t>(kr.first_member + m)];
      const ir::node& n = nd(member);
      for (std::size_t a = 0; a < n.arity; ++a)
        if (n.operands[a] == param && (n.prim->kind != ir::prim_kind::elementwise || !(n.shape == nd(param).shape) || member == kr.dot))
          return -1;
    }
    return param;
  }

  // Which kernels read each materialised node, then first-fit arena offsets over those lifetimes.
  constexpr void assign_buffers() {
    for (int k = 0; k < out.kernel_count; ++k) {
      const kernel& kr = out.kernels[static_cast<std::size_t>(k)];
      if (kr.kind == kernel_kind::control) {  // inputs read as it starts (a scan's xs: every step); results at the end of each run
        const ir::frozen_construct& fc = p.construct(kr.construct);
        const int end = std::max(k, construct_end(fc));
        for (int i = 0; i < fc.input_count; ++i) {
          const bool every_step = fc.kind == ir::construct_kind::scan && i >= fc.carries;
          read(p.region_int(fc.inputs + i), read_until(every_step ? end : k, kr.region, p.region_int(fc.inputs + i)));
        }
        if (fc.index >= 0) read(fc.index, read_until(k, kr.region, fc.index));
        for (int b = fc.first_region; b < fc.first_region + fc.region_count; ++b) {
          const ir::frozen_region& reg = p.region(b);
          const int last = std::max(k, out.region_end[static_cast<std::size_t>(b)] - 1);
          for (int i = 0; i < reg.result_count; ++i) read(p.region_int(reg.results + i), read_until(last, b, p.region_int(reg.results + i)));
        }
        continue;
      }
      for (int m = 0; m < kr.member_count; ++m) {
        const ir::node& n = nd(out.members[static_cast<std::size_t>(kr.first_member + m)]);
        for (std::size_t a = 0; a < n.arity; ++a) {
          const auto operand = static_cast<std::size_t>(n.operands[a]);
          if (out.kernel_of[operand] != k) read(n.operands[a], read_until(k, kr.region, n.operands[a]));
        }
      }
    }
    for (std::size_t i = N; i-- > 0;) {  // a broadcast view's readers read its operand
      const ir::node& n = p.nodes[i];
      if (live[i] && n.prim->kind == ir::prim_kind::broadcast && is_broadcast_view(n, out.kernel_of[i], nd(n.operands[0])) &&
          out.last_reader[i] >= 0)
        read(n.operands[0], out.last_reader[i]);
    }
    for (std::size_t i = 0; i < N; ++i)  // an alias's readers read its operand
      if (out.alias_of[i] >= 0) read(out.alias_of[i], out.last_reader[i]);
    // A top-level scan's carry lives in its region parameter's buffer from its initial value to its final
    // one: the kernel computing the init writes there, and the construct's carry output is read from there
    // (the copies in and out vanish, and a gradient sum needs one buffer, not three).
    std::array<int, N> first_writer{}, held_until{};
    for (std::size_t i = 0; i < N; ++i) first_writer[i] = held_until[i] = -1;
    for (int k = 0; k < out.kernel_count; ++k) {
      const kernel& kr = out.kernels[static_cast<std::size_t>(k)];
      if (kr.kind != kernel_kind::control || kr.region >= 0) continue;
      const ir::frozen_construct& fc = p.construct(kr.construct);
      if (fc.kind != ir::construct_kind::scan) continue;
      const ir::frozen_region& reg = p.region(fc.first_region);
      for (int c = 0; c < fc.carries; ++c) {
        const auto param = static_cast<std::size_t>(p.region_int(reg.params + c));
        if (!out.materialized[param]) continue;
        const auto result = static_cast<std::size_t>(p.region_int(fc.outputs + c));
        if (out.materialized[result] && out.output_index[result] < 0 && out.alias_of[result] < 0) {
          out.alias_of[result] = static_cast<int>(param);
          held_until[param] = std::max(held_until[param], out.last_reader[result]);
        }
        const auto init = static_cast<std::size_t>(p.region_int(fc.inputs + c));
        const auto init_kind = nd(static_cast<int>(init)).prim->kind;
        if (out.materialized[init] && out.alias_of[init] < 0 && out.output_index[init] < 0 && out.kernel_of[init] >= 0 &&
            init_kind != ir::prim_kind::parameter && init_kind != ir::prim_kind::region_parameter &&
            init_kind != ir::prim_kind::control && out.last_reader[init] == k && region_of[init] == kr.region) {
          out.alias_of[init] = static_cast<int>(param);
          first_writer[param] = out.kernel_of[init];
        }
      }
    }
    // Every arena buffer's size and lifetime (kernels from..to); carries share their buffer.
    struct buffer {
      std::size_t node, size;
      int from, to;
    };
    std::array<buffer, N> buffers{};
    std::size_t count = 0;
    std::array<int, N> carry_of{};
    for (std::size_t i = 0; i < N; ++i) {
      carry_of[i] = -1;
      const ir::node& n = p.nodes[i];
      if (!out.materialized[i] || out.alias_of[i] >= 0) continue;
      if (n.prim->kind == ir::prim_kind::parameter) {
        out.parameter_bytes += out.bytes(static_cast<int>(i));
        continue;
      }
      if (out.output_index[i] >= 0) {
        out.output_bytes += out.bytes(static_cast<int>(i));
        continue;
      }
      int from = out.kernel_of[i];
      int to = std::max(from, out.last_reader[i]);
      if (n.prim->kind == ir::prim_kind::region_parameter) {  // filled by the control kernel, for the whole run
        const int r = static_cast<int>(n.attr.ints[0]);
        from = out.region_begin[static_cast<std::size_t>(p.construct(p.region(r).construct).first_region)] - 1;
        to = std::max({from, out.last_reader[i], out.region_end[static_cast<std::size_t>(r)] - 1, held_until[i]});
        if (first_writer[i] >= 0) from = std::min(from, first_writer[i]);
      } else if (n.prim->kind == ir::prim_kind::control) {  // written during the whole run
        to = std::max(to, construct_end(p.construct(static_cast<int>(n.attr.ints[0]))));
      }
      if (const int carry = in_place_carry(static_cast<int>(i)); carry >= 0) {  // the carry's own buffer
        carry_of[i] = carry;
        continue;
      }
      const std::size_t size = (out.bytes(static_cast<int>(i)) + arena_alignment - 1) / arena_alignment * arena_alignment;
      buffers[count++] = buffer{i, size, from, to};
    }
    // Offsets first-fit, the buffers taken in two orders: as computed, and largest first (TFLite's greedy
    // by size, which packs a few large buffers of disjoint lifetimes far better: the gradients of a fully
    // sharded step). The smaller arena is kept, so no plan grows.
    std::array<std::int64_t, N> offsets{};
    const std::size_t by_node = first_fit(buffers, count, offsets);
    std::array<buffer, N> largest_first = buffers;
    std::sort(largest_first.begin(), largest_first.begin() + static_cast<std::ptrdiff_t>(count),
              [](const buffer& a, const buffer& b) { return a.size != b.size ? a.size > b.size : a.node < b.node; });
    std::array<std::int64_t, N> offsets_by_size{};
    const std::size_t by_size = first_fit(largest_first, count, offsets_by_size);
    out.arena_bytes = std::min(by_node, by_size);
    for (std::size_t k = 0; k < count; ++k)
      out.arena_offset[buffers[k].node] = by_size < by_node ? offsets_by_size[buffers[k].node] : offsets[buffers[k].node];
    for (std::size_t i = 0; i < N; ++i)
      if (carry_of[i] >= 0) out.arena_offset[i] = out.arena_offset[static_cast<std::size_t>(carry_of[i])];
  }

  // Each buffer, in the order given, at the lowest offset clear of the buffers placed before it whose
  // lifetimes overlap its own; returns the arena's size. Those buffers are swept once in the order of their
  // offsets (moving past each one in the way), so a buffer costs k log k for the k placed before it: the
  // passes until nothing moved cost up to k^2 each, and a program of a few hundred buffers (a random program
  // of 40 operations under grad) ran past g++'s limit on constant evaluation.
  template <class Buffers>
  static constexpr std::size_t first_fit(const Buffers& buffers, std::size_t count, std::array<std::int64_t, N>& offsets) {
    struct slot {
      std::size_t offset, end;
      int from, to;
    };
    std::array<slot, N> placed{};
    std::array<slot, N> live{};
    std::size_t arena = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const auto& b = buffers[k];
      std::size_t n = 0;
      for (std::size_t s = 0; s < k; ++s)
        if (!(placed[s].to < b.from || b.to < placed[s].from)) live[n++] = placed[s];
      std::sort(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(n), [](const slot& x, const slot& y) { return x.offset < y.offset; });
      std::size_t offset = 0;
      for (std::size_t s = 0; s < n; ++s)
        if (offset < live[s].end && live[s].offset < offset + b.size) offset = live[s].end;
      placed[k] = slot{offset, offset + b.size, b.from, b.to};
      offsets[b.node] = static_cast<std::int64_t>(offset);
      arena = std::max(arena, offset + b.size);
    }
    return arena;
  }
};

}  // namespace detail

template <std::size_t N, std::size_t O>
constexpr plan<N, O> make_plan(const ir::program<N, O>& program) {
  plan<N, O> out;
  out.program = program;
  detail::builder<N, O> b{program, out};
  b.run();
  b.assign_buffers();
  return out;
}

// A plan of any size seen through pointers: what the executor, compiled once in the tessel library, runs.
// Valid while the plan it views lives (jit's plans are static constants).
struct plan_view {
  ir::program_view program;
  const kernel* kernels = nullptr;
  int kernel_count = 0;
  std::size_t max_members = 0;  // the most members any kernel has
  const int* members = nullptr;
  const int* kernel_of = nullptr;
  const bool* materialized = nullptr;
  const std::int64_t* arena_offset = nullptr;
  const int* output_index = nullptr;
  const int* last_reader = nullptr;
  const int* alias_of = nullptr;
  const int* region_begin = nullptr;
  const int* region_end = nullptr;
  std::size_t arena_bytes = 0;
  // Where the executor keeps what it derives from the plan for this machine (the kernels' grids), made on
  // the first call and read by every later one; null for a plan that may not outlive the call (then it is
  // derived on each call). static_view sets it for a plan that is a static constant.
  std::atomic<const void*>* derived = nullptr;

  const ir::node& node(int id) const { return program.nodes[static_cast<std::size_t>(id)]; }
  std::size_t bytes(int id) const { return node(id).shape.size() * ir::bytes_of(node(id).dtype); }
};

template <std::size_t N, std::size_t O>
plan_view view_of(const plan<N, O>& p) {
  std::size_t most = 0;
  for (int k = 0; k < p.kernel_count; ++k) most = std::max(most, static_cast<std::size_t>(p.kernels[static_cast<std::size_t>(k)].member_count));
  return {.program = ir::view_of(p.program),
          .kernels = p.kernels.data(), .kernel_count = p.kernel_count, .max_members = most,
          .members = p.members.data(), .kernel_of = p.kernel_of.data(), .materialized = p.materialized.data(),
          .arena_offset = p.arena_offset.data(), .output_index = p.output_index.data(),
          .last_reader = p.last_reader.data(), .alias_of = p.alias_of.data(), .region_begin = p.region_begin.data(),
          .region_end = p.region_end.data(), .arena_bytes = p.arena_bytes};
}

// The view of a plan that is a static constant (jit's and shard_map's, one per program and argument
// types): made once, with the slot in which the executor keeps the plan's grids on this machine, so that
// a call derives nothing from the plan.
template <const auto& P>
const plan_view& static_view() {
  static std::atomic<const void*> derived{nullptr};
  static const plan_view view = [] {
    plan_view v = view_of(P);
    v.derived = &derived;
    return v;
  }();
  return view;
}

}  // namespace tessel::plan
