#pragma once
// The identity's rules, for the primitives that are the identity on operand 0 at run time
// (optimization_barrier, materialize, checkpoint, custom_vjp's call, stop_gradient): its tile evaluation
// (a copy), its VJP and JVP (the cotangent and the tangent pass through), its batching rule (the same
// node on the batched operand, its batch axis kept) and its StableHLO lowering (no op: operand 0's value).
// A primitive takes the ones it shares; each says where it differs (stop_gradient passes no derivative,
// checkpoint's reverse rule is a call's, optimization_barrier is an op of its own in StableHLO).

#include <array>
#include <cstddef>
#include <cstring>

#include "tessel/ir/graph.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel::prim::identity {

inline void evaluate(const ir::node& n, const void* const* in, void* out, std::size_t count) {
  std::memcpy(out, in[0], count * ir::tile_bytes(n.dtype));
}
constexpr void vjp(ir::graph_builder&, int, int ct, std::array<int, ir::max_operands>& out) { out[0] = ct; }
constexpr int jvp(ir::graph_builder&, int, const std::array<int, ir::max_operands>& t) { return t[0]; }
constexpr int batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& operands,
                    const std::array<int, ir::max_operands>& axes, int& out_axis) {
  ir::node b = n;
  b.operands[0] = operands[0];
  b.shape = g[operands[0]].shape;
  out_axis = axes[0];
  return g.add(b);
}

inline void lower(ir::stablehlo_writer& w) { w.define(w.operand(0)); }

}  // namespace tessel::prim::identity
