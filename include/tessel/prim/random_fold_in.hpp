#pragma once
// random_fold_in: one word of jax.random.fold_in(key, data) inside a traced program: threefry2x32(key,
// (0, data)), the block random::fold_in computes on the host (random/key.hpp), word 0 or 1 by its
// attribute. random::fold_in (random/traced.hpp) emits both words as a new key.
//
// Operands: the key's two words and the data (u32, one shape). It is elementwise, so vmap folds a batch of
// data (or of keys) at once. It has no derivative (integer bits).

#include <array>
#include <cstdint>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/kernels/threefry.hpp"
#include "tessel/prim/family/threefry.hpp"

namespace tessel::prim {

inline void evaluate_random_fold_in(const ir::node& n, const void* const* in, void* out, std::size_t count) {
  const auto word = static_cast<std::size_t>(n.attr.ints[0]);
  const auto* k0 = static_cast<const std::uint32_t*>(in[0]);
  const auto* k1 = static_cast<const std::uint32_t*>(in[1]);
  const auto* data = static_cast<const std::uint32_t*>(in[2]);
  auto* y = static_cast<std::uint32_t*>(out);
  for (std::size_t i = 0; i < count; ++i) y[i] = kernels::threefry2x32({k0[i], k1[i]}, {0u, data[i]})[word];
}

// StableHLO: the block at counter (0, data), word 0 or 1.
inline void lower_random_fold_in(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const auto y = threefry2x32_hlo(w, w.operand(0), w.operand(1), w.constant(ir::dtype_code::u32, 0, n.shape), w.operand(2), n.shape);
  w.define(y[static_cast<std::size_t>(n.attr.ints[0])]);
}

inline constexpr ir::primitive random_fold_in_p{.name = "random_fold_in",
                                                .kind = ir::prim_kind::elementwise,
                                                .evaluate = &evaluate_random_fold_in,
                                                .batch = &batching::elementwise,
                                                .differentiable = false,
                                                .flops_per_element = 120, .lower = &lower_random_fold_in};  // 20 threefry rounds

}  // namespace tessel::prim

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
