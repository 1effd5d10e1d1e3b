// expect: tessel::check_block_spec: block [512,384] does not divide f32[4096,1024]: dim 1 is 1024, not a multiple of 384
// expect: fix: choose block dims that divide the array dims
#include <tessel/target/tiling.hpp>
#include <tessel/target/tpu.hpp>
int main() {
  constexpr auto check = tessel::check_block_spec<tessel::targets::tpu_v5e, tessel::shape<4096, 1024>, tessel::shape<512, 384>>();
  return check.ok() ? 0 : 1;
}
