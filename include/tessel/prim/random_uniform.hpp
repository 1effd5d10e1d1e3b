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
#include "tessel/prim/family/threefry.hpp"

namespace tessel::prim {

inline void evaluate_random_uniform(const ir::node&, const void* const* in, void* out, std::size_t n) {
  const auto* k0 = static_cast<const std::uint32_t*>(in[0]);
  const auto* k1 = static_cast<const std::uint32_t*>(in[1]);
  const auto* index = static_cast<const std::uint32_t*>(in[2]);
  auto* y = static_cast<float*>(out);
  for (std::size_t i = 0; i < n; ++i)
    y[i] = kernels::unit_float_from_bits(kernels::bits32_at({k0[i], k1[i]}, index[i]));
}

// StableHLO: the block at counter (0, index), its two words xor'ed, the top 23 bits as the mantissa of a
// float in [1, 2), minus 1.
inline void lower_random_uniform(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  constexpr ir::dtype_code u32 = ir::dtype_code::u32, f32 = ir::dtype_code::f32;
  const std::string t = ir::hlo_type(u32, n.shape);
  const auto y = threefry2x32_hlo(w, w.operand(0), w.operand(1), w.constant(u32, 0, n.shape), w.operand(2), n.shape);
  const ir::hlo_value bits = w.emit("stablehlo.xor", {y[0], y[1]}, {}, t);
  const ir::hlo_value mantissa = w.emit("stablehlo.or", {w.emit("stablehlo.shift_right_logical", {bits, w.constant(u32, 9, n.shape)}, {}, t),
                                                         w.constant(u32, 0x3f800000u, n.shape)}, {}, t);
  const ir::hlo_value one_to_two = w.emit("stablehlo.bitcast_convert", {mantissa}, {}, ir::hlo_type(f32, n.shape));
  w.define(w.emit("stablehlo.subtract", {one_to_two, w.constant(f32, 1, n.shape)}, {}, one_to_two.type));
}

inline constexpr ir::primitive random_uniform_p{.name = "random_uniform",
                                                .kind = ir::prim_kind::elementwise,
                                                .evaluate = &evaluate_random_uniform,
                                                .batch = &batching::elementwise,
                                                .differentiable = false,
                                                .flops_per_element = 120, .lower = &lower_random_uniform};  // 20 threefry rounds

}  // namespace tessel::prim

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
