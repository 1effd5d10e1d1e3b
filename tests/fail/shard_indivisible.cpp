// expect: tessel::shard_map: in_specs[0] is P('data'), for args[0] of type f32[6] on a mesh of shape (4,) with axis names ('data',)
// expect: dimension 0 (of size 6) is split over 'data' of total size 4, which does not divide 6
// expect: fix: change the mesh's axis sizes, change the spec, or pad the array to a multiple of 4
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = shard_map<mesh<axis<"data", 4>>, specs<P<"data">>, P<"data">>([](auto x) { return x; });
  return static_cast<int>(f(tensor<float, shape<6>>{})[0]);
}
