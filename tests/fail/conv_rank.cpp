// expect: tessel::conv_general: input f32[28,28] has rank 2 but must have rank 4 (NHWC: batch, height, width, channels)
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<28, 28>> x;
  tessel::tensor<float, tessel::shape<3, 3, 1, 8>> w;
  auto y = tessel::jit([](auto x, auto w) {
    return tessel::conv_general<tessel::stride<1, 1>, tessel::padding::same>(x, w);
  })(x, w);
  return static_cast<int>(y[0]);
}
