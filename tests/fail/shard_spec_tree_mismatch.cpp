// expect: tessel::shard_map: in_specs[0] is a tree of specs (specs<...>), which does not match args[0]: a spec tree gives a std::tuple one entry per element
// expect: fix: give one entry per element, or one PartitionSpec for the whole argument
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  using T = std::tuple<tensor<float, shape<>>, tensor<float, shape<4>>>;
  auto f = shard_map<mesh<axis<"data", 2>>, specs<specs<P<>, P<"data">, P<"data">>>, P<>>([](auto s) { return std::get<0>(s); });
  return static_cast<int>(f(T{})[0]);
}
