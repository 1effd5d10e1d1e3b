// expect: tessel::shard_map: in_specs[0] is P('i', 'i'), for args[0] of type f32[8,8]
// expect: axis 'i' is named twice (again at dimension 1)
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = shard_map<mesh<axis<"i", 2>>, specs<P<"i", "i">>, P<"i">>([](auto x) { return x; });
  return static_cast<int>(f(tensor<float, shape<8, 8>>{})[0]);
}
