#pragma once
// Forward mode through control flow: the jvp rule transform/sweeps.hpp declares for constructs.
// A scan carrying (carry, tangent) over (x, tangent) whose body is the body and its
// JVP (the primal scan runs as well); a switch whose branches return their outputs' tangents.

#include <array>
#include <cstddef>
#include <vector>

#include "tessel/ir/graph.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/control.hpp"
#include "tessel/transform/region_copy.hpp"
#include "tessel/transform/sweeps.hpp"

namespace tessel::autodiff {
namespace control_detail {

// jvp of a scan: a scan carrying (carry, its tangent) over (x, its tangent), whose body is the forward
// body with its JVP; the primal outputs are computed again alongside (the original scan still runs).
template <class Rules>
constexpr void scan_jvp(ir::graph_builder& g, int c, std::vector<int>& t) {
  using namespace prim;
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  const int r = fc.first_region;
  const ir::region_record fr = g.regions[static_cast<std::size_t>(r)];
  const int nc = fc.carries, nx = static_cast<int>(fc.inputs.size()) - nc, ny = static_cast<int>(fr.results.size()) - nc;
  auto floating = [&](int id) { return ir::is_floating(g[id].dtype); };
  const int b = control::new_construct(g, ir::construct_kind::scan);
  const int rb = control::open_region(g, b);
  std::vector<int> primal, tangent, xp, xt, inputs_c, inputs_t, inputs_x, inputs_xt, primal_tangents;
  for (int k = 0; k < nc; ++k) {
    const int p = fr.params[static_cast<std::size_t>(k)];
    primal.push_back(control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying));
    inputs_c.push_back(fc.inputs[static_cast<std::size_t>(k)]);
  }
  for (int k = 0; k < nc; ++k) {
    const int p = fr.params[static_cast<std::size_t>(k)];
    int pt = -1;
    if (floating(p)) {  // a carry's tangent varies as the carry (the inputs are listed at the end)
      pt = control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying);
      tangent.push_back(pt);
      const int in = fc.inputs[static_cast<std::size_t>(k)];
      inputs_t.push_back(varying_as(g, tangent_of(t, in) >= 0 ? tangent_of(t, in) : build::zeros_like(g, in), g[p].varying));
    }
    primal_tangents.push_back(pt);
  }
  for (int j = 0; j < nx; ++j) {
    const int p = fr.params[static_cast<std::size_t>(nc + j)];
    xp.push_back(control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[p].varying));
    inputs_x.push_back(fc.inputs[static_cast<std::size_t>(nc + j)]);
  }
  for (int j = 0; j < nx; ++j) {
    const int p = fr.params[static_cast<std::size_t>(nc + j)];
    const int in = fc.inputs[static_cast<std::size_t>(nc + j)];
    int pt = -1;
    if (floating(p) && tangent_of(t, in) >= 0) {
      pt = control::region_parameter(g, rb, g[p].dtype, g[p].shape, g[tangent_of(t, in)].varying);
      xt.push_back(pt);
      inputs_xt.push_back(tangent_of(t, in));
    }
    primal_tangents.push_back(pt);
  }
  std::vector<int> params = primal;
  params.insert(params.end(), xp.begin(), xp.end());
  const tangent_copy body = copy_with_tangents<Rules>(g, r, fc.outputs[0], params, primal_tangents, t);
  std::vector<int> results;
  for (int k = 0; k < nc; ++k) results.push_back(body.value(fr.results[static_cast<std::size_t>(k)]));
  for (int k = 0; k < nc; ++k) {
    const int res = fr.results[static_cast<std::size_t>(k)];
    if (floating(fr.params[static_cast<std::size_t>(k)])) results.push_back(or_zeros(g, body.tangent(res), body.value(res)));
  }
  std::vector<int> y_float;
  for (int y = 0; y < ny; ++y) results.push_back(body.value(fr.results[static_cast<std::size_t>(nc + y)]));
  for (int y = 0; y < ny; ++y) {
    const int res = fr.results[static_cast<std::size_t>(nc + y)];
    if (!floating(res)) continue;
    y_float.push_back(y);
    results.push_back(or_zeros(g, body.tangent(res), body.value(res)));
  }
  {
    ir::region_record& reg = g.regions[static_cast<std::size_t>(rb)];
    reg.params = primal;
    reg.params.insert(reg.params.end(), tangent.begin(), tangent.end());
    reg.params.insert(reg.params.end(), xp.begin(), xp.end());
    reg.params.insert(reg.params.end(), xt.begin(), xt.end());
    ir::construct_record& bc = g.constructs[static_cast<std::size_t>(b)];
    bc.length = fc.length;
    bc.reverse = fc.reverse;
    bc.carries = static_cast<int>(primal.size() + tangent.size());
    bc.inputs = inputs_c;
    bc.inputs.insert(bc.inputs.end(), inputs_t.begin(), inputs_t.end());
    bc.inputs.insert(bc.inputs.end(), inputs_x.begin(), inputs_x.end());
    bc.inputs.insert(bc.inputs.end(), inputs_xt.begin(), inputs_xt.end());
  }
  control::close_region(g, rb, results);
  for (int k = 0; k < nc; ++k) {
    const int o = fc.outputs[static_cast<std::size_t>(k)];
    control::output(g, b, g[o].dtype, g[o].shape);
  }
  for (int k = 0; k < nc; ++k) {
    const int o = fc.outputs[static_cast<std::size_t>(k)];
    if (!floating(o)) continue;
    const int tan = control::output(g, b, g[o].dtype, g[o].shape);
    if (static_cast<std::size_t>(o) < t.size()) t[static_cast<std::size_t>(o)] = tan;
  }
  for (int y = 0; y < ny; ++y) {
    const int o = fc.outputs[static_cast<std::size_t>(nc + y)];
    control::output(g, b, g[o].dtype, g[o].shape);
  }
  for (int y : y_float) {
    const int o = fc.outputs[static_cast<std::size_t>(nc + y)];
    const int tan = control::output(g, b, g[o].dtype, g[o].shape);
    if (static_cast<std::size_t>(o) < t.size()) t[static_cast<std::size_t>(o)] = tan;
  }
}

// jvp of a switch: a switch on the same index whose branch b returns branch b's output tangents.
template <class Rules>
constexpr void switch_jvp(ir::graph_builder& g, int c, std::vector<int>& t) {
  using namespace prim;
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  auto floating = [&](int id) { return ir::is_floating(g[id].dtype); };
  std::vector<int> float_outputs;
  for (std::size_t o = 0; o < fc.outputs.size(); ++o)
    if (floating(fc.outputs[o])) float_outputs.push_back(static_cast<int>(o));
  const int b = control::new_construct(g, ir::construct_kind::switch_);
  std::vector<int> inputs = fc.inputs;
  for (int in : fc.inputs)
    if (floating(in) && tangent_of(t, in) >= 0) inputs.push_back(tangent_of(t, in));
  // Listed before the branches are made: each parameter varies as the input it stands for.
  g.constructs[static_cast<std::size_t>(b)].index = fc.index;
  g.constructs[static_cast<std::size_t>(b)].inputs = inputs;
  for (int q = fc.first_region; q < fc.first_region + fc.region_count; ++q) {
    const int rb = control::open_region(g, b);
    std::vector<int> primal, tangent, primal_tangents;
    for (int in : fc.inputs) primal.push_back(control::region_parameter(g, rb, g[in].dtype, g[in].shape));
    for (int in : fc.inputs) {
      int pt = -1;
      if (floating(in) && tangent_of(t, in) >= 0) {
        pt = control::region_parameter(g, rb, g[in].dtype, g[in].shape);
        tangent.push_back(pt);
      }
      primal_tangents.push_back(pt);
    }
    const tangent_copy body = copy_with_tangents<Rules>(g, q, fc.outputs[0], primal, primal_tangents, t);
    const std::vector<int> fr_results = g.regions[static_cast<std::size_t>(q)].results;
    std::vector<int> results;
    for (int o : float_outputs) {
      const int res = fr_results[static_cast<std::size_t>(o)];
      results.push_back(or_zeros(g, body.tangent(res), body.value(res)));
    }
    g.regions[static_cast<std::size_t>(rb)].params = primal;
    g.regions[static_cast<std::size_t>(rb)].params.insert(g.regions[static_cast<std::size_t>(rb)].params.end(), tangent.begin(), tangent.end());
    control::close_region(g, rb, results);
  }
  for (int o : float_outputs) {
    const int out = fc.outputs[static_cast<std::size_t>(o)];
    const int tan = control::output(g, b, g[out].dtype, g[out].shape);
    if (static_cast<std::size_t>(out) < t.size()) t[static_cast<std::size_t>(out)] = tan;
  }
}

}  // namespace control_detail

template <class Rules>
constexpr void construct_jvp(ir::graph_builder& g, int id, std::vector<int>& t) {
  const int c = static_cast<int>(g[id].attr.ints[0]);
  const ir::construct_record fc = g.constructs[static_cast<std::size_t>(c)];
  if (fc.outputs[0] != id) return;  // the rule runs at the first output; the others' tangents are set then
  // Does any tangent reach the construct (through an input or a value a body reads from outside)?
  std::vector<char> has(t.size(), false);
  for (std::size_t i = 0; i < t.size(); ++i) has[i] = t[i] >= 0;
  bool any = false;
  for (int in : fc.inputs) any = any || control_detail::tangent_of(t, in) >= 0;
  for (int q = fc.first_region; q < fc.first_region + fc.region_count && !any; ++q) {
    std::vector<int> closures;
    control_detail::add_closures(g, q, control_detail::members_of(g, q, id), has, closures);
    any = !closures.empty();
  }
  if (!any) return;
  if (fc.kind == ir::construct_kind::scan) control_detail::scan_jvp<Rules>(g, c, t);
  else control_detail::switch_jvp<Rules>(g, c, t);
}

}  // namespace tessel::autodiff
