// Batching rules of the unary elementwise primitives (the family rule), select, convert and
// stop_gradient against a loop over slices.
#include "vmap_check.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_batching;
using tessel::testing::domain;
using F34 = tensor<float, shape<3, 4>>;
using F4 = tensor<float, shape<4>>;
using P34 = tensor<bool, shape<3, 4>>;

TEST(VmapElementwise, Unary) {
  check_batching<F34>([](auto x) { return tessel::abs(x) + tessel::neg(x) * 0.5f; });
  check_batching<F34>([](auto x) { return tessel::sin(x) + tessel::cos(x); });
  check_batching<F34>([](auto x) { return tessel::exp(x) - tessel::expm1(x); });
  check_batching<F34>([](auto x) { return tessel::tanh(x) * tessel::logistic(x); });
  check_batching<F34>([](auto x) { return tessel::erf(x) + tessel::floor(x * 3.0f) + tessel::sign(x); });
  check_batching<F34>([](auto x) { return tessel::cbrt(x); });
  check_batching<F34>([](auto x) { return tessel::erf_inv(x); }, domain{-0.9, 0.9});
  check_batching<F34>([](auto x) { return tessel::log(x) + tessel::log1p(x); }, domain{0.1, 3.0});
  check_batching<F34>([](auto x) { return tessel::sqrt(x) * tessel::rsqrt(x + 1.0f); }, domain{0.1, 3.0});
}

TEST(VmapElementwise, SelectConvertStopGradient) {
  check_batching<P34, F34, F34>([](auto p, auto a, auto b) { return tessel::select(p, a, b); });
  check_batching<P34, F34, F4>([](auto p, auto a, auto b) { return tessel::select(p, a * 2.0f, b); });
  check_batching<F34>([](auto x) { return tessel::convert_element_type<std::int32_t>(x * 10.0f); });
  check_batching<F34>([](auto x) { return tessel::stop_gradient(x) * x; });
}
}  // namespace
