// expect: tessel::custom_vjp: bwd(residuals, cotangent) must return a std::tuple with one cotangent per argument
// expect: fix: return std::make_tuple(d_arg0, d_arg1, ...)
#include <tessel/tessel.hpp>
#include <tessel/transform/custom_vjp.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3>> x, y;
  // Two arguments, one cotangent.
  constexpr auto f = tessel::custom_vjp([](auto a, auto b) { return a * b; },
                                        [](auto a, auto b) { return std::make_tuple(a * b, std::make_tuple(a, b)); },
                                        [](auto res, auto ct) { return std::make_tuple(ct * std::get<1>(res)); });
  auto z = f(x, y);
  return static_cast<int>(z[0]);
}
