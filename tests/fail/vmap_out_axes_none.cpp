// out_axes none for a result that depends on a mapped argument.
// expect: tessel::vmap: result leaf 0 depends on a mapped argument, but its out_axes entry is none
// expect: fix: give it an output axis
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<8, 3>> x;
  auto z = tessel::vmap([](auto a) { return a * 2.0f; }, tessel::in_axes<0>, tessel::out_axes<tessel::none>)(x);
  return static_cast<int>(z[0]);
}
