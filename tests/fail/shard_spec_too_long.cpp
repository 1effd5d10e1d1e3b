// expect: tessel::shard_map: in_specs[0] is P('i', None), for args[0] of type f32[8]
// expect: the spec has 2 entries but the value has rank 1
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = shard_map<mesh<axis<"i", 2>>, specs<P<"i", none>>, P<"i">>([](auto x) { return x; });
  return static_cast<int>(f(tensor<float, shape<8>>{})[0]);
}
