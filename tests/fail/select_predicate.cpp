// expect: tessel::select: the predicate f32[3] must have dtype pred
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> a;
  auto y = tessel::jit([](auto x) { return tessel::select(x, x, 0.0f); })(a);
  return static_cast<int>(y[0]);
}
