#pragma once
// describe(plan, k): one kernel of a plan in a line, as trace events and run/check_finite.hpp name it:
// its kind, the primitives fused into it (each once, in program order; broadcasts and reshapes, which
// are only indexing inside a kernel, are named only where nothing else is) and the type it stores:
//
//   contraction dot_general+add+max f32[128,256]
//   row reduce_max+sub+exp+reduce_sum+div f32[128,10]

#include <cstddef>
#include <string>
#include <string_view>

#include "tessel/plan/plan.hpp"

namespace tessel::plan_detail {

// A value's type as JAX prints it: f32[128,256].
inline std::string type_string(const ir::node& n) {
  std::string s(ir::name_of(n.dtype));
  s += '[';
  for (std::size_t i = 0; i < n.shape.rank; ++i) {
    if (i) s += ',';
    s += std::to_string(n.shape.d[i]);
  }
  s += ']';
  return s;
}

}  // namespace tessel::plan_detail

namespace tessel::plan {

inline std::string describe(const plan_view& p, int k) {
  const kernel& kr = p.kernels[static_cast<std::size_t>(k)];
  std::string s(name_of(kr.kind));
  if (kr.root < 0) return s;
  auto names = [&](bool indexing) {
    std::string fused;
    std::string_view seen[16]{};
    std::size_t seen_count = 0;
    for (int m = 0; m < kr.member_count; ++m) {
      const ir::node& n = p.node(p.members[static_cast<std::size_t>(kr.first_member + m)]);
      if (n.prim->kind == ir::prim_kind::parameter || n.prim->kind == ir::prim_kind::literal) continue;
      if (!indexing && (n.prim->kind == ir::prim_kind::broadcast || n.prim->kind == ir::prim_kind::reshape)) continue;
      bool repeated = false;
      for (std::size_t i = 0; i < seen_count; ++i) repeated = repeated || seen[i] == n.prim->name;
      if (repeated) continue;
      if (seen_count < 16) seen[seen_count++] = n.prim->name;
      if (!fused.empty()) fused += '+';
      fused += n.prim->name;
    }
    return fused;
  };
  std::string fused = names(false);
  if (fused.empty()) fused = names(true);
  if (fused.empty()) fused = p.node(kr.root).prim->name;  // a copy kernel: the parameter or literal it copies
  s += ' ';
  s += fused;
  s += ' ';
  s += plan_detail::type_string(p.node(kr.root));
  return s;
}

}  // namespace tessel::plan
