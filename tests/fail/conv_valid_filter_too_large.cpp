// expect: tessel::conv_general: filter f32[5,5,1,8] spans a 5x5 window, larger than input f32[2,3,4,1] (3x4) with padding::valid padding
// expect: fix: use padding::same, a smaller filter or a larger input
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2, 3, 4, 1>> x;
  tessel::tensor<float, tessel::shape<5, 5, 1, 8>> w;
  auto y = tessel::jit([](auto x, auto w) {
    return tessel::conv_general<tessel::stride<1, 1>, tessel::padding::valid>(x, w);
  })(x, w);
  return static_cast<int>(y[0]);
}
