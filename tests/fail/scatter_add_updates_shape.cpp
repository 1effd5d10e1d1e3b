// expect: tessel::scatter_add: the updates f32[2,3] do not fit f32[3,4] indexed by s32[2] along axis 1
// expect: here [3,2]); fix: reshape or broadcast the updates to that shape
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3, 4>> x;
  tessel::tensor<std::int32_t, tessel::shape<2>> k;
  tessel::tensor<float, tessel::shape<2, 3>> u;
  auto y = tessel::jit([](auto v, auto i, auto w) { return tessel::scatter_add<1>(v, i, w); })(x, k, u);
  return static_cast<int>(y[0]);
}
