#pragma once
// dump(plan): a plan as text, like XLA's --xla_dump_to (tessel/dump.hpp's dump(f, args...) prints the
// plan jit makes for a function). The first line is always
// "kernels: N". Then, per kernel: its kind, iteration space, the primitives fused into it, the buffers it
// reads and writes, flops and bytes moved; then every intermediate buffer with its arena slot and
// lifetime (kernel range), and the peak memory.
//
//   std::cout << tessel::dump(f, x, w, b);

#include <cstddef>
#include <sstream>
#include <string>

#include "tessel/plan/describe.hpp"
#include "tessel/plan/plan.hpp"

namespace tessel {
namespace plan_detail {

inline std::string human_bytes(std::size_t b) {
  std::ostringstream os;
  if (b >= (1u << 20)) os << static_cast<double>(b) / (1u << 20) << " MiB";
  else if (b >= 1024) os << static_cast<double>(b) / 1024 << " KiB";
  else os << b << " B";
  return os.str();
}

template <std::size_t N, std::size_t O>
std::string buffer_name(const plan::plan<N, O>& p, int id) {
  if (const int of = p.alias_of[static_cast<std::size_t>(id)]; of >= 0) return buffer_name(p, of);  // its bytes
  const ir::node& n = p.node(id);
  std::string name = n.prim->kind == ir::prim_kind::parameter ? "param"
                     : p.output_index[static_cast<std::size_t>(id)] >= 0 ? "out"
                                                                        : "%";
  name += std::to_string(n.prim->kind == ir::prim_kind::parameter ? n.attr.ints[0]
                         : p.output_index[static_cast<std::size_t>(id)] >= 0 ? p.output_index[static_cast<std::size_t>(id)]
                                                                             : id);
  return name;
}

}  // namespace plan_detail

template <std::size_t N, std::size_t O>
std::string dump(const plan::plan<N, O>& p) {
  using plan_detail::buffer_name;
  using plan_detail::human_bytes;
  using plan_detail::type_string;
  std::ostringstream os;
  os << "kernels: " << p.kernel_count << "\n";
  double total_flops = 0;
  std::size_t total_bytes = 0;
  for (int k = 0; k < p.kernel_count; ++k) {
    const plan::kernel& kr = p.kernels[static_cast<std::size_t>(k)];
    const ir::node& root = p.node(kr.root);
    os << "kernel " << k << " " << plan::name_of(kr.kind) << " " << type_string(root);
    if (kr.kind == plan::kernel_kind::row) os << " (rows: " << kr.outer << " x " << kr.inner << ")";
    if (kr.kind == plan::kernel_kind::column) os << " (columns: " << kr.inner << " rows of " << kr.outer << ")";
    if (kr.kind == plan::kernel_kind::control) {  // scan or switch: its regions' kernel ranges follow it
      const ir::frozen_construct& fc = p.program.construct(kr.construct);
      if (fc.kind == ir::construct_kind::scan) os << " (scan: " << fc.length << (fc.reverse ? " steps, reversed," : " steps,");
      else os << " (switch: " << fc.region_count << " branches,";
      for (int b = fc.first_region; b < fc.first_region + fc.region_count; ++b)
        os << " kernels " << p.region_begin[static_cast<std::size_t>(b)] << ".." << p.region_end[static_cast<std::size_t>(b)] - 1;
      os << ")";
    }
    os << "\n  fuses:";
    double flops = 0;
    for (int m = 0; m < kr.member_count; ++m) {
      const int id = p.members[static_cast<std::size_t>(kr.first_member + m)];
      const ir::node& n = p.node(id);
      os << " " << n.prim->name;
      if (n.prim->kind == ir::prim_kind::contraction) {
        const ir::gemm_extent d = n.prim->extent(n, p.node(n.operand(0)), p.node(n.operand(1)));
        flops += 2.0 * static_cast<double>(d.batch * d.m * d.n * d.k);
      } else if (n.prim->kind == ir::prim_kind::reduce) {
        flops += static_cast<double>(p.node(n.operand(0)).shape.size());
      } else {
        flops += n.prim->flops_per_element * static_cast<double>(n.shape.size());
      }
    }
    os << "\n  reads:";
    std::size_t bytes = 0;
    std::array<bool, N> seen{};
    for (int m = 0; m < kr.member_count; ++m) {
      const ir::node& n = p.node(p.members[static_cast<std::size_t>(kr.first_member + m)]);
      for (std::size_t a = 0; a < n.arity; ++a) {
        const int operand = n.operands[a];
        if (p.kernel_of[static_cast<std::size_t>(operand)] == k || seen[static_cast<std::size_t>(operand)]) continue;
        if (!p.materialized[static_cast<std::size_t>(operand)]) continue;  // literals
        seen[static_cast<std::size_t>(operand)] = true;
        os << " " << buffer_name(p, operand) << ":" << type_string(p.node(operand));
        bytes += p.bytes(operand);
      }
    }
    os << "\n  writes:";
    for (int m = 0; m < kr.member_count; ++m) {
      const int id = p.members[static_cast<std::size_t>(kr.first_member + m)];
      if (id != kr.root && !plan::stored_member(p, kr, id)) continue;
      os << " " << buffer_name(p, id) << ":" << type_string(p.node(id));
      bytes += p.bytes(id);
    }
    os << "\n";
    os << "  flops: " << flops << "  bytes: " << bytes << "\n";
    total_flops += flops;
    total_bytes += bytes;
  }
  os << "buffers:";
  bool any = false;
  for (std::size_t i = 0; i < N; ++i) {
    if (p.arena_offset[i] < 0) continue;
    any = true;
    os << "\n  %" << i << " " << type_string(p.node(static_cast<int>(i))) << " at " << p.arena_offset[i] << ", "
       << human_bytes(p.bytes(static_cast<int>(i))) << ", live kernels " << p.kernel_of[i] << ".."
       << std::max(p.kernel_of[i], p.last_reader[i]);
  }
  if (!any) os << " none (every intermediate value stays inside a kernel)";
  os << "\npeak: " << p.arena_bytes << " bytes in the arena (" << human_bytes(p.arena_bytes) << "); parameters "
     << human_bytes(p.parameter_bytes) << ", outputs " << human_bytes(p.output_bytes) << "\n";
  os << "total: " << total_flops << " flops, " << total_bytes << " bytes moved\n";
  return os.str();
}

}  // namespace tessel
