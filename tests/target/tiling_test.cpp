#include <gtest/gtest.h>

#include <string_view>

#include "tessel/core/shape.hpp"
#include "tessel/target/host.hpp"
#include "tessel/target/tiling.hpp"
#include "tessel/target/tpu.hpp"

namespace {
using tessel::make_name;
using tessel::shape;
using tessel::ir::dtype_code;
using tessel::tiling::block_plan;
using tessel::tiling::index_map;
using tessel::tiling::make_dims;
using tessel::tiling::plan_blocks;
using tessel::tiling::tile_error;
namespace targets = tessel::targets;
namespace tiling = tessel::tiling;

constexpr std::size_t mib = std::size_t{1} << 20;

// ---- a 4096x1024 f32 row softmax (one input, one output) ----------------------------------------
constexpr auto softmax = tiling::row_kernel(make_name("softmax"), 4096, 1024, dtype_code::f32, 2, 0);

// v5e: 512 whole rows (2 MiB per block, the target's preference), x2 operands x2 buffers = 8 MiB.
constexpr block_plan softmax_v5e = plan_blocks(targets::tpu_v5e, softmax);
static_assert(softmax_v5e.ok());
static_assert(softmax_v5e.blocks[0].block == make_dims({512, 1024}) && softmax_v5e.blocks[1].block == make_dims({512, 1024}));
static_assert(softmax_v5e.grid == make_dims({8}) && softmax_v5e.parallel[0]);
static_assert(softmax_v5e.vmem_bytes == 8 * mib);

// host: 64 rows fill the 1 MiB scratch exactly (64 x 4 KiB x 2 operands x 2 buffers).
constexpr block_plan softmax_host = tessel::check_kernel_fits<targets::host, softmax>();
static_assert(softmax_host.blocks[0].block == make_dims({64, 1024}) && softmax_host.grid == make_dims({64}));
static_assert(softmax_host.vmem_bytes == targets::host.vmem_bytes);

// A row sum's reduced output (rows) is a rank-1 block: its rows must be a multiple of the lanes.
constexpr block_plan row_sum = plan_blocks(targets::tpu_v5e, tiling::row_kernel(make_name("sum"), 4096, 1024, dtype_code::f32, 1, 1));
static_assert(row_sum.ok() && row_sum.blocks[1].block == make_dims({512}) && row_sum.blocks[1].block[0] % 128 == 0);

// A row longer than VMEM allows is an error, with what is needed.
constexpr block_plan too_long = plan_blocks(targets::tpu_v4, tiling::row_kernel(make_name("softmax"), 64, 1 << 22, dtype_code::f32, 2, 0));
static_assert(too_long.error == tile_error::row_too_long && too_long.min_rows == 8 && too_long.row_length == 1 << 22);
static_assert(too_long.vmem_bytes == 8ull * (1 << 22) * 4 * 2 * 2);

// ---- a 2048^3 matmul ------------------------------------------------------------------------------
constexpr auto mm_bf16 = tiling::matmul_kernel(make_name("matmul"), 2048, 2048, 2048, dtype_code::bf16, dtype_code::bf16, dtype_code::bf16);
constexpr auto mm_f32 = tiling::matmul_kernel(make_name("matmul"), 2048, 2048, 2048, dtype_code::f32, dtype_code::f32, dtype_code::f32);

// v5e: MXU-aligned blocks lhs (512,1024), rhs (1024,512), out (512,512), grid (4,4,2) with k last
// and not parallel; 2 x (1 + 1 + 0.5) MiB double-buffered + the 1 MiB f32 accumulator = 6 MiB <= 128 MiB.
constexpr block_plan mm_v5e = tessel::check_kernel_fits<targets::tpu_v5e, mm_bf16>();
static_assert(mm_v5e.blocks[0].block == make_dims({512, 1024}) && mm_v5e.blocks[1].block == make_dims({1024, 512}) &&
              mm_v5e.blocks[2].block == make_dims({512, 512}));
static_assert(mm_v5e.grid == make_dims({4, 4, 2}) && mm_v5e.parallel[0] && mm_v5e.parallel[1] && !mm_v5e.parallel[2]);
static_assert(mm_v5e.scratch_bytes == 1 * mib && mm_v5e.vmem_bytes == 6 * mib && mm_v5e.vmem_bytes <= targets::tpu_v5e.vmem_bytes);
static_assert(mm_v5e.blocks[0].block[0] % 128 == 0 && mm_v5e.blocks[0].block[1] % 128 == 0 && mm_v5e.blocks[1].block[1] % 128 == 0);

// v6e: its 256x256 MXU gets blocks in multiples of 256; f32 on v4 still fits 16 MiB.
constexpr block_plan mm_v6e = plan_blocks(targets::tpu_v6e, mm_f32);
static_assert(mm_v6e.ok() && mm_v6e.blocks[2].block[0] % 256 == 0 && mm_v6e.blocks[2].block[1] % 256 == 0);
constexpr block_plan mm_v4 = plan_blocks(targets::tpu_v4, mm_f32);
static_assert(mm_v4.ok() && mm_v4.vmem_bytes == 11 * mib && mm_v4.vmem_bytes <= 16 * mib);

// host: micro-kernel blocking, bm a multiple of 12, bn of 32, bk = 512; A's packed block and one packed
// panel of B, 512 x (96 + 32) floats, and the 96 x bn C block fit the 1 MiB VMEM up to bn = 2048 exactly, so
// N is one block of 2048. 2048 is no multiple of 96, so the last row block is partial (the host clips it).
constexpr block_plan mm_host = plan_blocks(targets::host, mm_f32);
static_assert(mm_host.ok() && mm_host.blocks[0].block == make_dims({96, 512}) && mm_host.blocks[1].block == make_dims({512, 2048}));
static_assert(mm_host.grid == make_dims({22, 1, 4}) && mm_host.vmem_bytes == (512 * (96 + 32) + 96 * 2048) * 4);

// The cores' share of a grid's time: three equal blocks on two cores keep them busy 3/4 of it, four 1;
// a 256 x 256 x 256 product on the two cores is cut into blocks they finish together.
static_assert(tiling::detail::grid_balance(1, 288, 96, 32, 32, 2) == 0.75);
static_assert(tiling::detail::grid_balance(2, 192, 96, 32, 32, 2) == 1.0);
static_assert(tiling::detail::grid_balance(1, 96, 96, 32, 32, 4) == 0.25);
constexpr block_plan mm_square = plan_blocks(targets::host, tiling::matmul_kernel(make_name("square"), 256, 256, 256, dtype_code::f32, dtype_code::f32, dtype_code::f32));
static_assert(mm_square.ok() && mm_square.grid.d[0] * mm_square.grid.d[1] % 2 == 0 && mm_square.blocks[0].block[0] % 12 == 0);
static_assert(tiling::detail::grid_balance(1, 256, mm_square.blocks[0].block[0], 256, mm_square.blocks[1].block[1], 2) == 1.0);

// On a host whose bf16 products take AMX tiles, a bf16 x bf16 product's blocks are whole tiles (rows and K
// in 32s); an f32 product keeps the vector kernel's 12 rows, and a host without the unit plans bf16 as f32.
constexpr tessel::target amx_host = tessel::targets::host_of([] {
  tessel::kernels::machine m;
  m.threads = 2;
  m.l2_bytes = 2u << 20;
  m.vector_bytes = 64;
  m.gemm = {.mr = 12, .nr = 32, .kc = 512, .mc = 96, .nc = 960};
  m.amx_bf16 = true;
  return m;
}());
static_assert(amx_host.bf16_mxu_rows == 32 && amx_host.bf16_mxu_k == 32);
constexpr auto odd_bf16 = tiling::matmul_kernel(make_name("odd"), 200, 256, 1000, dtype_code::bf16, dtype_code::bf16, dtype_code::bf16);
constexpr block_plan odd_on_tiles = plan_blocks(amx_host, odd_bf16);
static_assert(odd_on_tiles.ok() && odd_on_tiles.blocks[0].block[0] % 32 == 0 && odd_on_tiles.blocks[0].block[1] % 32 == 0);
constexpr block_plan odd_f32_beside_tiles =
    plan_blocks(amx_host, tiling::matmul_kernel(make_name("odd"), 200, 256, 1000, dtype_code::f32, dtype_code::f32, dtype_code::f32));
static_assert(odd_f32_beside_tiles.ok() && odd_f32_beside_tiles.blocks[0].block[0] % 12 == 0 && odd_f32_beside_tiles.blocks[0].block[0] % 32 != 0);
constexpr tessel::target vector_host = [] {
  tessel::target t = amx_host;
  t.bf16_mxu_rows = t.bf16_mxu_k = 0;
  return t;
}();
static_assert(plan_blocks(vector_host, odd_bf16).blocks[0].block[0] % 32 != 0);

// A short K under an epilogue that reads operands keeps N whole: in blocks narrower than C the epilogue
// runs row by row, and a row of 128 x 10 by 10 x 256 costs less to compute than one call of it. With a
// bias the product is two blocks of whole rows (72 and 56); without one it is cut 2 x 2 for balance.
constexpr auto short_k = [](bool bias) {
  tiling::kernel_description k{.name = make_name("short_k"), .kind = tiling::pattern::matmul};
  k.add(make_dims({128, 10}), dtype_code::f32, index_map::matmul_lhs);
  k.add(make_dims({10, 256}), dtype_code::f32, index_map::matmul_rhs);
  k.add(make_dims({128, 256}), dtype_code::f32, index_map::matmul_out);
  if (bias) k.add(make_dims({256}), dtype_code::f32, index_map::whole);
  return k;
};
constexpr block_plan short_k_bias = plan_blocks(targets::host, short_k(true));
static_assert(short_k_bias.ok() && short_k_bias.grid == make_dims({2, 1, 1}) && short_k_bias.blocks[2].block == make_dims({72, 256}));
constexpr block_plan short_k_alone = plan_blocks(targets::host, short_k(false));
static_assert(short_k_alone.ok() && short_k_alone.grid == make_dims({2, 2, 1}));

// A small VMEM shrinks the blocks but keeps them MXU-aligned.
constexpr tessel::target small_v5e = [] {
  tessel::target t = targets::tpu_v5e;
  t.vmem_bytes = 1 * mib;
  return t;
}();
constexpr block_plan mm_small = plan_blocks(small_v5e, mm_f32);
static_assert(mm_small.ok() && mm_small.vmem_bytes <= mib);
static_assert(mm_small.blocks[2].block[0] % 128 == 0 && mm_small.blocks[2].block[1] % 128 == 0 && mm_small.blocks[0].block[1] % 128 == 0);

// Batched matmul: one batch element per step, the batch axis first in the grid.
constexpr auto bmm = [] {
  tiling::kernel_description k{.name = make_name("bmm"), .kind = tiling::pattern::matmul};
  k.add(make_dims({4, 256, 512}), dtype_code::bf16, index_map::matmul_lhs);
  k.add(make_dims({4, 512, 384}), dtype_code::bf16, index_map::matmul_rhs);
  k.add(make_dims({4, 256, 384}), dtype_code::f32, index_map::matmul_out);
  k.add(make_dims({384}), dtype_code::f32, index_map::whole);  // a bias, resident
  return k;
}();
constexpr block_plan bmm_v5e = plan_blocks(targets::tpu_v5e, bmm);
// N = 384 is under the 512 cap, so the whole dim (legal whatever its size) is one block.
static_assert(bmm_v5e.ok() && bmm_v5e.blocks[0].block == make_dims({1, 256, 512}) && bmm_v5e.blocks[1].block == make_dims({1, 512, 384}));
static_assert(bmm_v5e.grid == make_dims({4, 1, 1, 1}) && !bmm_v5e.parallel[3] && bmm_v5e.blocks[3].block == make_dims({384}));

// ---- bf16 packing ---------------------------------------------------------------------------------
// A row too long for the preferred block size keeps the fewest rows the tile allows: 16 for bf16, 8 for f32.
constexpr block_plan wide_bf16 = plan_blocks(targets::tpu_v5e, tiling::elementwise_kernel(make_name("add"), make_dims({4096, 1 << 20}), dtype_code::bf16, 3));
constexpr block_plan wide_f32 = plan_blocks(targets::tpu_v5e, tiling::elementwise_kernel(make_name("add"), make_dims({4096, 1 << 20}), dtype_code::f32, 3));
static_assert(wide_bf16.ok() && wide_bf16.blocks[0].block == make_dims({16, 65536}));
static_assert(wide_f32.ok() && wide_f32.blocks[0].block == make_dims({8, 65536}));
// A user block of (8,128) is legal for f32 but not for bf16.
static_assert(tessel::check_block_spec<targets::tpu_v5e, shape<64, 256>, shape<8, 128>, float>().ok());
static_assert(tessel::check_block_spec<targets::tpu_v5e, shape<64, 256>, shape<16, 128>, tessel::bfloat16>().ok());
constexpr tiling::block_spec bf16_8x128{make_dims({8, 128}), make_dims({64, 256}), dtype_code::bf16, index_map::elementwise};
static_assert(tiling::check_blocks(targets::tpu_v5e, &bf16_8x128, 1).error == tile_error::tiling_rule);

// ---- elementwise loops ----------------------------------------------------------------------------
constexpr block_plan flat_host = plan_blocks(targets::host, tiling::elementwise_kernel(make_name("relu"), make_dims({1 << 24}), dtype_code::f32, 2));
static_assert(flat_host.blocks[0].block == make_dims({65536}) && flat_host.grid == make_dims({256}));
constexpr block_plan small_loop = plan_blocks(targets::tpu_v5e, tiling::elementwise_kernel(make_name("mul"), make_dims({3, 5}), dtype_code::f32, 3));
static_assert(small_loop.blocks[0].block == make_dims({3, 5}) && small_loop.steps() == 1);  // whole dims are always legal
constexpr block_plan rank4 = plan_blocks(targets::tpu_v4, tiling::elementwise_kernel(make_name("mul"), make_dims({8, 16, 4096, 4096}), dtype_code::f32, 3));
static_assert(rank4.ok() && rank4.blocks[0].block == make_dims({1, 1, 128, 4096}) && rank4.grid == make_dims({8, 16, 32, 1}));

// Single buffering halves the blocks' VMEM.
constexpr tessel::target single_buffered = [] {
  tessel::target t = targets::tpu_v5e;
  t.double_buffer = false;
  return t;
}();
static_assert(plan_blocks(single_buffered, softmax).vmem_bytes == 2 * mib * 2);

// ---- user blocks ----------------------------------------------------------------------------------
constexpr block_plan user = tessel::check_block_spec<targets::tpu_v5e, shape<4096, 1024>, shape<512, 1024>, float, 2>();
static_assert(user.grid == make_dims({8, 1}) && user.vmem_bytes == 8 * mib);
// The host pads partial edge blocks; TPU targets do not.
static_assert(tessel::check_block_spec<targets::host, shape<100, 100>, shape<12, 32>>().grid == make_dims({9, 4}));
constexpr tiling::block_spec uneven{make_dims({512, 384}), make_dims({4096, 1024}), dtype_code::f32, index_map::elementwise};
static_assert(tiling::check_blocks(targets::tpu_v5e, &uneven, 1).error == tile_error::not_divisible);
constexpr tiling::block_spec uneven_small{make_dims({64, 384}), make_dims({4096, 1024}), dtype_code::f32, index_map::elementwise};
static_assert(tiling::check_blocks(targets::host, &uneven_small, 1).ok() && tiling::check_blocks(targets::host, &uneven_small, 1).grid == make_dims({64, 3}));

std::string_view message(const block_plan& p, const tessel::target& t, std::string_view kernel) {
  static tessel::message_builder m;
  m = tiling::describe_failure(t, p, "tessel::plan", kernel);
  return m.view();
}

TEST(Tiling, EveryPlanPassesTheChecker) {
  const tessel::target all[] = {targets::host, targets::tpu_v4, targets::tpu_v5e, targets::tpu_v5p, targets::tpu_v6e};
  const tiling::kernel_description kernels[] = {
      softmax,
      mm_bf16,
      mm_f32,
      bmm,
      tiling::row_kernel(make_name("ln"), 1000, 768, dtype_code::bf16, 2, 2),
      tiling::matmul_kernel(make_name("mlp"), 128, 256, 784, dtype_code::f32, dtype_code::f32, dtype_code::f32),
      tiling::matmul_kernel(make_name("odd"), 1000, 1000, 1000, dtype_code::f32, dtype_code::f32, dtype_code::f32),
      tiling::elementwise_kernel(make_name("ew"), make_dims({4, 6, 10, 100}), dtype_code::f32, 3),
      tiling::elementwise_kernel(make_name("ew"), make_dims({8, 1 << 22}), dtype_code::bf16, 4),
      tiling::elementwise_kernel(make_name("scalar"), make_dims({}), dtype_code::f32, 2),
  };
  for (const auto& t : all) {
    for (const auto& k : kernels) {
      const block_plan p = plan_blocks(t, k);
      ASSERT_TRUE(p.ok()) << t.name.view() << " " << k.name.view() << ": " << message(p, t, k.name.view());
      const block_plan again = tiling::check_blocks(t, p.blocks.data(), p.count, p.scratch_bytes);
      EXPECT_TRUE(again.ok()) << t.name.view() << " " << k.name.view() << ": " << message(again, t, k.name.view());
      EXPECT_EQ(again.vmem_bytes, p.vmem_bytes);
      EXPECT_LE(p.vmem_bytes, t.vmem_bytes);
    }
  }
}

TEST(Tiling, ErrorsNameShapesBytesRuleAndFix) {
  EXPECT_EQ(message(too_long, targets::tpu_v4, "softmax"),
            "tessel::plan: kernel softmax: a row of 4194304 elements (f32[64,4194304]) must stay whole in a block, and the "
            "smallest block (8 rows x 2 operands x2 buffers) needs 536870912 bytes, target tpu_v4 has 16777216 per core; fix: "
            "split the reduction: reduce blocks of each row, then combine the partial results");

  const block_plan rule = tiling::check_blocks(targets::tpu_v5e, &bf16_8x128, 1);
  const std::string_view text = message(rule, targets::tpu_v5e, "");
  EXPECT_NE(text.find("block [8,128] of bf16[64,256] breaks the tiling rule of target tpu_v5e"), std::string_view::npos) << text;
  EXPECT_NE(text.find("divisible by (16,128) for bf16"), std::string_view::npos) << text;

  const block_plan huge = plan_blocks(targets::tpu_v5e, [] {
    auto k = tiling::elementwise_kernel(make_name("scale"), make_dims({1024}), dtype_code::f32, 2);
    k.add(make_dims({8192, 8192}), dtype_code::f32, index_map::whole);
    return k;
  }());
  EXPECT_EQ(huge.error, tile_error::vmem_overflow);
  EXPECT_NE(message(huge, targets::tpu_v5e, "scale").find("target tpu_v5e has 134217728 per core; fix: smaller blocks"), std::string_view::npos);

  const block_plan mismatch = plan_blocks(targets::tpu_v5e, [] {
    auto k = tiling::elementwise_kernel(make_name("add"), make_dims({4, 4}), dtype_code::f32, 1);
    k.add(make_dims({4, 5}), dtype_code::f32, index_map::elementwise);
    return k;
  }());
  EXPECT_EQ(mismatch.error, tile_error::bad_description);
  EXPECT_EQ(mismatch.failed_operand, 1);
}
}  // namespace
