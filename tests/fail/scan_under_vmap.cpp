// expect: tessel: a transform needs the batch rule of primitive control
#include <tessel/ops.hpp>
#include <tessel/transform/jit.hpp>
#include <tessel/transform/scan.hpp>
#include <tessel/transform/vmap.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2, 3>> xs;
  tessel::tensor<float, tessel::shape<2>> c;
  auto r = tessel::vmap([](auto c, auto xs) {
    return std::get<0>(tessel::scan([](auto a, auto x) { return std::tuple{a + x, a}; }, c, xs));
  })(c, xs);
  return static_cast<int>(r[0]);
}
