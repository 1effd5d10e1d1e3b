// Batching rules of conv_general and its two derivative primitives against a loop over slices.
#include "vmap_check.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_batching;
using X = tensor<float, shape<2, 5, 5, 3>>;
using W = tensor<float, shape<3, 3, 3, 4>>;
using Y = tensor<float, shape<2, 5, 5, 4>>;

TEST(VmapConv, ConvAndItsDerivatives) {
  check_batching<X, W>([](auto x, auto w) { return tessel::conv_general<tessel::stride<1, 1>, tessel::padding::same>(x, w); });
  // conv_input_grad and conv_filter_grad, as the gradients of <c, conv(x, w)>.
  check_batching<X, W, Y>([](auto x, auto w, auto c) {
    return tessel::grad<0>([](auto a, auto b, auto ct) {
      return tessel::sum(tessel::conv_general<tessel::stride<1, 1>, tessel::padding::same>(a, b) * ct);
    })(x, w, c);
  });
  check_batching<X, W, Y>([](auto x, auto w, auto c) {
    return tessel::grad<1>([](auto a, auto b, auto ct) {
      return tessel::sum(tessel::conv_general<tessel::stride<1, 1>, tessel::padding::same>(a, b) * ct);
    })(x, w, c);
  });
}
}  // namespace
