// The structural primitives against lax's: broadcast_in_dim, reshape, transpose, slice, pad, concatenate,
// iota, take and scatter_add (with out-of-range indices), argmax and the reductions (with edge values).
#include "oracle.hpp"

namespace tessel::oracle {
namespace {
template <class S>
using f32 = tensor<float, S>;
template <class S>
using s32 = tensor<std::int32_t, S>;
using EA = tensor<float, shape<16, 16>>;

template <class S = void, std::size_t N>
auto ints(std::array<std::int32_t, N> v) {
  s32<std::conditional_t<std::is_void_v<S>, shape<N>, S>> t;
  for (std::size_t i = 0; i < N; ++i) t[i] = v[i];
  return t;
}
}  // namespace

void layout_cases(suite& s) {
  check(s, "broadcast_in_dim", [](auto x) { return tessel::broadcast_in_dim<shape<2, 3, 4>, 1, 2>(x); }, uniform<f32<shape<3, 4>>>(1));
  check(s, "broadcast_size1", [](auto x) { return tessel::broadcast_in_dim<shape<3, 2, 4>, 0, 1, 2>(x); }, uniform<f32<shape<3, 1, 4>>>(2));
  check(s, "reshape", [](auto x) { return tessel::reshape<shape<4, 6>>(x); }, uniform<f32<shape<2, 3, 4>>>(3));
  check(s, "transpose", [](auto x) { return tessel::transpose<2, 0, 1>(x); }, uniform<f32<shape<2, 3, 4>>>(4));
  check(s, "slice", [](auto x) { return tessel::slice<std::array{1, 0}, std::array{4, 5}, std::array{2, 2}>(x); },
        uniform<f32<shape<4, 5>>>(5));
  check(s, "pad", [](auto x) { return tessel::pad<std::array{pad_axis{1, 0, 1}, pad_axis{-1, 2, 1}}>(x, 0.5f); }, uniform<f32<shape<3, 4>>>(6));
  check(s, "pad_value", [](auto x, auto v) { return tessel::pad<std::array{pad_axis{2, 1, 0}, pad_axis{0, 1, 2}}>(x, v); },
        uniform<f32<shape<2, 3>>>(7), uniform<f32<shape<>>>(8));
  check(s, "concatenate", [](auto a, auto b, auto c) { return tessel::concatenate<1>(a, b, c); }, uniform<f32<shape<2, 3>>>(9),
        uniform<f32<shape<2, 1>>>(10), uniform<f32<shape<2, 4>>>(11));
  check(s, "concatenate4", [](auto a, auto b) { return tessel::concatenate<0>(a, b, a, b); }, uniform<f32<shape<1, 3>>>(12),
        uniform<f32<shape<2, 3>>>(13));
  check(s, "iota", [](auto x) {
    return x + tessel::convert_element_type<float>(tessel::broadcasted_iota<std::int32_t, shape<3, 4>, 1>(x) * 3 +
                                                   tessel::broadcasted_iota<std::int32_t, shape<3, 4>, 0>(x));
  }, uniform<f32<shape<3, 4>>>(14));
  // take and scatter_add: in range, negative (from the end) and out of range (fill / drop) indices.
  check(s, "take0", [](auto x, auto i) { return tessel::take<0>(x, i); }, uniform<f32<shape<5, 4>>>(15), ints<void, 6>({0, 4, -1, -5, 5, -6}));
  check(s, "take1", [](auto x, auto i) { return tessel::take<1>(x, i); }, uniform<f32<shape<3, 5>>>(16),
        ints<shape<2, 2>, 4>({2, 0, 2, 9}));
  check(s, "take_clip", [](auto x, auto i) { return tessel::take<0, index_mode::clip>(x, i); }, uniform<f32<shape<5, 4>>>(17),
        ints<void, 4>({-3, 2, 7, 4}));
  check(s, "scatter_add", [](auto x, auto i, auto u) { return tessel::scatter_add<0>(x, i, u); }, uniform<f32<shape<5, 4>>>(18),
        ints<void, 6>({1, 1, -1, 5, 0, -6}), uniform<f32<shape<6, 4>>>(19));
  check(s, "argmax", [](auto x) { return tessel::argmax<1>(x); }, uniform<f32<shape<3, 5>>>(20));
  check(s, "argmax", "argmax@edge", [](auto x) { return tessel::argmax<1>(x); }, options{.transforms = false}, edges<EA>());
  check(s, "argmax0", "argmax0@edge", [](auto x) { return tessel::argmax<0>(x); }, options{.transforms = false}, edges<EA>());
  check(s, "reduce_sum", [](auto x) { return tessel::reduce_sum<1>(x); }, uniform<f32<shape<3, 40>>>(21));
  check(s, "reduce_sum02", [](auto x) { return tessel::reduce_sum<0, 2>(x); }, uniform<f32<shape<3, 4, 5>>>(22));
  check(s, "reduce_max", [](auto x) { return tessel::reduce_max<0>(x); }, uniform<f32<shape<6, 5>>>(23));
  check(s, "reduce_min", [](auto x) { return tessel::reduce_min<1>(x); }, uniform<f32<shape<6, 5>>>(24));
  check(s, "reduce_max", "reduce_max@edge", [](auto x) { return tessel::reduce_max<0>(x); }, options{.transforms = false}, edges<EA>());
  check(s, "reduce_min0", "reduce_min0@edge", [](auto x) { return tessel::reduce_min<0>(x); }, options{.transforms = false}, edges<EA>());
  check(s, "reduce_sum0", "reduce_sum0@edge", [](auto x) { return tessel::reduce_sum<0>(x); }, options{.transforms = false}, edges<EA>());
  check(s, "reduce_sum", "reduce_sum@s32", [](auto x) { return tessel::reduce_sum<1>(x); }, options{-1000, 1000},
        uniform<s32<shape<4, 33>>>(25, -1000, 1000));
  check(s, "reduce_max", "reduce_max@s32", [](auto x) { return tessel::reduce_max<0>(x); }, options{.transforms = false},
        uniform<s32<shape<7, 3>>>(26, -1000, 1000));
}
}  // namespace tessel::oracle
