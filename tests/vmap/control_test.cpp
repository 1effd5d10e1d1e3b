// vmap of scan (transform/control_batching.hpp) with every combination of batched and shared carry, xs
// (batched at 0, at 1 or shared) and closure; reverse, unrolled, tuple and struct carries and fori_loop.
// Each against a loop that runs jit(f) on every slice. cond/switch_: control_cond_test.cpp; nested scans,
// grad and nesting of transforms: control_grad_test.cpp.
#include "control_check.hpp"

namespace {
using namespace control_check;
using tessel::in_axes;
using tessel::none;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
using tessel::testing::stack;

// ---- scan ---------------------------------------------------------------------------------------------

TEST(VmapControl, ScanEveryBatchingCombination) {
  const auto h = slices<H>(1);
  const auto xs = slices<XS>(10);
  const auto w = slices<W>(20);
  // {carry batched, shared} x {xs at 0, at 1, shared} x {closure batched, shared}, less all shared.
  EXPECT_TRUE((check_vmap<0, 0, 0>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<0, 0, none>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<0, 1, 0>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<0, 1, none>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<0, none, 0>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<0, none, none>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<none, 0, 0>(rnn, h, xs, w)));     // the body makes the carry batched
  EXPECT_TRUE((check_vmap<none, 0, none>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<none, 1, 0>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<none, 1, none>(rnn, h, xs, w)));
  EXPECT_TRUE((check_vmap<none, none, 0>(rnn, h, xs, w)));  // only the closure is batched
  // One loop of L steps over the whole batch, not a loop per example.
  using program = tessel::jitted<tessel::vmap_fn<std::remove_const_t<decltype(rnn)>, tessel::in_axes_t<0, 1, none>, tessel::out_axes_t<0>>>::
      traced_for<tensor<float, shape<B, 4>>, tensor<float, shape<L, B, 4>>, W>;
  static_assert(program::program.construct_count == 1 && program::program.construct(0).length == static_cast<int>(L));
}

TEST(VmapControl, ReverseScan) {
  constexpr auto f = [](auto h, auto xs, auto w) {
    return tessel::scan([&](auto c, auto x) {
      const auto n = tessel::tanh(tessel::matmul(c, w) + x);
      return std::tuple{n, n + c};
    }, h, xs, {.reverse = true});
  };
  EXPECT_TRUE((check_vmap<none, 1, none>(f, slices<H>(1), slices<XS>(10), slices<W>(20))));
  EXPECT_TRUE((check_vmap<0, none, 0>(f, slices<H>(2), slices<XS>(11), slices<W>(21))));
}

TEST(VmapControl, UnrolledScan) {
  // unroll 3 over 4 steps: three steps per loop iteration and one traced after the loop.
  constexpr auto f = [](auto h, auto xs, auto w) {
    return tessel::scan([&](auto c, auto x) {
      const auto n = tessel::tanh(tessel::matmul(c, w) + x);
      return std::tuple{n, n * 2.0f};
    }, h, xs, {.unroll = 3});
  };
  EXPECT_TRUE((check_vmap<none, 1, none>(f, slices<H>(30), slices<XS>(31), slices<W>(32))));
}

TEST(VmapControl, TupleCarryWithAnUnbatchedPart) {
  // The counter t never meets the batch and stays shared; h becomes batched; ys mix both.
  constexpr auto f = [](auto h, auto xs, auto w) {
    const auto t0 = tessel::sum(w) * 0.0f;
    return tessel::scan([&](auto c, auto x) {
      const auto [t, s] = c;
      const auto n = tessel::tanh(tessel::matmul(s, w) * t + x);
      return std::tuple{std::tuple{t + 1.0f, n}, std::tuple{t * 2.0f, n}};
    }, std::tuple{t0, h}, xs);
  };
  EXPECT_TRUE((check_vmap<none, 0, none>(f, slices<H>(3), slices<XS>(12), slices<W>(22))));
  EXPECT_TRUE((check_vmap<0, none, none>(f, slices<H>(4), slices<XS>(13), slices<W>(23))));
}

template <template <class, class> class T = tensor>
struct state {
  BOOST_HANA_DEFINE_STRUCT(state, (T<float, shape<4>>, h), (T<float, shape<4>>, m));
};

TEST(VmapControl, StructCarry) {
  constexpr auto f = [](auto h, auto xs, auto w) {
    state<tessel::tracer> s0;
    s0.h = h;
    s0.m = h * 0.5f;
    const auto [s, ys] = tessel::scan([&](auto c, auto x) {
      decltype(c) next = c;
      next.h = tessel::tanh(tessel::matmul(c.h, w) + c.m);
      next.m = c.m * 0.5f + x;
      return std::tuple{next, next.h};
    }, s0, xs);
    return std::tuple{s.h, s.m, ys};
  };
  EXPECT_TRUE((check_vmap<none, 1, none>(f, slices<H>(5), slices<XS>(14), slices<W>(24))));
  EXPECT_TRUE((check_vmap<0, none, 0>(f, slices<H>(6), slices<XS>(15), slices<W>(25))));
}

TEST(VmapControl, ForiLoop) {
  constexpr auto f = [](auto h, auto w) {
    return tessel::fori_loop<0, 5>([&](auto i, auto v) {
      return tessel::tanh(tessel::matmul(v, w)) + tessel::convert_element_type<float>(i) * 0.1f;
    }, h);
  };
  EXPECT_TRUE((check_vmap<0, none>(f, slices<H>(7), slices<W>(26))));
  EXPECT_TRUE((check_vmap<none, 0>(f, slices<H>(8), slices<W>(27))));
}

}  // namespace
