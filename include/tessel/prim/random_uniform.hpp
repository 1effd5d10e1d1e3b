#pragma once
// random_uniform: f32 samples in [0, 1) drawn inside a traced program, bit-exact with
// jax.random.uniform(key, shape) (threefry2x32 in JAX's partitionable mode, random/threefry.hpp).
//
// Operands: the key's two words (u32, broadcast) and each element's flat index (u32): element i is
// uniform_from_bits(threefry2x32(key, {0, i}) xor-folded), as random::uniform computes on the host. It is
// elementwise, so it fuses into the loop that uses it (a dropout mask costs no buffer), and vmap maps a
// batch of keys through it. It has no derivative (the samples do not depend on anything continuous).
//
//   auto u = tessel::random::uniform<shape<128, 256>>(key);   // key: random::key_words (a jit argument)

#include <array>
#include <cstdint>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/random/distributions.hpp"
#include "tessel/random/key.hpp"

namespace tessel::prim {

inline void evaluate_random_uniform(const ir::node&, const void* const* in, void* out, std::size_t n) {
  const auto* k0 = static_cast<const std::uint32_t*>(in[0]);
  const auto* k1 = static_cast<const std::uint32_t*>(in[1]);
  const auto* index = static_cast<const std::uint32_t*>(in[2]);
  auto* y = static_cast<float*>(out);
  for (std::size_t i = 0; i < n; ++i)
    y[i] = random::uniform_from_bits<float>(random::bits32_at(random::key(k0[i], k1[i]), index[i]), 0.0f, 1.0f);
}

inline constexpr ir::primitive random_uniform_p{.name = "random_uniform",
                                                .kind = ir::prim_kind::elementwise,
                                                .evaluate = &evaluate_random_uniform,
                                                .batch = &batching::elementwise,
                                                .differentiable = false,
                                                .flops_per_element = 120};  // 20 threefry rounds

}  // namespace tessel::prim
