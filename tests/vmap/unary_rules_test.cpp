// Batching rules of the unary elementwise primitives (the family rule, on every row of the unary table), select, convert and
// stop_gradient against a loop over slices.
#include "unary_table.hpp"
#include "vmap_check.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_batching;
using tessel::testing::domain;
using F34 = tensor<float, shape<3, 4>>;
using F4 = tensor<float, shape<4>>;
using P34 = tensor<bool, shape<3, 4>>;

// Every row of the unary table on its near range.
#define TESSEL_VMAP_UNARY(op, ref, lo, hi, log_spaced, scalar_ulp, xsimd_ulp, hwy_ulp, near_lo, near_hi, smooth) \
  TEST(VmapElementwiseUnary, op) { check_batching<F34>([](auto x) { return tessel::op(x); }, domain{near_lo, near_hi}); }
TESSEL_UNARY_TABLE(TESSEL_VMAP_UNARY)

TEST(VmapElementwise, SelectConvertStopGradient) {
  check_batching<P34, F34, F34>([](auto p, auto a, auto b) { return tessel::select(p, a, b); });
  check_batching<P34, F34, F4>([](auto p, auto a, auto b) { return tessel::select(p, a * 2.0f, b); });
  check_batching<F34>([](auto x) { return tessel::convert_element_type<std::int32_t>(x * 10.0f); });
  check_batching<F34>([](auto x) { return tessel::stop_gradient(x) * x; });
}
}  // namespace
