#pragma once
// A plan seen on a target: each kernel described as a grid over blocks (Pallas's BlockSpecs) and
// checked against the target's tiling rule and VMEM at compile time, with a roofline time estimate.
// The host always runs the host plan; this is how the same program would be laid out on a TPU.
//
//   tessel::check_fits<tessel::targets::tpu_v5e, plan>();      // a compile error if a kernel cannot fit
//   std::cout << tessel::dump_on<tessel::targets::tpu_v5e>(plan); // blocks, grid, VMEM and time per kernel

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
namespace plan_detail {

// The kernel as the block planner sees it: a row kernel keeps its rows whole, a contraction is a
// matmul with its epilogue operands, everything else streams as an elementwise loop over its largest
// operand (a transpose's blocks are its output's).
template <std::size_t N, std::size_t O>
constexpr tiling::kernel_description describe_kernel(const plan::plan<N, O>& p, int k) {
  const plan::kernel& kr = p.kernels[static_cast<std::size_t>(k)];
  const ir::node& root = p.node(kr.root);
  tiling::kernel_description d;
  d.name = make_name("kernel");
  d.name.text[6] = static_cast<char>('0' + k % 10);
  std::array<bool, N> seen{};
  std::size_t full = root.shape == kr.row_shape ? 1 : 0, reduced = full ? 0 : 1, streams = 1;
  std::array<int, tiling::max_operands> epilogue{};
  std::size_t epilogue_count = 0;
  for (int m = 0; m < kr.member_count; ++m) {
    const ir::node& n = p.node(p.members[static_cast<std::size_t>(kr.first_member + m)]);
    for (std::size_t a = 0; a < n.arity; ++a) {
      const auto operand = static_cast<std::size_t>(n.operands[a]);
      if (p.kernel_of[operand] == k || seen[operand] || !p.materialized[operand]) continue;
      seen[operand] = true;
      if (p.node(n.operands[a]).shape == kr.row_shape) ++full;
      else ++reduced;
      ++streams;
      if (kr.kind == plan::kernel_kind::contraction && n.prim->kind != ir::prim_kind::contraction && epilogue_count < epilogue.size())
        epilogue[epilogue_count++] = n.operands[a];
    }
  }
  switch (kr.kind) {
    case plan::kernel_kind::row: {
      tiling::kernel_description r = tiling::row_kernel(d.name, kr.outer, kr.inner, root.dtype, full, reduced);
      return r;
    }
    case plan::kernel_kind::contraction: {
      const ir::node& dot = p.node(kr.dot);
      const ir::gemm_extent l = dot.prim->extent(dot, p.node(dot.operand(0)), p.node(dot.operand(1)));
      tiling::kernel_description m = tiling::matmul_kernel(d.name, l.batch * l.m, l.n, l.k, dot.operand_dtype, dot.operand_dtype, root.dtype);
      for (std::size_t e = 0; e < epilogue_count; ++e) {
        const ir::node& operand = p.node(epilogue[e]);
        if (operand.shape.size() == root.shape.size())
          m.add(tiling::make_dims({l.batch * l.m, l.n}), operand.dtype, tiling::index_map::matmul_out);
        else
          m.add(operand.shape, operand.dtype, tiling::index_map::whole);
      }
      return m;
    }
    default: {
      ir::dims shape = root.shape;
      if (kr.kind == plan::kernel_kind::column) shape = kr.row_shape;
      if (shape.rank == 0) shape = tiling::make_dims({1});
      return tiling::elementwise_kernel(d.name, shape, root.dtype, streams);
    }
  }
}

}  // namespace plan_detail

// Compile error (naming the kernel, blocks, bytes and the fix) unless every kernel of Plan fits Target.
template <target Target, const auto& Plan>
consteval bool check_fits() {
  return []<std::size_t... K>(std::index_sequence<K...>) {
    (check_kernel_fits<Target, plan_detail::describe_kernel(Plan, static_cast<int>(K)), "tessel::plan">(), ...);
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
    const tiling::kernel_description d = plan_detail::describe_kernel(p, k);
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
