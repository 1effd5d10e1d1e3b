// expect: tessel::cond: every branch must return the same dtypes and shapes
// expect: result 0 is f32[3] in the first branch and f32[] in another
#include <tessel/ops.hpp>
#include <tessel/transform/cond.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> x;
  auto y = tessel::jit([](auto x) {
    return tessel::cond(tessel::sum(x) > 0.0f, [](auto v) { return tessel::sum(v); }, [](auto v) { return v; }, x);
  })(x);
  return static_cast<int>(y[0]);
}
