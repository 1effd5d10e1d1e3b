// expect: tessel::tensor: no implicit conversion from f32[2,3] to s32[2,3] (dtypes differ)
// expect: fix: call .astype<s32>() or convert_element_type
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2, 3>> f;
  tessel::tensor<std::int32_t, tessel::shape<2, 3>> i = f;
  return i[0];
}
