// expect: tessel::scan: the carry must keep its dtypes and shapes across the body
// expect: carry leaf 0 goes in as f32[4] and comes out as s32[4]
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
#include <tessel/transform/scan.hpp>
int main() {
  tessel::tensor<float, tessel::shape<4>> h;
  auto r = tessel::jit([](auto h) {
    return tessel::scan<3>([](auto c, std::tuple<>) { return std::tuple{tessel::convert_element_type<std::int32_t>(c), c}; }, h);
  })(h);
  return static_cast<int>(std::get<0>(r)[0]);
}
