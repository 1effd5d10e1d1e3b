// expect: tessel::shard_map: in_specs[0] gives a struct in args[0] a tree of specs (specs<...>), one per member, but f sees a struct whose members are all blocks of one PartitionSpec
// expect: fix: one PartitionSpec for the whole struct, the members as separate arguments, or tessel::jit<M>(f, in_shardings<...>, out_shardings<...>)
#include <tessel/tessel.hpp>
using namespace tessel;
template <template <class, class> class T = tensor>
struct layer {
  BOOST_HANA_DEFINE_STRUCT(layer, (T<float, shape<8, 4>>, w), (T<float, shape<3>>, b));
};
int main() {
  // b (f32[3]) cannot be split over 2 devices; a per-member spec tree cannot be given to shard_map.
  auto f = shard_map<mesh<axis<"data", 2>>, specs<specs<P<"data">, P<>>>, P<>>([](auto l) { return l.b; });
  return static_cast<int>(f(layer<>{})[0]);
}
