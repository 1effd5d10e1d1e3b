// The same plan laid out on TPU targets: blocks obey the (8,128) rule, fit VMEM, and the dump says so.
#include <gtest/gtest.h>

#include <string>

#include "tessel/ops.hpp"
#include "tessel/dump.hpp"

namespace {
using tessel::shape;
using tessel::tensor;

TEST(TargetView, SoftmaxRowsStayWholeInVmem) {
  const auto f = [](auto x) { return tessel::softmax(x); };
  constexpr auto& p = decltype(tessel::jit(f))::traced_for<tensor<float, shape<4096, 1024>>>::plan;
  static_assert(tessel::check_fits<tessel::targets::tpu_v4, p>());
  constexpr auto d = tessel::plan::describe_kernel(p, 0);
  constexpr auto b = tessel::tiling::plan_blocks(tessel::targets::tpu_v4, d);
  static_assert(b.ok() && b.blocks[0].block.d[1] == 1024 && b.blocks[0].block.d[0] % 8 == 0);
  static_assert(b.vmem_bytes <= tessel::targets::tpu_v4.vmem_bytes);
  const std::string text = tessel::dump<tessel::targets::tpu_v4>(f, tensor<float, shape<4096, 1024>>{});
  EXPECT_EQ(text.rfind("kernels: 1\n", 0), 0u);
  EXPECT_NE(text.find("on tpu_v4: 2 core(s), VMEM 16 MiB per core"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel 0 row grid [8] blocks [512,1024] [512,1024]"), std::string::npos) << text;
}

TEST(TargetView, MatmulWithEpilogueIsOneMxuKernel) {
  const auto f = [](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); };
  constexpr auto& p = decltype(tessel::jit(f))::traced_for<tensor<tessel::bfloat16, shape<2048, 2048>>,
                                                           tensor<tessel::bfloat16, shape<2048, 2048>>,
                                                           tensor<tessel::bfloat16, shape<2048>>>::plan;
  static_assert(tessel::check_fits<tessel::targets::tpu_v5e, p>());
  constexpr auto b = tessel::tiling::plan_blocks(tessel::targets::tpu_v5e, tessel::plan::describe_kernel(p, 0));
  static_assert(b.ok() && b.kind == tessel::tiling::pattern::matmul);
  static_assert(b.blocks[0].block.d[0] % 128 == 0 && b.blocks[1].block.d[1] % 128 == 0);  // MXU-aligned
}
}  // namespace
