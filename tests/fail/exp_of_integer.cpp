// expect: tessel::exp: s32[4] has dtype s32, but the operation takes f32 or bf16
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<std::int32_t, tessel::shape<4>> k;
  auto y = tessel::jit([](auto x) { return tessel::exp(x); })(k);
  return static_cast<int>(y[0]);
}
