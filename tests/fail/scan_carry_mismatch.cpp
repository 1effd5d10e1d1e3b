// expect: tessel::scan: the carry must keep its dtypes and shapes across the body
// expect: carry leaf 1 goes in as f32[4] and comes out as f32[1,4]
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
#include <tessel/transform/scan.hpp>
int main() {
  tessel::tensor<float, tessel::shape<4>> h;
  tessel::tensor<float, tessel::shape<3, 4>> xs;
  auto r = tessel::jit([](auto h, auto xs) {
    return tessel::scan([](auto c, auto x) {
      auto grown = tessel::reshape<tessel::shape<1, 4>>(std::get<1>(c) + x);
      return std::tuple{std::tuple{std::get<0>(c), grown}, x};
    }, std::tuple{h, h}, xs);
  })(h, xs);
  return static_cast<int>(std::get<0>(std::get<0>(r))[0]);
}
