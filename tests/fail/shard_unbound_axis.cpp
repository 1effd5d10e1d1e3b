// expect: tessel::pmean: unbound axis name 'data'
// expect: fix: call it inside tessel::shard_map over a mesh with an axis 'data'
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto g = jit([](auto x) { return pmean<"data">(x); });  // the seeds' pmean inside pjit
  return static_cast<int>(g(tensor<float, shape<8>>{})[0]);
}
