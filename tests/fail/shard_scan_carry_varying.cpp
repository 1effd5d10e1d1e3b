// expect: tessel::scan: carry 0 goes into the body varying along mesh axes {} and comes out varying along {i}
// expect: fix: apply tessel::pvary over {i} to the initial carry
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = shard_map<mesh<axis<"i", 2>>, specs<P<"i">, P<>>, P<"i">>([](auto xs, auto init) {
    auto [c, ys] = scan([](auto carry, auto x) { return std::tuple{carry + x, std::tuple<>{}}; }, init, xs);
    return c;
  });
  return static_cast<int>(f(tensor<float, shape<8, 3>>{}, tensor<float, shape<3>>{})[0]);
}
