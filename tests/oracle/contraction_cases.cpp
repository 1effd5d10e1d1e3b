// dot_general, conv_general (and, through its VJP and JVP, conv_input_grad and conv_filter_grad) and the
// pooling reductions (max_pool's VJP and JVP are select_and_scatter_add and select_and_gather_add, avg and
// sum pools' VJP reduce_window_sum_transpose) against lax's, in f32 and bf16.
#include "oracle.hpp"

namespace tessel::oracle {
namespace {
template <class S>
using f32 = tensor<float, S>;
template <class S>
using b16 = tensor<bfloat16, S>;
}  // namespace

void contraction_cases(suite& s) {
  check(s, "matmul", [](auto a, auto b) { return tessel::dot_general<axes<1>, axes<0>>(a, b); }, uniform<f32<shape<3, 7>>>(1),
        uniform<f32<shape<7, 5>>>(2));
  check(s, "dot_transposed", [](auto a, auto b) { return tessel::dot_general<axes<0>, axes<1>>(a, b); }, uniform<f32<shape<6, 3>>>(3),
        uniform<f32<shape<4, 6>>>(4));
  check(s, "dot_batched", [](auto a, auto b) { return tessel::dot_general<axes<2>, axes<1>, axes<0>, axes<0>>(a, b); },
        uniform<f32<shape<2, 3, 5>>>(5), uniform<f32<shape<2, 5, 4>>>(6));
  check(s, "matmul", "matmul@bf16", [](auto a, auto b) { return tessel::dot_general<axes<1>, axes<0>>(a, b); }, options{.transforms = false},
        uniform<b16<shape<9, 33>>>(7), uniform<b16<shape<33, 17>>>(8));
  check(s, "conv_same", [](auto x, auto w) { return tessel::conv_general<stride<1, 1>, padding::same>(x, w); },
        uniform<f32<shape<2, 5, 5, 3>>>(9), uniform<f32<shape<3, 3, 3, 4>>>(10));
  check(s, "conv_valid_s2", [](auto x, auto w) { return tessel::conv_general<stride<2, 2>, padding::valid>(x, w); },
        uniform<f32<shape<1, 7, 6, 2>>>(11), uniform<f32<shape<3, 2, 2, 3>>>(12));
  check(s, "conv_dilated", [](auto x, auto w) {
    return tessel::conv_general<stride<1, 2>, padding::explicit_pads<1, 0, 2, 1>, dilation<2, 1>>(x, w);
  }, uniform<f32<shape<1, 6, 6, 2>>>(13), uniform<f32<shape<2, 3, 2, 2>>>(14));
  check(s, "conv_same", "conv_same@bf16", [](auto x, auto w) { return tessel::conv_general<stride<1, 1>, padding::same>(x, w); },
        options{.transforms = false}, uniform<b16<shape<2, 5, 5, 3>>>(15), uniform<b16<shape<3, 3, 3, 4>>>(16));
  check(s, "max_pool", [](auto x) { return tessel::max_pool<window<2, 2>, stride<2, 2>, padding::valid>(x); },
        uniform<f32<shape<2, 6, 5, 3>>>(17));
  check(s, "max_pool_same", [](auto x) { return tessel::max_pool<window<3, 2>, stride<2, 1>, padding::same>(x); },
        uniform<f32<shape<1, 5, 4, 2>>>(18));
  check(s, "avg_pool_same", [](auto x) { return tessel::avg_pool<window<3, 3>, stride<2, 2>, padding::same>(x); },
        uniform<f32<shape<1, 5, 5, 2>>>(19));
  check(s, "avg_pool_exclude_pad", [](auto x) { return tessel::avg_pool<window<3, 3>, stride<2, 2>, padding::same, false>(x); },
        uniform<f32<shape<1, 5, 5, 2>>>(20));
  check(s, "sum_pool", [](auto x) { return tessel::sum_pool<window<2, 3>, stride<1, 2>, padding::valid>(x); },
        uniform<f32<shape<1, 4, 7, 2>>>(21));
}
}  // namespace tessel::oracle
