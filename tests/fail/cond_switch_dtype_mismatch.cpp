// expect: tessel::switch_: every branch must return the same dtypes and shapes
// expect: result 1 is f32[3] in the first branch and s32[3] in another
#include <tessel/ops.hpp>
#include <tessel/transform/cond.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> x;
  auto y = tessel::jit([](auto i, auto x) {
    return tessel::switch_(i, std::tuple{[](auto v) { return std::tuple{v, v}; },
                                         [](auto v) { return std::tuple{v, tessel::convert_element_type<std::int32_t>(v)}; }},
                           x);
  })(1, x);
  return static_cast<int>(std::get<0>(y)[0]);
}
