// expect: tessel::plan: kernel softmax: a row of 4194304 elements (f32[64,4194304]) must stay whole in a block
// expect: needs 536870912 bytes, target tpu_v4 has 16777216 per core
// expect: fix: split the reduction
#include <tessel/target/tiling.hpp>
#include <tessel/target/tpu.hpp>
int main() {
  // A softmax over rows of 4M f32: the smallest legal block (8 rows, in and out, double-buffered) is 512 MiB.
  constexpr auto plan = tessel::check_kernel_fits<tessel::targets::tpu_v4,
      tessel::tiling::row_kernel(tessel::make_name("softmax"), 64, 1 << 22, tessel::ir::dtype_code::f32, 2, 0)>();
  return plan.ok() ? 0 : 1;
}
