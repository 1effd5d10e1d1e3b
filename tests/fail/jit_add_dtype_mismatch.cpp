// expect: tessel::add: dtypes differ: f32[3] and s32[3]
// expect: fix: convert_element_type one operand, e.g. to f32
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> x;
  tessel::tensor<std::int32_t, tessel::shape<3>> k;
  auto y = tessel::jit([](auto a, auto b) { return a + b; })(x, k);
  return static_cast<int>(y[0]);
}
