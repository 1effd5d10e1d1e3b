// Batching rules of pooling (reduce_window_max, reduce_window_sum) and its derivative primitives
// (select_and_scatter_add, select_and_gather_add, reduce_window_sum_transpose) against a loop over slices.
#include "vmap_check.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_batching;
using X = tensor<float, shape<2, 5, 5, 3>>;

TEST(VmapConv, PoolingAndItsDerivatives) {
  using tessel::padding::valid;
  using tessel::stride;
  using tessel::window;
  check_batching<X>([](auto x) { return tessel::max_pool<window<2, 2>, stride<1, 1>, valid>(x); });
  check_batching<X>([](auto x) { return tessel::avg_pool<window<3, 3>, stride<2, 2>, tessel::padding::same>(x); });
  using P = tensor<float, shape<2, 4, 4, 3>>;
  // select_and_scatter_add (max_pool's VJP), reduce_window_sum_transpose (avg_pool's VJP).
  check_batching<X, P>([](auto x, auto c) {
    return tessel::grad<0>([](auto a, auto ct) {
      return tessel::sum(tessel::max_pool<window<2, 2>, stride<1, 1>, valid>(a) * ct) +
             tessel::sum(tessel::avg_pool<window<2, 2>, stride<1, 1>, valid>(a) * ct);
    })(x, c);
  });
  // select_and_gather_add (max_pool's JVP).
  check_batching<X, X>([](auto x, auto t) {
    return std::get<1>(tessel::jvp([](auto a) { return tessel::max_pool<window<2, 2>, stride<1, 1>, valid>(a); },
                                   std::make_tuple(x), std::make_tuple(t)));
  });
}
}  // namespace
