#pragma once
// The host target: the CPU that tessel runs on, planned with the same grid-over-blocks model as a TPU.
//
// Two of them. `targets::host` is a compile-time description, for what must be known while compiling
// (check_fits, dump_on, the collectives' cost estimates); its figures were measured on one development
// machine (a 2-vCPU AVX-512 Xeon with 2 MiB of L2 per core; shared/docs/TARGETS.md), single runs on a
// quiet machine, or derived from them. `targets::this_host()` is the machine the process runs on, read at
// run time (kernels/machine.hpp): the executor plans every kernel's blocks for it with the same tiling
// code (plan::blocks_of), so block sizes follow the real caches, cores and SIMD width.

#include "tessel/kernels/amx.hpp"
#include "tessel/kernels/machine.hpp"
#include "tessel/target/target.hpp"

namespace tessel::targets {

inline constexpr target host{
    .name = make_name("host"),
    .kind = target_kind::host,
    .cores = 2,                  // the dev machine's hardware threads; the executor may use more at run time
    .vmem_bytes = 1u << 20,      // half of the 2 MiB L2 per core: the other half keeps the packed GEMM panels and the stack
    .sublanes = 1,               // an AVX-512 register: 16 f32 lanes (64 bytes), 32 bf16 lanes
    .lanes = 16,
    .bf16_packing = 2,
    .mxu_rows = 12,              // the GEMM micro-kernel's register tile, 12 rows x 32 f32 columns (kernels/gemm.hpp)
    .mxu_cols = 32,
    .mxu_count = 1,
    .hbm_bytes = 16ull << 30,    // DRAM; not knowable at compile time, a conservative 16 GiB
    .hbm_bytes_per_s = 28e9,     // 2 cores x 14 GB/s, the triad measured on one thread (two threads measured 34 GB/s)
    .peak_flops_bf16 = 168e9,    // 2 x the 84 GFLOP/s of vdpbf16ps measured on one thread (half the f32 FMA rate)
    .peak_flops_f32 = 338e9,     // AVX-512 FMA, measured on two threads (173 GFLOP/s on one)
    .ici_alpha_s = 2e-6,         // cores exchange through shared memory: a barrier handoff, estimated, not measured
    .ici_beta_s_per_byte = 1.0 / 14e9,  // one core's copy bandwidth
    .torus_rank = 1,
    .block_bytes = 256u << 10,   // a quarter of the scratch: two operands double-buffered fill it
    .block_m = 96,               // the GEMM's mc = 8 micro-tiles of 12 rows
    .block_n = 2048,             // the GEMM's nc; shrunk by the planner until the blocks fit the scratch
    .block_k = 512,              // the GEMM's kc
    .partial_edge_blocks = true,  // host kernels clip the last block (bm = 96 never divides 2^n)
    .double_buffer = true,
};

// The host target of a machine. Its VMEM is half of one core's L2 (the rest keeps the GEMM's packed
// panels and the stack; 512 KiB where the OS does not say), a vector register is the dispatched SIMD
// width, the "MXU" is the GEMM's register tile and the matmul block caps are the GEMM's own MC, NC and
// KC. Speeds and sizes that are not read (DRAM, peak FLOP/s, the cores' exchange) stay the estimates of
// `host`: they feed cost estimates, never block sizes.
constexpr target host_of(const kernels::machine& m) {
  target t = host;
  t.cores = m.threads;
  t.vmem_bytes = m.l2_bytes != 0 ? m.l2_bytes / 2 : std::size_t{512} << 10;
  t.lanes = m.vector_bytes / 4 != 0 ? m.vector_bytes / 4 : 4;
  t.mxu_rows = m.gemm.mr;
  t.mxu_cols = m.gemm.nr;
  if (m.amx_bf16) {  // bf16 x bf16 may take the tile unit: blocks of whole tiles
    t.bf16_mxu_rows = kernels::amx::mr;
    t.bf16_mxu_k = kernels::amx::k_chunk;
  }
  t.block_bytes = t.vmem_bytes / 4;  // two operands double-buffered fill the VMEM
  t.block_m = m.gemm.mc;
  t.block_n = m.gemm.nc;
  t.block_k = m.gemm.kc;
  return t;
}

// host_of(kernels::this_machine()), made once.
inline const target& this_host() {
  static const target t = host_of(kernels::this_machine());
  return t;
}

}  // namespace tessel::targets
