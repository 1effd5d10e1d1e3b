// in_axes names an axis the argument does not have.
// expect: tessel::vmap: in_axes gives axis 2 for argument 1, which has rank 1 (valid axes are -1 to 0)
// expect: fix: name an axis of the argument, or none to share it
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<8, 3>> x;
  tessel::tensor<float, tessel::shape<8>> y;
  auto z = tessel::vmap([](auto a, auto b) { return a * b; }, tessel::in_axes<0, 2>)(x, y);
  return static_cast<int>(z[0]);
}
