// expect: tessel::cond: the predicate is pred[3] but must be a scalar of dtype pred, s32 or u32
#include <tessel/ops.hpp>
#include <tessel/transform/cond.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> x;
  auto y = tessel::jit([](auto x) {
    return tessel::cond(x > 0.0f, [](auto v) { return v; }, [](auto v) { return -v; }, x);
  })(x);
  return static_cast<int>(y[0]);
}
