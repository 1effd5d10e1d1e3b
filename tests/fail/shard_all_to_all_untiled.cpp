// expect: tessel::all_to_all: the operand is f32[3,4] and its split dimension 0 has size 3, which must equal the group size (4 devices along the axes)
// expect: fix: use tiled = true, or reshape so that the dimension has the group's size
#include <tessel/tessel.hpp>
using namespace tessel;
using M = mesh<axis<"i", 4>>;
int main() {
  auto f = shard_map<M, specs<P<"i">>, P<"i">>([](auto x) { return all_to_all<M, "i", 0, 1>(x); });
  return static_cast<int>(f(tensor<float, shape<12, 4>>{})[0]);
}
