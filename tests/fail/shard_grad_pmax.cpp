// expect: a transform needs the VJP rule of primitive pmax, which it does not have
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = shard_map<mesh<axis<"i", 2>>, specs<P<"i">>, P<"i">>(
      [](auto x) { return grad([](auto v) { return sum(pmax<"i">(v)); })(x); });
  return static_cast<int>(f(tensor<float, shape<8>>{})[0]);
}
