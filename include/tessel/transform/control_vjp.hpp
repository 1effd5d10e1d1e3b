#pragma once
// Reverse mode through control flow: the rule transform/sweeps.hpp declares for constructs, which sends a
// construct's outputs' cotangents through a scan's or a switch's rule (transform/scan_vjp.hpp,
// transform/switch_vjp.hpp).

#include <cstddef>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/transform/scan_vjp.hpp"
#include "tessel/transform/sweeps.hpp"
#include "tessel/transform/switch_vjp.hpp"

namespace tessel::autodiff {

template <class Rules>
constexpr std::vector<pulled> construct_pull(ir::graph_builder& g, int id, const std::vector<int>& cts, const std::vector<char>& active) {
  const int c = static_cast<int>(g[id].attr.ints[0]);
  const std::vector<int> outputs = g.constructs[static_cast<std::size_t>(c)].outputs;
  if (outputs[0] != id) return {};  // the rule runs at the first output, when every output's cotangent is known
  std::vector<int> ocs;
  bool any = false;
  for (int o : outputs) {
    ocs.push_back(static_cast<std::size_t>(o) < cts.size() ? cts[static_cast<std::size_t>(o)] : -1);
    any = any || ocs.back() >= 0;
  }
  if (!any) return {};
  if (g.constructs[static_cast<std::size_t>(c)].kind == ir::construct_kind::scan) return control_detail::scan_pull<Rules>(g, c, ocs, active);
  return control_detail::switch_pull<Rules>(g, c, ocs, active);
}

}  // namespace tessel::autodiff
