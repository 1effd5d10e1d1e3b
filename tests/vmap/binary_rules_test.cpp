// Batching rules of the binary elementwise primitives and the comparisons against a loop over slices.
#include "vmap_check.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_batching;
using tessel::testing::domain;
using F34 = tensor<float, shape<3, 4>>;
using F4 = tensor<float, shape<4>>;
using P34 = tensor<bool, shape<3, 4>>;

TEST(VmapElementwise, Binary) {
  check_batching<F34, F34>([](auto x, auto y) { return (x + y) * (x - y); });
  check_batching<F34, F34>([](auto x, auto y) { return x / y; }, domain{0.5, 2.0});
  check_batching<F34, F34>([](auto x, auto y) { return tessel::max(x, y) - tessel::min(x, y); });
  check_batching<F34, F34>([](auto x, auto y) { return tessel::pow(x, y); }, domain{0.5, 2.0});
  // NumPy broadcasting inside f: y f32[4] is spread over x's rows before the batch is added.
  check_batching<F34, F4>([](auto x, auto y) { return x * y + 1.0f; });
}

TEST(VmapElementwise, Comparisons) {
  check_batching<F34, F34>([](auto x, auto y) { return tessel::eq(x, y) == tessel::ne(x * 0.0f, y); });
  check_batching<F34, F34>([](auto x, auto y) { return tessel::select(tessel::lt(x, y), x, y); });
  check_batching<F34, F34>([](auto x, auto y) { return tessel::select(tessel::le(x, y), tessel::gt(x, y), tessel::ge(x, y)); });
}
}  // namespace
