// Batching rules of the reductions, argmax and dot_general against a loop over slices.
#include "vmap_check.hpp"

namespace {
using tessel::axes;
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_batching;
using F34 = tensor<float, shape<3, 4>>;
using F43 = tensor<float, shape<4, 3>>;
using F4 = tensor<float, shape<4>>;
using F3 = tensor<float, shape<3>>;

TEST(VmapStructural, Reductions) {
  check_batching<F34>([](auto x) { return tessel::sum<0>(x) + tessel::max<0>(x); });
  check_batching<F34>([](auto x) { return tessel::min<1>(x) * tessel::sum<1>(x); });
  check_batching<F34>([](auto x) { return tessel::argmax<0>(x) + tessel::argmax<1>(tessel::transpose<1, 0>(x)); });
}

TEST(VmapStructural, DotGeneral) {
  // Both operands batched (a batch dimension), one batched (a free axis), and an existing batch dimension.
  check_batching<F34, F4>([](auto x, auto v) { return tessel::matmul(x, v); });
  check_batching<F34, F43>([](auto x, auto w) { return tessel::matmul(x, w); });
  check_batching<F43, F34>([](auto x, auto w) { return tessel::dot_general<axes<0>, axes<1>>(x, w); });
  using F234 = tensor<float, shape<2, 3, 4>>;
  using F245 = tensor<float, shape<2, 4, 5>>;
  check_batching<F234, F245>([](auto a, auto b) { return tessel::dot_general<axes<2>, axes<1>, axes<0>, axes<0>>(a, b); });
}
}  // namespace
