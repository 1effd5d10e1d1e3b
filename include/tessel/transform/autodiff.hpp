#pragma once
// Automatic differentiation on the traced table, whole: the reverse and forward sweeps
// (transform/sweeps.hpp) and the rules of control flow they call for a scan or a switch
// (transform/control_vjp.hpp, transform/control_jvp.hpp), which differentiate the bodies with the same
// sweeps. The sweeps take the rules as a parameter, control_rules by default, defined here: so no part
// includes another part that includes it back, and whoever runs a sweep includes this header.

#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/transform/control_jvp.hpp"
#include "tessel/transform/control_vjp.hpp"
#include "tessel/transform/sweeps.hpp"

namespace tessel::autodiff {

struct control_rules {
  static constexpr std::vector<pulled> pull(ir::graph_builder& g, int id, const std::vector<int>& cts, const std::vector<char>& active) {
    return construct_pull<control_rules>(g, id, cts, active);
  }
  static constexpr void jvp(ir::graph_builder& g, int id, std::vector<int>& tangents) { construct_jvp<control_rules>(g, id, tangents); }
};

}  // namespace tessel::autodiff
