#pragma once
// A target: the compile-time description of a machine that kernels are planned for (ARCHITECTURE.md §4).
//
// A `target` is a literal, structural type: it is a constexpr value and a class-type template argument
// (`tessel::check_kernel_fits<tessel::targets::tpu_v5e, ...>()`). The named targets live in
// target/host.hpp and target/tpu.hpp. Conventions:
//   - vmem_bytes, the vreg tile and the matrix unit are per core; hbm_*, peak_flops_* are per chip
//     (a chip's cores share them, as a JAX TPU device does), so a kernel's roofline uses chip figures;
//   - on a host, "chip" is the whole machine, "VMEM" the per-core scratch that blocks are copied into
//     (a share of L2), "HBM" the DRAM, and the "matrix unit" the GEMM micro-kernel's register tile.
//
// Cost helpers for `dump` and the sharding planner are here too: a kernel's roofline time and the
// alpha-beta time of a ring all-reduce.

#include <cstddef>
#include <cstdint>

#include "tessel/core/fixed_string.hpp"
#include "tessel/ir/graph.hpp"

namespace tessel {

// Names of targets and kernels, stored in a fixed capacity so that they stay structural template arguments.
using name_string = fixed_string<32>;

// name_string from a literal; a name that does not fit is cut (it only labels messages).
template <std::size_t N>
constexpr name_string make_name(const char (&literal)[N]) {
  name_string out{};
  for (std::size_t i = 0; i + 1 < N && i + 1 < name_string::capacity; ++i) out.text[i] = literal[i];
  return out;
}

enum class target_kind : std::uint8_t { host, tpu };

// The register tile of one dtype: a block's last two dims must be multiples of (rows, cols) or whole.
struct vreg_tile {
  std::size_t rows = 1;
  std::size_t cols = 1;
};

struct target {
  name_string name{};
  target_kind kind = target_kind::tpu;
  std::size_t cores = 1;       // per chip; a kernel's parallel grid axes are split over them
  std::size_t vmem_bytes = 0;  // per core: every block of a kernel, times its buffers, must fit here

  // Vector register for 32-bit values: sublanes x lanes (TPU 8 x 128; a host SIMD register is 1 x 16 f32).
  // A bf16 register holds bf16_packing values per 32-bit slot, stacked along sublanes (TPU: 16 x 128)
  // or, where a register has one sublane (host), along lanes (1 x 32).
  std::size_t sublanes = 8;
  std::size_t lanes = 128;
  std::size_t bf16_packing = 2;

  // Matrix unit per core: an MXU of mxu_rows x mxu_cols (mxu_count of them), or a host's micro-kernel tile.
  std::size_t mxu_rows = 128;
  std::size_t mxu_cols = 128;
  std::size_t mxu_count = 1;
  // A second matrix unit that multiplies bf16 by bf16 where the host has one (AMX tiles: a register block of
  // 32 rows, K taken 32 at a time); 0: the unit above multiplies bf16 too.
  std::size_t bf16_mxu_rows = 0;
  std::size_t bf16_mxu_k = 0;

  std::size_t hbm_bytes = 0;       // per chip
  double hbm_bytes_per_s = 0;      // per chip
  double peak_flops_bf16 = 0;      // per chip, matrix unit
  double peak_flops_f32 = 0;       // per chip
  double ici_alpha_s = 0;          // interconnect latency per hop (seconds)
  double ici_beta_s_per_byte = 0;  // interconnect seconds per byte on one link, one way
  std::size_t torus_rank = 1;      // 1 for a ring of host cores, 2 or 3 for a TPU torus

  // Planner preferences. Past these sizes a bigger block only shortens the pipeline (less copy/compute
  // overlap, fewer grid steps to share over cores) without amortising the per-step cost any further.
  std::size_t block_bytes = 0;  // one operand's block in elementwise and row kernels
  std::size_t block_m = 512;    // matmul block caps
  std::size_t block_n = 512;
  std::size_t block_k = 1024;

  // Whether the last block along an axis may hang over the array's end (its kernels pad or clip it).
  bool partial_edge_blocks = false;
  // Each block gets two buffers so that the next block's copy overlaps this block's compute (Pallas's default).
  bool double_buffer = true;

  constexpr std::size_t buffers() const { return double_buffer ? 2 : 1; }
  // Bytes of one vector register.
  constexpr std::size_t simd_bytes() const { return sublanes * lanes * 4; }
  // The (rows, cols) tile a block of this dtype must be aligned to: 32-bit (sublanes, lanes), narrower
  // types packed 32 / bits times along sublanes (or lanes on a one-sublane host register).
  constexpr vreg_tile tile(ir::dtype_code dtype) const {
    const std::size_t pack = dtype == ir::dtype_code::bf16 ? bf16_packing : 4 / ir::bytes_of(dtype);
    return sublanes > 1 ? vreg_tile{sublanes * pack, lanes} : vreg_tile{sublanes, lanes * pack};
  }
  // Peak FLOP/s of the chip for arithmetic in dtype (bf16 on the matrix unit, everything else as f32).
  constexpr double peak_flops(ir::dtype_code dtype) const {
    return dtype == ir::dtype_code::bf16 ? peak_flops_bf16 : peak_flops_f32;
  }
  constexpr double hbm_bytes_per_s_per_core() const { return hbm_bytes_per_s / static_cast<double>(cores); }
  constexpr double peak_flops_per_core(ir::dtype_code dtype) const { return peak_flops(dtype) / static_cast<double>(cores); }
};

// Estimated seconds of a kernel on the whole chip: the roofline max(flops / peak, bytes / HBM bandwidth),
// with flops counted in `compute`'s precision and bytes the kernel's HBM traffic (each input read once,
// each output written once). It ignores per-step overhead and assumes perfect overlap, so it is a bound.
//   roofline_seconds(targets::tpu_v5e, 2.0 * 2048 * 2048 * 2048, 3.0 * 2048 * 2048 * 2, ir::dtype_code::bf16)
constexpr double roofline_seconds(const target& t, double flops, double bytes, ir::dtype_code compute = ir::dtype_code::f32) {
  const double compute_s = flops / t.peak_flops(compute);
  const double memory_s = bytes / t.hbm_bytes_per_s;
  return compute_s > memory_s ? compute_s : memory_s;
}

// Whether a kernel of this many flops per byte is limited by compute (true) or bandwidth on t.
constexpr bool compute_bound(const target& t, double flops, double bytes, ir::dtype_code compute = ir::dtype_code::f32) {
  return flops / t.peak_flops(compute) >= bytes / t.hbm_bytes_per_s;
}

// Alpha-beta seconds of a ring all-reduce of `bytes` per device over `devices` devices (reduce-scatter then
// all-gather): 2(N-1)·α + 2(N-1)/N · bytes·β. Zero for one device.
constexpr double ring_all_reduce_seconds(const target& t, std::size_t devices, double bytes) {
  if (devices <= 1) return 0;
  const double n = static_cast<double>(devices);
  return 2 * (n - 1) * t.ici_alpha_s + 2 * (n - 1) / n * bytes * t.ici_beta_s_per_byte;
}

// Alpha-beta seconds of one collective over a group of `devices`, `bytes` being the larger of its operand
// and result per device (SHARDING.md §5.1, MPICH's ring algorithms): all-reduce (psum, pmax, pmin)
// 2(N-1)α + 2(N-1)/N·n·β; all-gather, reduce-scatter and all-to-all (N-1)α + (N-1)/N·n·β; a permutation
// α + n·β (each device sends once, all at the same time); 0 for what moves nothing (pvary, axis_index).
enum class collective_kind : std::uint8_t { none, all_reduce, all_gather, reduce_scatter, all_to_all, permute };
constexpr double collective_seconds(const target& t, collective_kind kind, std::size_t devices, double bytes) {
  if (devices <= 1 || kind == collective_kind::none) return 0;
  const double n = static_cast<double>(devices);
  switch (kind) {
    case collective_kind::all_reduce: return ring_all_reduce_seconds(t, devices, bytes);
    case collective_kind::permute: return t.ici_alpha_s + bytes * t.ici_beta_s_per_byte;
    default: return (n - 1) * t.ici_alpha_s + (n - 1) / n * bytes * t.ici_beta_s_per_byte;
  }
}

}  // namespace tessel
