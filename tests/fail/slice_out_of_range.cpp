// expect: tessel::slice: on axis 1 of f32[4,5] the slice start 2, limit 7, stride 1 breaks 0 <= start <= limit <= 5
// expect: fix: keep the slice inside the axis
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<4, 5>> x;
  auto y = tessel::jit([](auto v) { return tessel::slice<std::array{0, 2}, std::array{4, 7}>(v); })(x);
  return static_cast<int>(y[0]);
}
