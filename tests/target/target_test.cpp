#include <gtest/gtest.h>

#include <type_traits>

#include "tessel/target/host.hpp"
#include "tessel/target/target.hpp"
#include "tessel/target/tpu.hpp"

namespace {
using tessel::target;
using tessel::ir::dtype_code;
namespace targets = tessel::targets;

constexpr std::size_t mib = std::size_t{1} << 20;

// Published per-core figures (ARCHITECTURE.md §4).
static_assert(targets::tpu_v4.cores == 2 && targets::tpu_v4.vmem_bytes == 16 * mib && targets::tpu_v4.mxu_count == 4);
static_assert(targets::tpu_v5e.cores == 1 && targets::tpu_v5e.vmem_bytes == 134217728 && targets::tpu_v5e.mxu_rows == 128);
static_assert(targets::tpu_v5p.cores == 2 && targets::tpu_v5p.vmem_bytes == 64 * mib && targets::tpu_v5p.torus_rank == 3);
static_assert(targets::tpu_v6e.mxu_rows == 256 && targets::tpu_v6e.mxu_cols == 256 && targets::tpu_v6e.mxu_count == 2);
static_assert(targets::tpu_v5e.peak_flops_bf16 == 197e12 && targets::tpu_v5e.hbm_bytes_per_s == 0.82e12);
static_assert(targets::tpu_v5e.name.view() == "tpu_v5e" && targets::host.name.view() == "host");
static_assert(targets::tpu_v5e.double_buffer && targets::tpu_v5e.buffers() == 2);

// Register tiles: (8,128) for 32-bit on a TPU, bf16 packed to (16,128); the host's AVX-512 register is 1x16 f32.
static_assert(targets::tpu_v5e.tile(dtype_code::f32).rows == 8 && targets::tpu_v5e.tile(dtype_code::f32).cols == 128);
static_assert(targets::tpu_v5e.tile(dtype_code::bf16).rows == 16 && targets::tpu_v5e.tile(dtype_code::bf16).cols == 128);
static_assert(targets::tpu_v5e.tile(dtype_code::s32).rows == 8);
static_assert(targets::host.simd_bytes() == 64 && targets::host.tile(dtype_code::f32).cols == 16);
static_assert(targets::host.tile(dtype_code::bf16).rows == 1 && targets::host.tile(dtype_code::bf16).cols == 32);
static_assert(targets::host.vmem_bytes == mib && targets::host.cores == 2 && targets::host.mxu_rows == 12 && targets::host.mxu_cols == 32);

// A target is a class-type template argument.
template <target T>
struct on_target {
  static constexpr std::size_t vmem = T.vmem_bytes;
};
static_assert(on_target<targets::tpu_v5e>::vmem == 128 * mib);
static_assert(std::is_same_v<on_target<targets::tpu_v5e>, on_target<targets::tpu_v5e>>);
static_assert(!std::is_same_v<on_target<targets::tpu_v5e>, on_target<targets::tpu_v6e>>);

// Roofline: a 2048^3 bf16 matmul on v5e is compute-bound (17.2 GFLOP / 197 TFLOP/s = 87.2 µs),
// a 4096x1024 f32 softmax memory-bound (32 MiB / 0.82 TB/s = 40.9 µs).
constexpr double matmul_flops = 2.0 * 2048 * 2048 * 2048;
constexpr double matmul_bytes = 3.0 * 2048 * 2048 * 2;
static_assert(tessel::compute_bound(targets::tpu_v5e, matmul_flops, matmul_bytes, dtype_code::bf16));
static_assert(!tessel::compute_bound(targets::tpu_v5e, 5.0 * 4096 * 1024, 2.0 * 4096 * 1024 * 4));

TEST(Target, RooflineOnKnownNumbers) {
  EXPECT_NEAR(tessel::roofline_seconds(targets::tpu_v5e, matmul_flops, matmul_bytes, dtype_code::bf16), matmul_flops / 197e12, 1e-12);
  EXPECT_NEAR(tessel::roofline_seconds(targets::tpu_v5e, 5.0 * 4096 * 1024, 2.0 * 4096 * 1024 * 4), 33554432.0 / 0.82e12, 1e-12);
  // f32 on the host: a 2048^3 SGEMM at the measured 338 GFLOP/s takes 50.8 ms.
  EXPECT_NEAR(tessel::roofline_seconds(targets::host, matmul_flops, 3.0 * 2048 * 2048 * 4), matmul_flops / 338e9, 1e-9);
  // Per-core figures divide the chip's.
  EXPECT_DOUBLE_EQ(targets::tpu_v4.peak_flops_per_core(dtype_code::bf16), 137.5e12);
  EXPECT_DOUBLE_EQ(targets::host.hbm_bytes_per_s_per_core(), 14e9);
}

TEST(Target, RingAllReduceAlphaBeta) {
  EXPECT_EQ(tessel::ring_all_reduce_seconds(targets::tpu_v5e, 1, 1e9), 0.0);
  // 2(N-1)α + 2(N-1)/N · bytes · β with N = 4, α = 1 µs, β = 1 / 45 GB/s, 1 MB.
  EXPECT_NEAR(tessel::ring_all_reduce_seconds(targets::tpu_v5e, 4, 1e6), 6e-6 + 1.5 * 1e6 / 45e9, 1e-12);
  EXPECT_NEAR(tessel::ring_all_reduce_seconds(targets::tpu_v6e, 8, 0), 14e-6, 1e-15);
}
}  // namespace
