// expect: tessel::jit: the program has 65 control-flow constructs
// expect: one program holds at most 64 and 128; fix: jit the parts separately
#include <utility>
#include <tessel/ops.hpp>
#include <tessel/transform/cond.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> x;
  auto y = tessel::jit([](auto x) {
    auto step = [](auto v) { return tessel::cond(tessel::sum(v) > 0.0f, [](auto u) { return u; }, [](auto u) { return -u; }, v); };
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((x = step(x), static_cast<void>(I)), ...);
      return x;
    }(std::make_index_sequence<65>{});
  })(x);
  return static_cast<int>(y[0]);
}
