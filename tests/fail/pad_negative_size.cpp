// expect: tessel::pad: on axis 0 of f32[3] the padding lo -2, hi -2, interior 0 leaves a negative size
// expect: fix: crop at most the axis length
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> x;
  auto y = tessel::jit([](auto v) { return tessel::pad<std::array{tessel::pad_axis{-2, -2, 0}}>(v, 0.0f); })(x);
  return static_cast<int>(y[0]);
}
