// expect: tessel::check_block_spec: block [100,256] of f32[4096,1024] breaks the tiling rule of target tpu_v5e
// expect: fix: make the last two block dims multiples of 8 and 128 or equal to the array dims
#include <tessel/target/tiling.hpp>
#include <tessel/target/tpu.hpp>
int main() {
  constexpr auto check = tessel::check_block_spec<tessel::targets::tpu_v5e, tessel::shape<4096, 1024>, tessel::shape<100, 256>>();
  return check.ok() ? 0 : 1;
}
