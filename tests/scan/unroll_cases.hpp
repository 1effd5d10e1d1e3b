#pragma once
// Shared by the unroll tests: a cell with a struct carry, a tuple of xs and a tuple of ys (one a struct).
#include "scan_cases.hpp"

namespace unroll_cases {
using namespace scan_cases;
using tessel::testing::random_tensor;

template <template <class, class> class T = tensor>
struct state {
  BOOST_HANA_DEFINE_STRUCT(state, (T<float, shape<1, 8>>, h), (T<float, shape<1, 8>>, m));
};

template <int Unroll, bool Reverse>
constexpr auto scanned = [](auto s, auto xs, auto gates, auto w, auto u) {
  return tessel::scan(
      [&](auto carry, auto in) {
        auto h = tessel::tanh(tessel::matmul(carry.h, w) + tessel::matmul(std::get<0>(in), u) + carry.m);
        auto m = carry.m * 0.5f + std::get<1>(in) * h;
        decltype(carry) next = carry;
        next.h = h;
        next.m = m;
        return std::tuple{next, std::tuple{h * std::get<1>(in), next}};
      },
      s, std::tuple{xs, gates}, {.reverse = Reverse, .unroll = Unroll});
};

constexpr std::size_t L = 10;
using xs_t = tensor<float, shape<L, 1, 4>>;
using gates_t = tensor<float, shape<L, 1, 8>>;
using w_t = tensor<float, shape<8, 8>>;
using u_t = tensor<float, shape<4, 8>>;

struct case_inputs {
  state<> s0;
  xs_t xs = random_tensor<float, shape<L, 1, 4>>(3);
  gates_t gates = random_tensor<float, shape<L, 1, 8>>(4, 0, 1);
  w_t w = random_tensor<float, shape<8, 8>>(5, -0.5, 0.5);
  u_t u = random_tensor<float, shape<4, 8>>(6);
  case_inputs() {
    s0.h = random_tensor<float, shape<1, 8>>(1);
    s0.m = random_tensor<float, shape<1, 8>>(2);
  }
};

}  // namespace unroll_cases
