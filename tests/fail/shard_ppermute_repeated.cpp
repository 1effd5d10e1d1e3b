// expect: tessel::ppermute: the pairs ((0, 1), (2, 1)) repeat a destination
// expect: sources and destinations must each be unique
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = shard_map<mesh<axis<"i", 4>>, specs<P<"i">>, P<"i">>([](auto x) { return ppermute<"i", edge{0, 1}, edge{2, 1}>(x); });
  return static_cast<int>(f(tensor<float, shape<8>>{})[0]);
}
