// expect: tessel::grad: the function must return a floating-point scalar, but it returns f32[3]
// expect: fix: reduce it to f32[] (sum or mean), or use vjp
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> x;
  auto g = tessel::grad([](auto v) { return v * v; })(x);
  return static_cast<int>(g[0]);
}
