// A softmax over a row kernel's rows runs as one routine (prim/family/softmax_rows.hpp) where its conditions
// hold, with the bits of its members evaluated one jit at a time, special values included.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "reference.hpp"
#include "tessel/jit.hpp"
#include "tessel/ops.hpp"
#include "tessel/run/derived_plan.hpp"

namespace {
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

constexpr auto softmax = [](auto x) { return tessel::softmax(x); };

// Whether the plan jit makes of f for X holds a softmax the routine runs.
template <class X, class F>
bool runs_softmax_routine(F f) {
  constexpr auto& plan = decltype(jit(f))::template traced_for<X>::plan;
  const tessel::plan::plan_view view = tessel::plan::view_of(plan);
  for (int k = 0; k < plan.kernel_count; ++k) {
    const tessel::plan::kernel& kr = plan.kernels[static_cast<std::size_t>(k)];
    if (kr.kind != tessel::plan::kernel_kind::row) continue;
    std::vector<tessel::run::member_form> form(static_cast<std::size_t>(kr.member_count));
    tessel::run::assign_member_forms(view, kr, form.data());
    if (tessel::run::softmax_of(view, kr, form.data()).found()) return true;
  }
  return false;
}

// The softmax's members (ops/softmax.hpp), each its own jit: nothing for the routine to take.
template <class X>
X softmax_by_members(const X& x) {
  const auto most = jit([](auto x) { return tessel::max<-1>(x); })(x);
  const X shifted = jit([](auto x, auto m) { return x - tessel::broadcast_reduced<-1>(m, x); })(x, most);
  const X e = jit([](auto s) { return tessel::exp(s); })(shifted);
  const auto total = jit([](auto e) { return tessel::sum<-1>(e); })(e);
  return jit([](auto e, auto t) { return e / tessel::broadcast_reduced<-1>(t, e); })(e, total);
}

template <class X>
void expect_same_bits(const X& got, const X& want) {
  for (std::size_t i = 0; i < X::size; ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i])) << "element " << i << ": " << got[i] << " against " << want[i];
}

template <std::size_t... Dims>
void check_shape(unsigned seed, float scale) {
  using X = tensor<float, shape<Dims...>>;
  EXPECT_TRUE(runs_softmax_routine<X>(softmax));
  X x = random_tensor<float, shape<Dims...>>(seed);
  for (auto& v : x) v *= scale;
  constexpr std::size_t dims[] = {Dims...};
  constexpr std::size_t inner = dims[sizeof...(Dims) - 1];
  constexpr std::size_t rows = X::size / inner;
  constexpr float inf = std::numeric_limits<float>::infinity();
  if (rows >= 4) {
    x[inner + 3] = -inf;                                   // one e^x of 0
    x[2 * inner + 1] = std::numeric_limits<float>::quiet_NaN();  // a row of NaN
    for (std::size_t j = 0; j < inner; ++j) x[3 * inner + j] = -inf;  // a row of NaN (-inf - -inf)
  }
  if (rows >= 5) x[4 * inner + inner / 2] = inf;  // a row of NaN and 0 (inf - inf; finite - inf)
  const X want = softmax_by_members(x);
  expect_same_bits(jit(softmax)(x), want);
  X carried = x;  // in place: the result takes the donated buffer it reads
  const float* buffer = carried.data();
  const X got = jit(softmax)(tessel::donate(carried));
  EXPECT_EQ(got.data(), buffer);
  expect_same_bits(got, want);
}

TEST(SoftmaxRows, OneRoutineGivesTheMembersBits) {
  check_shape<64, 1024>(1, 5);
  check_shape<7, 16>(2, 100);     // one vector a row
  check_shape<33, 48>(3, 40);     // three vectors: the reductions' leftover vectors
  check_shape<5, 1008>(4, 30);    // 63 vectors
  check_shape<3, 5, 64>(5, 200);  // rows over two axes; e^x underflows to 0 in most of each row
  check_shape<128, 256>(6, 1);
  // Odd row counts (one, 127, 1000: each thread's share of rows uneven) and a prime x a prime of vectors.
  check_shape<1, 16>(7, 10);
  check_shape<127, 32>(8, 20);
  check_shape<1000, 16>(9, 10);
  check_shape<13, 17 * 16>(10, 50);
}

TEST(SoftmaxRows, RunsOnlyWhereItsConditionsHold) {
  using X = tensor<float, shape<8, 64>>;
  EXPECT_TRUE(runs_softmax_routine<X>(softmax));
  // Rows with a scalar tail (e^x's last lanes on the scalar path), bf16, a member read after the softmax
  // (e^x, kept), a softmax along the first axis: members as before.
  using tail = tensor<float, shape<8, 1000>>;
  using half = tensor<tessel::bfloat16, shape<8, 64>>;
  EXPECT_FALSE(runs_softmax_routine<tail>(softmax));
  EXPECT_FALSE(runs_softmax_routine<half>(softmax));
  const auto with_exp = [](auto x) {
    auto e = tessel::exp(x - tessel::broadcast_reduced<-1>(tessel::stop_gradient(tessel::max<-1>(x)), x));
    return std::make_tuple(e / tessel::broadcast_reduced<-1>(tessel::sum<-1>(e), x), e);
  };
  EXPECT_FALSE(runs_softmax_routine<X>(with_exp));
  EXPECT_FALSE(runs_softmax_routine<X>([](auto x) { return tessel::softmax<0>(x); }));
  // The softmax with e^x kept gives the same bits through its members.
  const X x = random_tensor<float, shape<8, 64>>(7);
  expect_same_bits(std::get<0>(jit(with_exp)(x)), jit(softmax)(x));
}

}  // namespace
