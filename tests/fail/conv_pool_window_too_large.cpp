// expect: tessel::max_pool: window 3x3 is larger than input f32[1,2,2,4] (2x2) with padding::valid padding
// expect: fix: use padding::same or a smaller window
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<1, 2, 2, 4>> x;
  auto y = tessel::jit([](auto x) {
    return tessel::max_pool<tessel::window<3, 3>, tessel::stride<1, 1>, tessel::padding::valid>(x);
  })(x);
  return static_cast<int>(y[0]);
}
