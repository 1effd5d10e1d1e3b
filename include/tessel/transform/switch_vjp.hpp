#pragma once
// Reverse mode through a switch (the rule transform/sweeps.hpp declares for constructs, for a switch).
// The backward pass is a switch on the same index whose branch b is branch b's VJP (re-traced on
// the operands), returning the operands' cotangents and those of every closure of any branch (zero
// where a branch does not read it). Bodies holding constructs of their own are copied with them.

#include <array>
#include <cstddef>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/control.hpp"
#include "tessel/transform/region_copy.hpp"
#include "tessel/transform/sweeps.hpp"

namespace tessel::autodiff::control_detail {

template <class Rules>
constexpr std::vector<pulled> switch_pull(ir::graph_builder& g, int c, const std::vector<int>& ocs, const std::vector<char>& active) {
  using namespace prim;
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  std::vector<region_nodes> members;
  std::vector<int> closures;
  for (int r = fc.first_region; r < fc.first_region + fc.region_count; ++r) {
    members.push_back(members_of(g, r, fc.outputs[0]));
    add_closures(g, r, members.back(), active, closures);
  }
  const int nops = static_cast<int>(fc.inputs.size());
  auto floating = [&](int id) { return ir::is_floating(g[id].dtype); };
  std::vector<int> out_index;
  for (std::size_t o = 0; o < ocs.size(); ++o)
    if (ocs[o] >= 0 && floating(fc.outputs[o])) out_index.push_back(static_cast<int>(o));

  const int b = control::new_construct(g, ir::construct_kind::switch_);
  {
    std::vector<int> inputs = fc.inputs;
    for (int o : out_index) inputs.push_back(ocs[static_cast<std::size_t>(o)]);
    ir::construct_record& bc = g.constructs[static_cast<std::size_t>(b)];
    bc.index = fc.index;
    bc.inputs = inputs;
  }
  for (int branch = 0; branch < fc.region_count; ++branch) {
    const int r = fc.first_region + branch;
    const region_nodes& m = members[static_cast<std::size_t>(branch)];
    const int rb = control::open_region(g, b);
    const int floor = static_cast<int>(g.size());
    std::vector<int> ops, cts_in;
    for (int j = 0; j < nops; ++j) {
      const int in = fc.inputs[static_cast<std::size_t>(j)];
      ops.push_back(control::region_parameter(g, rb, g[in].dtype, g[in].shape));
    }
    for (int o : out_index) {
      const int out = fc.outputs[static_cast<std::size_t>(o)];
      cts_in.push_back(control::region_parameter(g, rb, g[out].dtype, g[out].shape));
    }
    const ir::region_record fr = g.regions[static_cast<std::size_t>(r)];
    const std::vector<int> map = copy_region(g, r, m, ops);
    std::vector<pulled> seeds;
    for (std::size_t i = 0; i < out_index.size(); ++i)
      seeds.push_back(pulled{mapped(m, map, fr.results[static_cast<std::size_t>(out_index[i])]), cts_in[i]});
    std::vector<int> wrt;
    for (int p : ops)
      if (floating(p)) wrt.push_back(p);
    wrt.insert(wrt.end(), closures.begin(), closures.end());
    const std::vector<int> cts = reverse<Rules>(g, seeds, wrt, floor);
    std::vector<int> results;
    for (std::size_t i = 0; i < cts.size(); ++i) results.push_back(or_zeros(g, cts[i], wrt[i]));
    control::close_region(g, rb, results);
  }
  std::vector<pulled> out;
  for (int j = 0; j < nops; ++j) {
    const int in = fc.inputs[static_cast<std::size_t>(j)];
    if (floating(in)) out.push_back(pulled{in, control::output(g, b, g[in].dtype, g[in].shape)});
  }
  for (int cl : closures) out.push_back(pulled{cl, control::output(g, b, g[cl].dtype, g[cl].shape)});
  return out;
}

}  // namespace tessel::autodiff::control_detail
