// expect: tessel::shard_map: in_specs[0] is P('data'), which holds for every leaf of args[0] (a tree), and leaf 2 ('bias') is of type f32[10] on a mesh of shape (4,) with axis names ('data',)
// expect: dimension 0 (of size 10) is split over 'data' of total size 4, which does not divide 10
// expect: fix: change the mesh's axis sizes, change the spec, or pad the array to a multiple of 4
#include <tessel/tessel.hpp>
using namespace tessel;
template <template <class, class> class T = tensor>
struct layer {
  BOOST_HANA_DEFINE_STRUCT(layer, (T<float, shape<8, 10>>, weight), (T<float, shape<4>>, scale), (T<float, shape<10>>, bias));
};
int main() {
  auto f = shard_map<mesh<axis<"data", 4>>, specs<P<"data">>, P<>>([](auto p) { return psum<"data">(reduce_sum<0>(p.scale)); });
  return static_cast<int>(f(layer<>{})[0]);
}
