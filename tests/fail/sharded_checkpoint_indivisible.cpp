// expect: tessel::io::sharded_snapshot::add: Spec[0] is P('data'), which holds for every leaf of args[0] (a tree), and leaf 1 ('bias') is of type f32[10] on a mesh of shape (4,) with axis names ('data',)
// expect: dimension 0 (of size 10) is split over 'data' of total size 4, which does not divide 10
// expect: fix: change the mesh's axis sizes, change the spec, or pad the array to a multiple of 4
#include <tessel/io/sharded_checkpoint.hpp>
using namespace tessel;
template <template <class, class> class T = tensor>
struct layer {
  BOOST_HANA_DEFINE_STRUCT(layer, (T<float, shape<8, 12>>, weight), (T<float, shape<10>>, bias));
};
int main() {
  const layer<> params{};
  io::sharded_snapshot s(1);
  s.add<mesh<axis<"data", 4>>, P<"data">>("params", params);
}
