// scan and fori_loop: run-time loops over a body traced once, against the same loop run by hand.
#include "tessel/dump.hpp"
#include "scan_cases.hpp"

namespace {
using namespace scan_cases;
using tessel::testing::all_close;
using tessel::testing::random_tensor;

TEST(Scan, JaxReferenceCase) {
  const auto [carry, ys] = tessel::jit(cumprod)(one(), iota_tensor<shape<3>>(1, 1));
  EXPECT_EQ(carry[0], 6.0f);
  EXPECT_EQ(ys[0], 1.0f);
  EXPECT_EQ(ys[1], 2.0f);
  EXPECT_EQ(ys[2], 6.0f);
}

TEST(Scan, ReverseStoresEachYAtItsStep) {
  const auto [carry, ys] = tessel::jit(cumprod_reverse)(one(), iota_tensor<shape<3>>(1, 1));
  EXPECT_EQ(carry[0], 6.0f);
  EXPECT_EQ(ys[0], 6.0f);
  EXPECT_EQ(ys[1], 6.0f);
  EXPECT_EQ(ys[2], 3.0f);
}

template <template <class, class> class T = tensor>
struct state {
  BOOST_HANA_DEFINE_STRUCT(state, (T<float, shape<1, 8>>, h), (T<float, shape<1, 8>>, m));
};

constexpr auto cell = [](auto s, auto x, auto gate, auto w, auto u) {
  auto h = tessel::tanh(tessel::matmul(s.h, w) + tessel::matmul(x, u) + s.m);
  auto m = s.m * 0.5f + gate * h;
  decltype(s) next = s;
  next.h = h;
  next.m = m;
  return std::tuple{next, h * gate};
};

constexpr auto scanned = [](auto s, auto xs, auto gates, auto w, auto u, auto reverse) {
  (void)reverse;
  return tessel::scan([&](auto carry, auto in) { return cell(carry, std::get<0>(in), std::get<1>(in), w, u); }, s,
                      std::tuple{xs, gates}, {.reverse = decltype(reverse)::value});
};

template <bool Reverse>
void check_against_unrolled() {
  constexpr std::size_t L = 6;
  state<> s0;
  s0.h = random_tensor<float, shape<1, 8>>(1);
  s0.m = random_tensor<float, shape<1, 8>>(2);
  const auto xs = random_tensor<float, shape<L, 1, 4>>(3);
  const auto gates = random_tensor<float, shape<L, 1, 8>>(4, 0, 1);
  const auto w = random_tensor<float, shape<8, 8>>(5);
  const auto u = random_tensor<float, shape<4, 8>>(6);
  const auto [final_state, ys] = tessel::jit([](auto s, auto xs, auto gates, auto w, auto u) {
    return scanned(s, xs, gates, w, u, std::bool_constant<Reverse>{});
  })(s0, xs, gates, w, u);
  // The same cell, jitted alone and called once per step from C++.
  const auto step = tessel::jit(cell);
  state<> s = s0;
  for (std::size_t k = 0; k < L; ++k) {
    const std::size_t i = Reverse ? L - 1 - k : k;
    tensor<float, shape<1, 4>> x;
    tensor<float, shape<1, 8>> gate;
    for (std::size_t j = 0; j < 4; ++j) x[j] = xs[i * 4 + j];
    for (std::size_t j = 0; j < 8; ++j) gate[j] = gates[i * 8 + j];
    const auto [next, y] = step(s, x, gate, w, u);
    s = next;
    for (std::size_t j = 0; j < 8; ++j) EXPECT_EQ(ys[i * 8 + j], y[j]) << "step " << i << " element " << j;
  }
  EXPECT_TRUE(bitwise_equal(final_state.h, s.h));
  EXPECT_TRUE(bitwise_equal(final_state.m, s.m));
}

TEST(Scan, StructCarryMatchesTheUnrolledLoopExactly) { check_against_unrolled<false>(); }
TEST(Scan, ReverseStructCarryMatchesTheUnrolledLoopExactly) { check_against_unrolled<true>(); }

// The loss of the cell over 4 steps, written out (one argument per step) and as a scan.
TEST(Scan, LengthWithoutXs) {
  const auto [c, ys] = tessel::jit([](auto c) {
    return tessel::scan<5>([](auto v, std::tuple<>) { return std::tuple{v * 2.0f, v + 1.0f}; }, c);
  })(one());
  EXPECT_EQ(c[0], 32.0f);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(ys[i], static_cast<float>(1 << i) + 1.0f);
}

TEST(Scan, SwappedCarriesAreStaged) {
  tensor<float, shape<2>> a, b;
  a[0] = 1, a[1] = 2, b[0] = 10, b[1] = 20;
  const auto [carry, ys] = tessel::jit([](auto a, auto b) {
    return tessel::scan<3>([](auto c, std::tuple<>) { return std::tuple{std::tuple{std::get<1>(c), std::get<0>(c)}, std::get<0>(c)}; },
                           std::tuple{a, b});
  })(a, b);
  EXPECT_EQ(std::get<0>(carry)[0], 10.0f);  // three swaps
  EXPECT_EQ(std::get<1>(carry)[1], 2.0f);
  EXPECT_EQ(ys[0], 1.0f);
  EXPECT_EQ(ys[2], 10.0f);
  EXPECT_EQ(ys[3], 20.0f);
  EXPECT_EQ(ys[5], 2.0f);
}

TEST(Scan, ALongScanIsTracedOnce) {
  constexpr auto f = [](auto h, auto xs, auto w) {
    return tessel::scan([&](auto h, auto x) {
      auto n = tessel::tanh(tessel::matmul(h, w) + x);
      return std::tuple{n, std::tuple<>{}};
    }, h, xs);
  };
  using traced = decltype(tessel::jit(f))::traced_for<tensor<float, shape<1, 16>>, tensor<float, shape<1000, 1, 16>>, tensor<float, shape<16, 16>>>;
  static_assert(traced::nodes < 20, "the body is in the program once, not 1000 times");
  const auto h = random_tensor<float, shape<1, 16>>(21);
  const auto xs = random_tensor<float, shape<1000, 1, 16>>(22);
  const auto w = random_tensor<float, shape<16, 16>>(23, -0.3, 0.3);
  const auto step = tessel::jit([](auto h, auto x, auto w) { return tessel::tanh(tessel::matmul(h, w) + x); });
  auto expect = h;
  for (std::size_t i = 0; i < 1000; ++i) {
    tensor<float, shape<1, 16>> x;
    for (std::size_t j = 0; j < 16; ++j) x[j] = xs[i * 16 + j];
    expect = step(expect, x, w);
  }
  const auto [got, none] = tessel::jit(f)(h, xs, w);
  (void)none;
  EXPECT_TRUE(bitwise_equal(got, expect));
}

TEST(Scan, NestedScan) {
  // Outer over 3 rows, inner over 4 columns: a running sum of every element, row by row.
  const auto xs = iota_tensor<shape<3, 4>>(1, 1);
  const auto [total, rows] = tessel::jit([](auto c, auto xs) {
    return tessel::scan([](auto acc, auto row) {
      auto [inner, partial] = tessel::scan([](auto a, auto x) { return std::tuple{a + x, a + x}; }, acc, row);
      return std::tuple{inner, partial};
    }, c, xs);
  })(one(), xs);
  EXPECT_EQ(total[0], 79.0f);  // 1 + (1 + ... + 12)
  EXPECT_EQ(rows[0], 2.0f);
  EXPECT_EQ(rows[11], 79.0f);
}

TEST(Scan, CarryReadAfterItsUpdate) {
  // The new carry may be computed in the old one's buffer only when nothing reads the old one later.
  const auto xs = iota_tensor<shape<4, 3>>(1, 1);
  tensor<float, shape<3>> c0;
  c0.fill(1.0f);
  const auto [c, ys] = tessel::jit([](auto c, auto xs) {
    return tessel::scan([](auto c, auto x) {
      auto next = c + x;
      return std::tuple{next, tessel::exp(c) * 0.0f + c * 3.0f + next};
    }, c, xs);
  })(c0, xs);
  float carry[3] = {1, 1, 1};
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      const float next = carry[j] + xs[i * 3 + j];
      EXPECT_EQ(ys[i * 3 + j], carry[j] * 3.0f + next);
      carry[j] = next;
    }
  for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(c[j], carry[j]);
}

TEST(Scan, DumpShowsTheLoop) {
  const std::string d = tessel::dump(cumprod, one(), iota_tensor<shape<3>>(1, 1));
  EXPECT_NE(d.find("control f32[] (scan: 3 steps, kernels 1..1)"), std::string::npos) << d;
}

TEST(ForiLoop, SumsTheIndex) {
  const auto r = tessel::jit([](auto v) {
    return tessel::fori_loop<2, 7>([](auto i, auto acc) { return acc + tessel::convert_element_type<float>(i); }, v);
  })(one());
  EXPECT_EQ(r[0], 1.0f + 2 + 3 + 4 + 5 + 6);
}

}  // namespace
