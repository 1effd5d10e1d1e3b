// Two mapped arguments whose batch axes differ in size.
// expect: tessel::vmap: mapped axes have different sizes: argument 0 has 8 along its mapped axis, argument 1 has 4 along axis 0
// expect: fix: map axes of one size
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<8, 3>> x;
  tessel::tensor<float, tessel::shape<4, 3>> y;
  auto z = tessel::vmap([](auto a, auto b) { return a + b; })(x, y);
  return static_cast<int>(z[0]);
}
