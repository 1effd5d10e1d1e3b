// expect: tessel::conv_general: input f32[8,28,28,3] has 3 channels but filter f32[3,3,1,32] expects 1
// expect: fix: the filter is HWIO [KH,KW,C,O] with C the last axis of the NHWC input
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<8, 28, 28, 3>> x;
  tessel::tensor<float, tessel::shape<3, 3, 1, 32>> w;
  auto y = tessel::jit([](auto x, auto w) {
    return tessel::conv_general<tessel::stride<1, 1>, tessel::padding::same>(x, w);
  })(x, w);
  return static_cast<int>(y[0]);
}
