// expect: tessel::take: the indices f32[2] into f32[3,4] along axis 1 are not s32
// expect: fix: convert_element_type<std::int32_t>(indices)
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3, 4>> x;
  tessel::tensor<float, tessel::shape<2>> k;
  auto y = tessel::jit([](auto v, auto i) { return tessel::take<1>(v, i); })(x, k);
  return static_cast<int>(y[0]);
}
