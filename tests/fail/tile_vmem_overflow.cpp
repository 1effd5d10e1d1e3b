// expect: tessel::check_block_spec: blocks f32[4096,4096], f32[4096,4096], f32[4096,4096] need 402653184 bytes (3 operands x2 double-buffered)
// expect: target tpu_v5e has 134217728 per core
// expect: fix: smaller blocks
#include <tessel/target/tiling.hpp>
#include <tessel/target/tpu.hpp>
int main() {
  // Three operands (two inputs, one output) share the block; each is 64 MiB, twice for double buffering.
  constexpr auto check = tessel::check_block_spec<tessel::targets::tpu_v5e, tessel::shape<8192, 8192>, tessel::shape<4096, 4096>, float, 3>();
  return check.ok() ? 0 : 1;
}
