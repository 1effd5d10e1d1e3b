// expect: tessel::shard_map: in_specs[0] is P('model'), for args[0] of type f32[8]
// expect: dimension 0 names axis 'model', which the mesh does not have
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = shard_map<mesh<axis<"data", 2>>, specs<P<"model">>, P<"data">>([](auto x) { return x; });
  return static_cast<int>(f(tensor<float, shape<8>>{})[0]);
}
