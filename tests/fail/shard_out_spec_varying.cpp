// expect: tessel::shard_map: out_specs[0] is P(), which says result leaf 0 is the same on every device along {x}
// expect: but it may vary along {x}
// expect: fix: psum (or pmean, all_gather) it over {x}, or name those axes in the out_spec
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = shard_map<mesh<axis<"x", 2>>, specs<P<"x">>, P<>>([](auto x) { return x * 2.0f; });
  return static_cast<int>(f(tensor<float, shape<8>>{})[0]);
}
