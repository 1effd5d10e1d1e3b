// expect: tessel::reduce_sum: cannot reduce f32[2,3] over axes (2)
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2, 3>> a;
  auto y = tessel::jit([](auto x) { return tessel::sum<2>(x); })(a);
  return static_cast<int>(y[0]);
}
