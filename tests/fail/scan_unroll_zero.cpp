// expect: tessel::scan: unroll is 0
// expect: it must be at least 1 (the steps of the body in one loop iteration)
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
#include <tessel/transform/scan.hpp>
int main() {
  tessel::tensor<float, tessel::shape<4>> h;
  tessel::tensor<float, tessel::shape<3, 4>> xs;
  auto r = tessel::jit([](auto h, auto xs) {
    return tessel::scan([](auto c, auto x) { return std::tuple{c + x, x}; }, h, xs, {.unroll = 0});
  })(h, xs);
  return static_cast<int>(std::get<0>(r)[0]);
}
