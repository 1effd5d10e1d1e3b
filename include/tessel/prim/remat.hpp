#pragma once
// checkpoint (jax.checkpoint's primitive): marks the result of a rematerialised function. At run time
// it is the identity on operand 0 (the function's result) and fuses away. Its attributes name the
// policy and the function's inputs: [policy, input count, input ids...]. Reverse mode
// (transform/sweeps.hpp) treats it as a call: instead of differentiating the forward nodes, it
// recomputes them after the incoming cotangent (through optimization_barrier) and differentiates the
// copy, keeping only what the policy saves. transform/remat.hpp has the user-facing checkpoint().

#include <array>
#include <cstdint>

#include "tessel/prim/build.hpp"
#include "tessel/prim/family/identity.hpp"

namespace tessel::prim {

enum class remat_policy : std::int64_t { nothing_saveable = 0, everything_saveable = 1, dots_saveable = 2 };

// vmap: the batched function without the marker (its attributes name nodes of the unbatched program), so
// a batched checkpoint is differentiated like plain code, and a batched custom_vjp through the function.
constexpr int call_batch(ir::graph_builder&, const ir::node&, const std::array<int, ir::max_operands>& operands,
                         const std::array<int, ir::max_operands>& axes, int& out_axis) {
  out_axis = axes[0];
  return operands[0];
}

// vjp is null: reverse mode handles the call itself (autodiff::pull), JVP is the identity's.
inline constexpr ir::primitive remat_p{.name = "checkpoint",
                                       .kind = ir::prim_kind::elementwise,
                                       .evaluate = &identity::evaluate,
                                       .jvp = &identity::jvp,
                                       .batch = &call_batch,
                                       .flops_per_element = 0, .lower = &identity::lower};

}  // namespace tessel::prim

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
