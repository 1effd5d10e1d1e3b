// scan's unroll: U steps of the body per loop iteration give the same results, bit for bit, as unroll 1
// (remainders, reverse, no xs, full unrolling), and the program holds U copies of the body
// (unroll_grad_test.cpp: grad and jvp through an unrolled scan).
#include "unroll_cases.hpp"

namespace {
using namespace unroll_cases;
using tessel::testing::all_close;
using tessel::testing::random_tensor;

template <int Unroll, bool Reverse>
void expect_same_as_unroll_1() {
  const case_inputs in;
  const auto [want_state, want_ys] = tessel::jit(scanned<1, Reverse>)(in.s0, in.xs, in.gates, in.w, in.u);
  const auto [got_state, got_ys] = tessel::jit(scanned<Unroll, Reverse>)(in.s0, in.xs, in.gates, in.w, in.u);
  EXPECT_TRUE(bitwise_equal(got_state.h, want_state.h));
  EXPECT_TRUE(bitwise_equal(got_state.m, want_state.m));
  EXPECT_TRUE(bitwise_equal(std::get<0>(got_ys), std::get<0>(want_ys)));
  EXPECT_TRUE(bitwise_equal(std::get<1>(got_ys).h, std::get<1>(want_ys).h));
  EXPECT_TRUE(bitwise_equal(std::get<1>(got_ys).m, std::get<1>(want_ys).m));
}

// 10 steps: U = 5 divides them, 3 and 4 leave a remainder, 16 unrolls everything.
TEST(ScanUnroll, ForwardMatchesUnroll1BitForBit) {
  expect_same_as_unroll_1<3, false>();
  expect_same_as_unroll_1<5, false>();
  expect_same_as_unroll_1<16, false>();
}

TEST(ScanUnroll, ReverseMatchesUnroll1BitForBit) {
  expect_same_as_unroll_1<4, true>();
  expect_same_as_unroll_1<5, true>();
  expect_same_as_unroll_1<16, true>();
}

// The order of the steps shows in a non-commutative carry: JAX's cumulative product with ys, and a
// running "10 * c + x" that spells the visiting order in decimal digits.
template <int Unroll, bool Reverse>
void expect_digit_order() {
  const auto xs = iota_tensor<shape<7>>(1, 1);  // 1 .. 7
  const auto [c, ys] = tessel::jit([](auto c, auto xs) {
    return tessel::scan([](auto a, auto x) { return std::tuple{a * 10.0f + x, a}; }, c, xs, {.reverse = Reverse, .unroll = Unroll});
  })(tensor<float, shape<>>{}, xs);
  EXPECT_EQ(c[0], Reverse ? 7654321.0f : 1234567.0f) << "unroll " << Unroll;
  // ys[i] is the carry before step i.
  EXPECT_EQ(ys[Reverse ? 6 : 0], 0.0f);
  EXPECT_EQ(ys[Reverse ? 0 : 6], Reverse ? 765432.0f : 123456.0f) << "unroll " << Unroll;
  EXPECT_EQ(ys[3], Reverse ? 765.0f : 123.0f) << "unroll " << Unroll;
}

TEST(ScanUnroll, StepsRunInOrder) {
  expect_digit_order<2, false>();  // 3 iterations and 1 step after
  expect_digit_order<7, false>();  // 1 iteration and 0 .. 6 steps after
  expect_digit_order<3, true>();   // steps 6 .. 1 in the loop, then step 0
  expect_digit_order<8, true>();   // no loop
}

TEST(ScanUnroll, LengthWithoutXs) {
  const auto [c, ys] = tessel::jit([](auto c) {
    return tessel::scan<5>([](auto v, std::tuple<>) { return std::tuple{v * 2.0f, v + 1.0f}; }, c, {.unroll = 2});
  })(one());
  EXPECT_EQ(c[0], 32.0f);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(ys[i], static_cast<float>(1 << i) + 1.0f);
}

// The program: U copies of the body inside one loop; the remainder after it; U >= L: no loop at all.
template <int Unroll>
constexpr auto chain = [](auto h, auto xs, auto w) {
  return std::get<0>(tessel::scan(
      [&](auto h, auto x) { return std::tuple{tessel::tanh(tessel::matmul(h, w) + x), std::tuple<>{}}; }, h, xs,
      {.unroll = Unroll}));
};
template <int Unroll, std::size_t Length = 1000>
using chain_traced = typename decltype(tessel::jit(chain<Unroll>))::template traced_for<
    tensor<float, shape<1, 16>>, tensor<float, shape<Length, 1, 16>>, tensor<float, shape<16, 16>>>;

template <int Unroll>
constexpr std::size_t tanh_nodes() {
  std::size_t n = 0;
  for (const auto& node : chain_traced<Unroll>::program.nodes)
    if (node.prim->name == std::string_view("tanh")) ++n;
  return n;
}

TEST(ScanUnroll, TheLoopBodyHoldsUCopies) {
  static_assert(chain_traced<1>::program.construct_count == 1);
  static_assert(chain_traced<4>::program.construct_count == 1);
  static_assert(chain_traced<4>::program.construct(0).length == 250);
  static_assert(tanh_nodes<1>() == 1 && tanh_nodes<4>() == 4 && tanh_nodes<8>() == 8);
  static_assert(chain_traced<3>::program.construct(0).length == 333);
  static_assert(tanh_nodes<3>() == 3 + 1, "three in the loop, one remaining step after it");
  static_assert(chain_traced<20, 20>::program.construct_count == 0, "fully unrolled: no loop");
  static_assert(chain_traced<64, 20>::program.construct_count == 0);
  const auto h = random_tensor<float, shape<1, 16>>(21);
  const auto xs = random_tensor<float, shape<1000, 1, 16>>(22);
  const auto w = random_tensor<float, shape<16, 16>>(23, -0.3, 0.3);
  const auto want = tessel::jit(chain<1>)(h, xs, w);
  EXPECT_TRUE(bitwise_equal(tessel::jit(chain<3>)(h, xs, w), want));
  EXPECT_TRUE(bitwise_equal(tessel::jit(chain<8>)(h, xs, w), want));
}

}  // namespace
