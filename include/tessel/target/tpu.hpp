#pragma once
// TPU generations with their published figures (ARCHITECTURE.md §4's table, from JAX's tpu_info and
// Google's scaling notes). Per TensorCore: VMEM, the vreg tile and the MXUs; per chip: HBM, its
// bandwidth and FLOP/s. HBM capacities are read as GiB, as JAX's memory_stats reports them.
//
// Derived, not published:
//   - peak_flops_f32 = bf16 / 6: a full-precision f32 matmul is six bf16 MXU passes (XLA's Precision.HIGHEST);
//   - ici_alpha_s = 1 µs per hop; ici_beta_s_per_byte = 1 / (one link's one-way bandwidth);
//   - the planner's block caps (block_bytes 2 MiB, matmul 512 x 512 x 1024): a 2 MiB block moves in
//     about 2.5 µs at 0.82 TB/s, well above Pallas's ~0.35 µs per grid step, so larger blocks gain nothing.

#include "tessel/target/target.hpp"

namespace tessel::targets {

namespace detail {
inline constexpr std::size_t mib = std::size_t{1} << 20;
inline constexpr std::size_t gib = std::size_t{1} << 30;

constexpr target tpu(name_string name, std::size_t cores, std::size_t vmem, std::size_t mxu, std::size_t mxu_count,
                     std::size_t hbm, double hbm_bw, double bf16_flops, double ici_link_bytes_per_s, std::size_t torus) {
  return target{
      .name = name,
      .kind = target_kind::tpu,
      .cores = cores,
      .vmem_bytes = vmem,
      .sublanes = 8,
      .lanes = 128,
      .bf16_packing = 2,
      .mxu_rows = mxu,
      .mxu_cols = mxu,
      .mxu_count = mxu_count,
      .hbm_bytes = hbm,
      .hbm_bytes_per_s = hbm_bw,
      .peak_flops_bf16 = bf16_flops,
      .peak_flops_f32 = bf16_flops / 6,
      .ici_alpha_s = 1e-6,
      .ici_beta_s_per_byte = 1.0 / ici_link_bytes_per_s,
      .torus_rank = torus,
      .block_bytes = 2 * mib,
      .block_m = 512,
      .block_n = 512,
      .block_k = 1024,
      .partial_edge_blocks = false,  // tessel keeps TPU plans exact: no padded edge blocks to compute on
      .double_buffer = true,
  };
}
}  // namespace detail

//                                                cores  VMEM/core       MXU  count  HBM/chip         HBM B/s    bf16 FLOP/s  ICI B/s  torus
inline constexpr target tpu_v4 = detail::tpu(make_name("tpu_v4"), 2, 16 * detail::mib, 128, 4, 32 * detail::gib, 1.2e12, 275e12, 45e9, 3);
inline constexpr target tpu_v5e = detail::tpu(make_name("tpu_v5e"), 1, 128 * detail::mib, 128, 4, 16 * detail::gib, 0.82e12, 197e12, 45e9, 2);
// HBM bandwidth published as 2.46-2.8 TB/s; 2.765 TB/s is Google Cloud's figure.
inline constexpr target tpu_v5p = detail::tpu(make_name("tpu_v5p"), 2, 64 * detail::mib, 128, 4, 95 * detail::gib, 2.765e12, 459e12, 90e9, 3);
inline constexpr target tpu_v6e = detail::tpu(make_name("tpu_v6e"), 1, 128 * detail::mib, 256, 2, 32 * detail::gib, 1.64e12, 918e12, 90e9, 2);

}  // namespace tessel::targets
