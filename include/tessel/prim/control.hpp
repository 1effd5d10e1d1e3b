#pragma once
// region_parameter and control: the two primitives of control flow (scan, switch; transform/scan.hpp,
// transform/cond.hpp). A construct's bodies are traced once into the program's own table as regions
// (ir/graph.hpp); region_parameter is a value the construct feeds a body each time it runs it (a carry, a
// slice of xs, a branch operand) and control is one output of the construct (a final carry, stacked ys,
// the taken branch's result). Neither has kernels: the planner plans each region as a range of kernels and
// the executor runs that range per step (scan) or for the chosen branch (switch). Gradients go through the
// whole construct at once (transform/control_vjp.hpp, control_jvp.hpp), not through these nodes one by one.

#include <cstdint>
#include <vector>

#include "tessel/core/fixed_string.hpp"
#include "tessel/ir/tracer.hpp"

namespace tessel::prim {

inline constexpr ir::primitive region_parameter_p{.name = "region_parameter", .kind = ir::prim_kind::region_parameter,
                                                  .flops_per_element = 0};
// A control node's varying mesh axes are set where it is made (output below), from its construct.
constexpr std::uint8_t as_given(const ir::node& n, std::uint8_t) { return n.varying; }
inline constexpr ir::primitive control_p{.name = "control", .kind = ir::prim_kind::control, .varying = &as_given, .flops_per_element = 0};

namespace control {

// A new construct, run inside the region being traced now.
constexpr int new_construct(ir::graph_builder& g, ir::construct_kind kind) {
  ir::construct_record c;
  c.kind = kind;
  c.parent = g.current_region();
  c.first_node = static_cast<int>(g.size());
  g.constructs.push_back(c);
  return static_cast<int>(g.constructs.size() - 1);
}

// Opens the next region (body or branch) of construct c; nodes traced until close_region go into it.
constexpr int open_region(ir::graph_builder& g, int c) {
  ir::region_record r;
  r.construct = c;
  g.regions.push_back(r);
  const int id = static_cast<int>(g.regions.size() - 1);
  ir::construct_record& cr = g.constructs[static_cast<std::size_t>(c)];
  if (cr.region_count == 0) cr.first_region = id;
  ++cr.region_count;
  g.open_regions.push_back(id);
  return id;
}

// Region r's next parameter, varying along the mesh axes `varying` (inside shard_map: those of the value
// it stands for). A transform that makes a body before listing its construct's inputs (a backward scan)
// names them; they decide where its cotangents are psummed (transform/sweeps.hpp, invariant_cotangent).
constexpr int region_parameter(ir::graph_builder& g, int r, ir::dtype_code dtype, const ir::dims& shape, std::uint8_t varying) {
  ir::node n;
  n.prim = &region_parameter_p;
  n.dtype = n.operand_dtype = dtype;
  n.shape = shape;
  n.attr.push(r);
  n.attr.push(static_cast<std::int64_t>(g.regions[static_cast<std::size_t>(r)].params.size()));
  n.varying = varying;
  const int id = g.add_parameter(n);
  g.regions[static_cast<std::size_t>(r)].params.push_back(id);
  return id;
}
// Region r's next parameter, varying as the construct input it stands for (a carry as its init): the
// construct's inputs are listed before its regions are traced.
constexpr int region_parameter(ir::graph_builder& g, int r, ir::dtype_code dtype, const ir::dims& shape) {
  const std::size_t index = g.regions[static_cast<std::size_t>(r)].params.size();
  const ir::construct_record& c = g.constructs[static_cast<std::size_t>(g.regions[static_cast<std::size_t>(r)].construct)];
  return region_parameter(g, r, dtype, shape, index < c.inputs.size() ? g[c.inputs[index]].varying : std::uint8_t{0});
}

constexpr void close_region(ir::graph_builder& g, int r, const std::vector<int>& results) {
  ir::region_record& region = g.regions[static_cast<std::size_t>(r)];
  region.results = results;
  g.open_regions.pop_back();
  // A scan's carry keeps its varying mesh axes (JAX: "scan function carry input and carry output must have
  // equal types"): a carry that comes out varying along an axis it went in invariant along is an error.
  const ir::construct_record& c = g.constructs[static_cast<std::size_t>(region.construct)];
  if (c.kind != ir::construct_kind::scan) return;
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.carries) && i < results.size() && i < region.params.size(); ++i) {
    const std::uint8_t in = g[region.params[i]].varying, out = g[results[i]].varying;
    if ((out & ~in) == 0) continue;
    message_builder m;
    m << "tessel::scan: carry " << static_cast<std::uint64_t>(i) << " goes into the body varying along mesh axes {";
    auto list = [&](std::uint8_t bits) {
      bool first = true;
      for (std::size_t a = 0; a < g.mesh.rank; ++a)
        if (bits & (1u << a)) {
          m << (first ? "" : ", ") << g.mesh.name(a);
          first = false;
        }
    };
    list(in);
    m << "} and comes out varying along {";
    list(out);
    m << "}; a carry must keep its varying axes; fix: apply tessel::pvary over {";
    list(static_cast<std::uint8_t>(out & ~in));
    m << "} to the initial carry";
    g.report_error(m.view());
    return;
  }
}

// The construct's next output (output o is result o of the region that ran).
constexpr int output(ir::graph_builder& g, int c, ir::dtype_code dtype, const ir::dims& shape) {
  ir::node n;
  n.prim = &control_p;
  n.dtype = n.operand_dtype = dtype;
  n.shape = shape;
  n.attr.push(c);
  const std::size_t o = g.constructs[static_cast<std::size_t>(c)].outputs.size();
  n.attr.push(static_cast<std::int64_t>(o));
  // It varies as what any of its regions returns for it, a scan's carry also as its init, a switch's
  // result also as its index.
  const ir::construct_record& cr = g.constructs[static_cast<std::size_t>(c)];
  for (int q = cr.first_region; q < cr.first_region + cr.region_count; ++q) {
    const ir::region_record& region = g.regions[static_cast<std::size_t>(q)];
    if (o < region.results.size()) n.varying |= g[region.results[o]].varying;
  }
  if (cr.kind == ir::construct_kind::scan && o < static_cast<std::size_t>(cr.carries) && o < cr.inputs.size()) n.varying |= g[cr.inputs[o]].varying;
  if (cr.kind == ir::construct_kind::switch_ && cr.index >= 0) n.varying |= g[cr.index].varying;
  const int id = g.add(n);
  g.constructs[static_cast<std::size_t>(c)].outputs.push_back(id);
  return id;
}

// A shape with `length` prepended (a scan's stacked ys).
constexpr ir::dims stacked(std::size_t length, const ir::dims& s) {
  ir::dims out;
  out.rank = static_cast<std::uint8_t>(s.rank + 1);
  out.d[0] = length;
  for (std::size_t i = 0; i < s.rank; ++i) out.d[i + 1] = s.d[i];
  return out;
}
constexpr ir::dims unstacked(const ir::dims& s) {
  ir::dims out;
  out.rank = static_cast<std::uint8_t>(s.rank - 1);
  for (std::size_t i = 1; i < s.rank; ++i) out.d[i - 1] = s.d[i];
  return out;
}

}  // namespace control
}  // namespace tessel::prim

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
