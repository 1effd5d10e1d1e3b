// A collective over an axis name the mesh lacks: one error naming the name and the mesh's axes.
// expect: tessel::psum: unbound axis name 'j'
// expect: fix: name one of them, or add the axis to the mesh
#include <tessel/tessel.hpp>
using M = tessel::mesh<tessel::axis<"i", 2>>;
int main() {
  tessel::tensor<float, tessel::shape<4>> x;
  auto y = tessel::shard_map<M, tessel::specs<tessel::P<"i">>, tessel::P<>>([](auto b) { return tessel::psum<"j">(b); })(x);
  return y[0] == 0 ? 0 : 1;
}
