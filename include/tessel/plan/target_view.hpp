#pragma once
// A plan seen on a target: each kernel described as a grid over blocks (Pallas's BlockSpecs) and
// checked against the target's tiling rule and VMEM at compile time, with a roofline time estimate.
// The host always runs the host plan; this is how the same program would be laid out on a TPU.
//
//   tessel::check_fits<tessel::targets::tpu_v5e, plan>();      // a compile error if a kernel cannot fit
//   std::cout << tessel::dump_on<tessel::targets::tpu_v5e>(plan); // blocks, grid, VMEM and time per kernel

#include <array>
#include <cstddef>
#include <sstream>
#include <string>
#include <utility>

#include "tessel/plan/dump.hpp"
#include "tessel/plan/plan.hpp"
#include "tessel/prim/dot_general.hpp"
#include "tessel/target/host.hpp"
#include "tessel/target/tiling.hpp"
#include "tessel/target/tpu.hpp"

namespace tessel {
namespace plan {

// The kernel as the block planner sees it: a row kernel keeps its rows whole, a contraction is a
// matmul (batched: rank 3) with its epilogue operands, everything else streams as an elementwise loop
// over its largest operand (a transpose's blocks are its output's; a column kernel's are its outputs').
// P is a plan<N, O> (compile time) or a plan_view (the executor, at run time).
template <class P>
constexpr tiling::kernel_description describe_kernel(const P& p, int k) {
  const kernel& kr = p.kernels[static_cast<std::size_t>(k)];
  const ir::node& root = p.node(kr.root);
  tiling::kernel_description d;
  d.name = make_name("kernel");
  d.name.text[6] = static_cast<char>('0' + k % 10);
  // Each operand from outside the kernel is one more stream, counted once.
  constexpr std::size_t most_listed = 64;
  std::array<int, most_listed> listed{};
  std::size_t listed_count = 0;
  auto first_time = [&](int id) {
    for (std::size_t i = 0; i < listed_count; ++i)
      if (listed[i] == id) return false;
    if (listed_count < most_listed) listed[listed_count++] = id;
    return true;
  };
  std::size_t full = root.shape == kr.row_shape ? 1 : 0, reduced = full ? 0 : 1, streams = 1;
  std::array<int, tiling::max_operands> epilogue{};
  std::size_t epilogue_count = 0;
  for (int m = 0; m < kr.member_count; ++m) {
    const int id = p.members[static_cast<std::size_t>(kr.first_member + m)];
    const ir::node& n = p.node(id);
    if (stored_member(p, kr, id)) ++full, ++streams;  // written like the root
    for (std::size_t a = 0; a < n.arity; ++a) {
      const int operand = n.operands[a];
      const auto at = static_cast<std::size_t>(operand);
      if (p.kernel_of[at] == k || !p.materialized[at] || !first_time(operand)) continue;
      if (p.node(operand).shape == kr.row_shape) ++full;
      else ++reduced;
      ++streams;
      if (kr.kind == kernel_kind::contraction && n.prim->kind != ir::prim_kind::contraction && epilogue_count + 3 < epilogue.size())
        epilogue[epilogue_count++] = operand;
    }
  }
  // The planner takes at most tiling::max_operands operands; a fusion of more streams is planned as if
  // it had that many (its blocks then take more VMEM than the rule allows, by the excess streams' share).
  constexpr std::size_t most = tiling::max_operands;
  streams = streams < most ? streams : most;
  reduced = reduced < most - 1 ? reduced : most - 1;
  full = full + reduced <= most ? full : most - reduced;
  switch (kr.kind) {
    case kernel_kind::row:
      return tiling::row_kernel(d.name, kr.outer, kr.inner, root.dtype, full, reduced);
    case kernel_kind::contraction: {
      const ir::node& dot = p.node(kr.dot);
      const ir::gemm_extent l = dot.prim->extent(dot, p.node(dot.operand(0)), p.node(dot.operand(1)));
      const bool batched = l.batch > 1;
      auto dims = [&](std::size_t rows, std::size_t cols) {
        return batched ? tiling::make_dims({l.batch, rows, cols}) : tiling::make_dims({rows, cols});
      };
      tiling::kernel_description m{.name = d.name, .kind = tiling::pattern::matmul};
      m.add(dims(l.m, l.k), dot.operand_dtype, tiling::index_map::matmul_lhs);
      m.add(dims(l.k, l.n), dot.operand_dtype, tiling::index_map::matmul_rhs);
      m.add(dims(l.m, l.n), root.dtype, tiling::index_map::matmul_out);
      for (std::size_t e = 0; e < epilogue_count; ++e) {
        const ir::node& operand = p.node(epilogue[e]);
        if (operand.shape.size() == root.shape.size())
          m.add(dims(l.m, l.n), operand.dtype, tiling::index_map::matmul_out);
        else
          m.add(operand.shape, operand.dtype, tiling::index_map::whole);
      }
      return m;
    }
    default: {
      // A column kernel's blocks are blocks of its outputs: each holds its accumulators while every
      // reduced row streams through.
      ir::dims shape = root.shape;
      if (shape.rank == 0) shape = tiling::make_dims({1});
      return tiling::elementwise_kernel(d.name, shape, root.dtype, streams);
    }
  }
}

// The node whose primitive kernel k runs in work items (a convolution's contraction kernel; the layout
// kernels of its gradients, pooling, transpose and slice), or -1.
template <class P>
constexpr int item_node(const P& p, int k) {
  const kernel& kr = p.kernels[static_cast<std::size_t>(k)];
  if (kr.kind != kernel_kind::contraction && kr.kind != kernel_kind::layout) return -1;
  const int id = kr.kind == kernel_kind::contraction ? kr.dot : kr.root;
  return p.node(id).prim->plan_items != nullptr ? id : -1;
}

// The work items kernel k runs as on target t (its primitive's cut for t's cores and VMEM); the executor
// runs exactly these, planned for targets::this_host() (run/implementation.hpp).
template <class P>
ir::item_plan items_of(const P& p, int k, const target& t) {
  const ir::node& n = p.node(item_node(p, k));
  const ir::node* operands[ir::max_operands]{};
  for (std::size_t a = 0; a < n.arity; ++a) operands[a] = &p.node(n.operands[a]);
  return n.prim->plan_items(n, operands, t.cores, t.vmem_bytes);
}

// Whether kernel k runs as a grid over blocks (loops, rows, columns and GEMMs); the others (layout
// changes, generic reductions, copies, control, and kernels of work items) run whole or as their items.
template <class P>
constexpr bool runs_on_grid(const P& p, int k) {
  switch (p.kernels[static_cast<std::size_t>(k)].kind) {
    case kernel_kind::loop:
    case kernel_kind::row:
    case kernel_kind::column: return true;
    case kernel_kind::contraction: return item_node(p, k) < 0;
    default: return false;
  }
}

// The blocks kernel k runs as on target t: its grid, each operand's block, the VMEM they take. The one
// place where block sizes are chosen: dump_on prints it for a compile-time target, and the executor runs
// exactly these blocks, planned for targets::this_host() (run/implementation.hpp).
template <class P>
constexpr tiling::block_plan blocks_of(const P& p, int k, const target& t) {
  return tiling::plan_blocks(t, describe_kernel(p, k));
}

// Every gridded kernel's grid and blocks on t, a line each: what the executor runs when t is this_host().
template <class P>
std::string blocks_text(const P& p, const target& t) {
  std::ostringstream os;
  os << "blocks on " << t.name.view() << " (" << t.cores << " threads, VMEM " << plan_detail::human_bytes(t.vmem_bytes)
     << " per core, " << t.lanes << " f32 lanes, GEMM tile " << t.mxu_rows << "x" << t.mxu_cols;
  if (t.bf16_mxu_rows != 0) os << ", bf16 tiles of " << t.bf16_mxu_rows << " rows and K in " << t.bf16_mxu_k << "s";
  os << "):\n";
  auto dims = [&](const ir::dims& d) {
    os << "[";
    for (std::size_t i = 0; i < d.rank; ++i) os << (i ? "," : "") << d.d[i];
    os << "]";
  };
  for (int k = 0; k < p.kernel_count; ++k) {
    if (item_node(p, k) >= 0) {
      const ir::item_plan items = items_of(p, k, t);
      os << "  kernel " << k << " " << name_of(p.kernels[static_cast<std::size_t>(k)].kind) << ": " << items.items
         << " work items, scratch " << plan_detail::human_bytes(items.scratch_floats * 4) << " per thread"
         << (items.sums_partials ? ", partial sums added" : "") << "\n";
      continue;
    }
    if (!runs_on_grid(p, k)) continue;
    const tiling::block_plan b = blocks_of(p, k, t);
    os << "  kernel " << k << " " << name_of(p.kernels[static_cast<std::size_t>(k)].kind) << ": ";
    if (!b.ok()) {
      os << tiling::name_of(b.error) << "\n";
      continue;
    }
    os << "grid ";
    dims(b.grid);
    os << ", blocks";
    for (std::size_t i = 0; i < b.count; ++i) {
      os << " ";
      dims(b.blocks[i].block);
    }
    os << ", VMEM " << plan_detail::human_bytes(b.vmem_bytes) << "\n";
  }
  return os.str();
}

}  // namespace plan

// Compile error (naming the kernel, blocks, bytes and the fix) unless every kernel of Plan fits Target.
template <target Target, const auto& Plan>
consteval bool check_fits() {
  return []<std::size_t... K>(std::index_sequence<K...>) {
    (check_kernel_fits<Target, plan::describe_kernel(Plan, static_cast<int>(K)), "tessel::plan">(), ...);
    return true;
  }(std::make_index_sequence<static_cast<std::size_t>(Plan.kernel_count)>{});
}

// The host plan, then each kernel's blocks, grid, VMEM use and roofline estimate on Target.
template <target Target, std::size_t N, std::size_t O>
std::string dump_on(const plan::plan<N, O>& p) {
  std::ostringstream os;
  os << dump(p);
  os << "on " << Target.name.view() << ": " << Target.cores << " core(s), VMEM "
     << plan_detail::human_bytes(Target.vmem_bytes) << " per core, tiles " << Target.sublanes << "x" << Target.lanes << "\n";
  double total = 0;
  for (int k = 0; k < p.kernel_count; ++k) {
    const tiling::kernel_description d = plan::describe_kernel(p, k);
    const tiling::block_plan b = tiling::plan_blocks(Target, d);
    os << "  kernel " << k << " " << tiling::name_of(d.kind);
    if (!b.ok()) {
      os << ": " << tiling::describe_failure(Target, b, "tessel::plan", d.name.view()).view() << "\n";
      continue;
    }
    os << " grid [";
    for (std::size_t i = 0; i < b.grid.rank; ++i) os << (i ? "," : "") << b.grid.d[i];
    os << "] blocks";
    for (std::size_t i = 0; i < b.count; ++i) {
      os << " [";
      for (std::size_t j = 0; j < b.blocks[i].block.rank; ++j) os << (j ? "," : "") << b.blocks[i].block.d[j];
      os << "]";
    }
    double bytes = 0;
    for (std::size_t i = 0; i < d.operand_count; ++i) bytes += static_cast<double>(d.operands[i].shape.size() * ir::bytes_of(d.operands[i].dtype));
    const double flops = d.kind == tiling::pattern::matmul
                             ? 2.0 * static_cast<double>(d.operands[0].shape.d[0] * d.operands[1].shape.d[1] * d.operands[0].shape.d[1])
                             : static_cast<double>(d.operands[0].shape.size());
    const double seconds = roofline_seconds(Target, flops, bytes, d.operands[0].dtype);
    total += seconds;
    os << " vmem " << plan_detail::human_bytes(b.vmem_bytes) << " est " << seconds * 1e6 << " us\n";
  }
  os << "estimated step on " << Target.name.view() << ": " << total * 1e6 << " us (roofline bound)\n";
  return os.str();
}

}  // namespace tessel
