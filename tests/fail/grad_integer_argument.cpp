// expect: tessel::grad: argument 0 is s32[3], an integer or pred type, which has no gradient
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<std::int32_t, tessel::shape<3>> k;
  auto g = tessel::grad([](auto v) { return tessel::sum(tessel::convert_element_type<float>(v)); })(k);
  return static_cast<int>(g[0]);
}
