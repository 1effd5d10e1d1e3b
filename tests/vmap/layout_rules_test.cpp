// Batching rules of the layout primitives (broadcast_in_dim, reshape, transpose, slice, pad,
// concatenate) against a loop over slices.
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

TEST(VmapStructural, BroadcastReshapeTranspose) {
  check_batching<F34>([](auto x) { return tessel::broadcast_in_dim<shape<3, 2, 4>, 0, 2>(x); });
  check_batching<F3>([](auto x) { return tessel::broadcast_in_dim<shape<2, 3, 5>, 1>(x); });
  check_batching<F34>([](auto x) { return tessel::reshape<shape<2, 6>>(x); });
  check_batching<F34>([](auto x) { return tessel::transpose<1, 0>(x) * 2.0f; });
}

TEST(VmapStructural, SlicePadConcatenate) {
  check_batching<F34>([](auto x) { return tessel::slice<std::array{1, 0}, std::array{3, 4}, std::array{1, 2}>(x); });
  check_batching<F34>([](auto x) { return tessel::pad<std::array{tessel::pad_axis{1, 0, 1}, tessel::pad_axis{0, 2, 0}}>(x, 0.5f); });
  // A padding value that is mapped too: each element is padded with its own scalar.
  check_batching<F34, tensor<float, shape<>>>(
      [](auto x, auto v) { return tessel::pad<std::array{tessel::pad_axis{1, 0, 0}, tessel::pad_axis{0, 1, 0}}>(x, v); });
  check_batching<F34, F34, F34>([](auto a, auto b, auto c) { return tessel::concatenate<1>(a, b, c); });
  check_batching<F34, F34>([](auto a, auto b) { return tessel::concatenate<0>(a, b * 2.0f); });
}
}  // namespace

namespace {
using I23 = tessel::tensor<std::int32_t, tessel::shape<2, 3>>;
using I2 = tessel::tensor<std::int32_t, tessel::shape<2>>;

// Operand and indices batched alone and together. Indices drawn from [-4, 3] (the random floats too):
// all in range for an axis of 4, negative ones counting from the end.
TEST(VmapStructural, Take) {
  check_batching<F34, I23>([](auto x, auto k) { return tessel::take<1>(x, k); }, {-4, 3});
  check_batching<F34, I2>([](auto x, auto k) { return tessel::take<0, tessel::index_mode::clip>(x, k) * 2.0f; }, {-5, 5});
}

// Indices from [-5, 4] on an axis of 4: -5 is out of range (its update dropped).
TEST(VmapStructural, ScatterAdd) {
  check_batching<F34, I2, tensor<float, shape<3, 2>>>([](auto x, auto k, auto u) { return tessel::scatter_add<1>(x, k, u); },
                                                      {-5, 4});
  check_batching<F34, I2, tensor<float, shape<2, 4>>>(
      [](auto x, auto k, auto u) { return tessel::scatter_add<0, tessel::index_mode::clip>(x, k, u); }, {-5, 4});
}
}  // namespace
