#pragma once
// random_uniform: f32 samples in [0, 1) drawn inside a traced program, bit-exact with
// jax.random.uniform(key, shape) (threefry2x32 in JAX's partitionable mode, kernels/threefry.hpp).
//
// Operands: the key's two words (u32, broadcast) and each element's flat index (u32): element i is
// unit_float_from_bits(bits32_at(key, i)), as random::uniform computes on the host (its fused scale and
// shift by 1 and 0 leave the value as it is). It is elementwise, so it fuses into the loop that uses it
// (a dropout mask costs no buffer), and vmap maps a batch of keys through it. It has no derivative (the samples do not depend on anything continuous).
//
//   auto u = tessel::random::uniform<shape<128, 256>>(key);   // key: random::key_words (a jit argument)

#include <array>
#include <cstdint>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/kernels/threefry.hpp"

namespace tessel::prim {

inline void evaluate_random_uniform(const ir::node&, const void* const* in, void* out, std::size_t n) {
  const auto* k0 = static_cast<const std::uint32_t*>(in[0]);
  const auto* k1 = static_cast<const std::uint32_t*>(in[1]);
  const auto* index = static_cast<const std::uint32_t*>(in[2]);
  auto* y = static_cast<float*>(out);
  for (std::size_t i = 0; i < n; ++i)
    y[i] = kernels::unit_float_from_bits(kernels::bits32_at({k0[i], k1[i]}, index[i]));
}

inline constexpr ir::primitive random_uniform_p{.name = "random_uniform",
                                                .kind = ir::prim_kind::elementwise,
                                                .evaluate = &evaluate_random_uniform,
                                                .batch = &batching::elementwise,
                                                .differentiable = false,
                                                .flops_per_element = 120};  // 20 threefry rounds

}  // namespace tessel::prim

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
