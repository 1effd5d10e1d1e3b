// expect: scan_unroll_must_be_at_least_1_fix_pass_unroll_1_for_one_step_per_iteration
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
