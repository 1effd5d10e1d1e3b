// expect: tessel::jit (with shardings): f runs a scan or a cond, which the partitioner does not split over devices
// expect: fix: write that part with tessel::shard_map (each device runs the loop on its block, with explicit collectives), or run f with plain jit
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = jit<mesh<axis<"data", 2>>>(
      [](auto h0, auto xs) { return std::get<0>(scan([](auto h, auto x) { return std::tuple{h + x, h}; }, h0, xs)); },
      in_shardings<P<"data">, P<none, "data">>, out_shardings<P<"data">>);
  return static_cast<int>(f(tensor<float, shape<4>>{}, tensor<float, shape<3, 4>>{})[0]);
}
