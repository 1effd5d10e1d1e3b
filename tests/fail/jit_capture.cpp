// expect: tessel::jit: the function captures state
// expect: fix: pass captured tensors and scalars as arguments
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  float scale = 2.0f;
  tessel::tensor<float, tessel::shape<3>> x;
  auto y = tessel::jit([scale](auto v) { return v * scale; })(x);
  return static_cast<int>(y[0]);
}
