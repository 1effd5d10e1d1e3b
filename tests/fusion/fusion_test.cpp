// Fusion, proved by counting kernels and buffers in the compile-time plan, and checked by value.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/dump.hpp"
#include "tessel/jit.hpp"
#include "tessel/kernels/thread_pool.hpp"
#include "tessel/transform/scan.hpp"

namespace {
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

template <class F, class... A>
constexpr const auto& plan_of(F, const A&...) {
  return decltype(jit(std::declval<F>()))::template traced_for<A...>::plan;
}

TEST(Fusion, AffineReluIsOneLoopWithNoIntermediateBuffer) {
  const auto f = [](auto x, auto a, auto b) { return tessel::relu(a * x + b); };
  const auto x = random_tensor<float, shape<300, 257>>(1);
  const auto b = random_tensor<float, shape<257>>(2);
  constexpr auto& p = decltype(jit(f))::traced_for<decltype(x), float, decltype(b)>::plan;
  static_assert(p.kernel_count == 1);
  static_assert(p.arena_bytes == 0);
  static_assert(p.kernels[0].kind == tessel::plan::kernel_kind::loop);
  const auto y = jit(f)(x, 1.5f, b);
  for (std::size_t i = 0; i < 300; ++i)
    for (std::size_t j = 0; j < 257; ++j) ASSERT_NEAR(y(i, j), std::max(0.0f, 1.5f * x(i, j) + b[j]), 1e-6);  // FMA or not
}

TEST(Fusion, SoftmaxIsOneRowPass) {
  const auto f = [](auto x) { return tessel::softmax(x); };
  const tensor<float, shape<64, 1024>> x = random_tensor<float, shape<64, 1024>>(3, -5, 5);
  constexpr auto& p = decltype(jit(f))::traced_for<tensor<float, shape<64, 1024>>>::plan;
  static_assert(p.kernel_count == 1 && p.kernels[0].kind == tessel::plan::kernel_kind::row);
  static_assert(p.kernels[0].outer == 64 && p.kernels[0].inner == 1024);
  static_assert(p.arena_bytes == 0);
  const auto y = jit(f)(x);
  for (std::size_t i = 0; i < 64; ++i) {
    double total = 0;
    for (std::size_t j = 0; j < 1024; ++j) total += y(i, j);
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

// log_softmax's log of the row sums is one value per row, spread by a broadcast over the loop that
// subtracts it: the loop becomes a row kernel, and the sum, the exp, the shift and the max join it. Its
// values are its members' run one jit at a time (up to e^x's and log's lanes taking the SIMD or the scalar
// path: a row kernel takes log on a few rows at a time, a jit of log on all 48).
TEST(Fusion, LogSoftmaxIsOneRowPass) {
  const auto f = [](auto x) { return tessel::log_softmax(x); };
  using X = tensor<float, shape<48, 300>>;
  constexpr auto& p = decltype(jit(f))::traced_for<X>::plan;
  static_assert(p.kernel_count == 1 && p.kernels[0].kind == tessel::plan::kernel_kind::row);
  static_assert(p.kernels[0].outer == 48 && p.kernels[0].inner == 300);
  static_assert(p.arena_bytes == 0);
  X x = random_tensor<float, shape<48, 300>>(5, -30, 30);
  x(3, 7) = -std::numeric_limits<float>::infinity();
  const auto most = jit([](auto x) { return tessel::max<-1>(x); })(x);
  const X shifted = jit([](auto x, auto m) { return x - tessel::broadcast_reduced<-1>(m, x); })(x, most);
  const auto total = jit([](auto s) { return tessel::sum<-1>(tessel::exp(s)); })(shifted);
  const auto lse = jit([](auto t) { return tessel::log(t); })(total);
  const X want = jit([](auto s, auto l) { return s - tessel::broadcast_reduced<-1>(l, s); })(shifted, lse);
  const X y = jit(f)(x);
  for (std::size_t i = 0; i < X::size; ++i)
    if (i != 3 * 300 + 7) ASSERT_NEAR(y.data()[i], want.data()[i], 4e-6 * (1 + std::abs(want.data()[i]))) << i;
  EXPECT_EQ(y(3, 7), -std::numeric_limits<float>::infinity());
  // A per-row value the loop's broadcast spreads, with no reduction behind it: a row kernel too.
  const auto g = [](auto x, auto s) { return x * tessel::broadcast_reduced<-1>(tessel::exp(s), x); };
  const auto s = random_tensor<float, shape<48>>(6);
  constexpr auto& q = plan_of(g, x, s);
  static_assert(q.kernel_count == 1 && q.kernels[0].kind == tessel::plan::kernel_kind::row);
  x(3, 7) = 1;
  const X z = jit(g)(x, s);
  for (std::size_t i = 0; i < 48; ++i)
    for (std::size_t j = 0; j < 300; ++j) ASSERT_NEAR(z(i, j), x(i, j) * std::exp(s[i]), 1e-6 * (1 + std::abs(z(i, j)))) << i << ", " << j;
}

// A value with one element per row that is spread along another axis varies along each row: the loop must
// not become a row kernel over it (it did, and computed x - rowsum[i] for x - rowsum[j]; the oracle suite
// found it through vmap, which put the batch axis between a value's axes).
TEST(Fusion, AValueSpreadAcrossRowsIsNoRowKernel) {
  using X = tensor<float, shape<3, 3>>;
  const auto f = [](auto x) { return x - tessel::broadcast_in_dim<shape<3, 3>, 1>(tessel::reduce_sum<1>(x)); };
  constexpr auto& p = decltype(jit(f))::traced_for<X>::plan;
  static_assert(p.kernels[p.kernel_count - 1].kind != tessel::plan::kernel_kind::row);
  X x;
  for (std::size_t i = 0; i < 9; ++i) x[i] = static_cast<float>(i * i);
  const X y = jit(f)(x);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(y(i, j), x(i, j) - (x(j, 0) + x(j, 1) + x(j, 2))) << i << ", " << j;
  // An elementwise value spread over axes 0 and 2 of a rank-3 loop, with no reduction behind it.
  using Z = tensor<float, shape<2, 3, 3>>;
  using V = tensor<float, shape<2, 3>>;
  const auto g = [](auto z, auto v) { return z * tessel::broadcast_in_dim<shape<2, 3, 3>, 0, 2>(tessel::exp(v)); };
  static_assert(decltype(jit(g))::traced_for<Z, V>::plan.kernels[0].kind != tessel::plan::kernel_kind::row);
  const auto z = random_tensor<float, shape<2, 3, 3>>(7);
  const auto v = random_tensor<float, shape<2, 3>>(8);
  const Z w = jit(g)(z, v);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 3; ++k)
      for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(w(i, k, j), z(i, k, j) * std::exp(v(i, j)), 1e-6) << i << k << j;
}

// A loop holding a reshape stays a loop when a reduction joins it: the executor's row kernels evaluate no
// reshape (a null function was called: a segfault, which a random program of the oracle's campaign hit).
TEST(Fusion, ALoopHoldingAReshapeBecomesNoRowKernel) {
  const auto f = [](auto x, auto q) { return x * tessel::broadcast_in_dim<shape<5>>(tessel::reduce_sum<0>(x)) + tessel::reshape<shape<5>>(q); };
  using X = tensor<float, shape<5>>;
  using Q = tensor<float, shape<1, 5>>;
  constexpr auto& p = decltype(jit(f))::traced_for<X, Q>::plan;
  static_assert(p.kernels[p.kernel_count - 1].kind == tessel::plan::kernel_kind::loop);
  X x;
  Q q;
  for (std::size_t i = 0; i < 5; ++i) {
    x[i] = 0.1f * static_cast<float>(i);
    q[i] = 1.0f + static_cast<float>(i);
  }
  const X y = jit(f)(x, q);
  float total = 0;
  for (std::size_t i = 0; i < 5; ++i) total += x[i];
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(y[i], x[i] * total + q[i]) << i;
}

TEST(Fusion, MatmulBiasReluIsOneKernel) {
  const auto f = [](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); };
  constexpr auto& p =
      decltype(jit(f))::traced_for<tensor<float, shape<128, 784>>, tensor<float, shape<784, 256>>, tensor<float, shape<256>>>::plan;
  static_assert(p.kernel_count == 1 && p.kernels[0].kind == tessel::plan::kernel_kind::contraction);
  static_assert(p.arena_bytes == 0);
  const std::string text = tessel::dump(p);
  EXPECT_EQ(text.rfind("kernels: 1\n", 0), 0u) << text;
  EXPECT_NE(text.find("fuses: dot_general broadcast_in_dim add max"), std::string::npos) << text;
}

// matmul(transpose(a), b) and matmul(a, transpose(b)) read the operand in place through the dot's
// dimension numbers: one contraction, no transposed copy (prim/build.hpp, read_through_transpose). A
// transpose that would reorder the result's free axes stays a copy.
TEST(Fusion, TransposedMatmulOperandsAreReadInPlace) {
  const auto f = [](auto a, auto b, auto c) {
    return tessel::matmul(tessel::transpose<1, 0>(a), b) + tessel::matmul(c, tessel::transpose<1, 0>(c));
  };
  const auto a = random_tensor<float, shape<70, 48>>(21);
  const auto b = random_tensor<float, shape<70, 48>>(22);
  const auto c = random_tensor<float, shape<48, 48>>(23);
  constexpr auto& p = plan_of(f, a, b, c);
  int contractions = 0, others = 0;
  for (int k = 0; k < p.kernel_count; ++k)
    (p.kernels[static_cast<std::size_t>(k)].kind == tessel::plan::kernel_kind::contraction ? contractions : others) += 1;
  EXPECT_EQ(contractions, 2);
  EXPECT_EQ(others, 0) << tessel::dump(p);
  // Reorders the free axes: [3, 5, 7] from x [5, 3, 7] contracted on its last axis.
  const auto g = [](auto x, auto w) { return tessel::matmul(tessel::transpose<1, 0, 2>(x), w); };
  const auto x = random_tensor<float, shape<5, 3, 7>>(24);
  const auto w = random_tensor<float, shape<7, 4>>(25);
  const auto y = jit(f)(a, b, c);
  const auto z = jit(g)(x, w);
  for (std::size_t i = 0; i < 48; ++i)
    for (std::size_t j = 0; j < 48; ++j) {
      double want = 0;
      for (std::size_t k = 0; k < 70; ++k) want += static_cast<double>(a(k, i)) * b(k, j);
      for (std::size_t k = 0; k < 48; ++k) want += static_cast<double>(c(i, k)) * c(j, k);
      ASSERT_NEAR(y(i, j), want, 1e-4 * (1.0 + std::abs(want))) << i << ", " << j;
    }
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t r = 0; r < 5; ++r)
      for (std::size_t j = 0; j < 4; ++j) {
        double want = 0;
        for (std::size_t k = 0; k < 7; ++k) want += static_cast<double>(x(r, i, k)) * w(k, j);
        ASSERT_NEAR(z(i, r, j), want, 1e-4 * (1.0 + std::abs(want))) << i << ", " << r << ", " << j;
      }
}

TEST(Fusion, LiteralsNeverMerge) {
  // Equal types, different run-time constants: x*0.5 + x*0.7 must stay two products.
  const auto f = [](auto x) { return x * 0.5f + x * 0.7f; };
  const tensor<float, shape<4>> x{1, 2, 3, 4};
  const auto y = jit(f)(x);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[i], x[i] * 0.5f + x[i] * 0.7f);
  // ...while identical subexpressions do merge: exp(x) is computed once.
  const auto g = [](auto v) { return tessel::exp(v) + tessel::exp(v); };
  constexpr auto& p = decltype(jit(g))::traced_for<tensor<float, shape<4>>>::plan;
  constexpr int exps = [] {
    int n = 0;
    for (const auto& node : p.program.nodes) n += node.prim == &tessel::prim::exp_p;
    return n;
  }();
  static_assert(exps == 1);
  // Two arguments of the same type are two values, never merged.
  const auto h = [](auto a, auto b) { return a - b; };
  EXPECT_EQ(jit(h)(x, tensor<float, shape<4>>{1, 1, 1, 1}), (tensor<float, shape<4>>{0, 1, 2, 3}));
}

// A literal is its bytes, as XLA compares constants: 0.0f == -0.0f and NaN != NaN as values, yet -0.0f
// is its own constant and a NaN merges only with the same NaN.
constexpr float nan_a = std::bit_cast<float>(0x7fc00001u), nan_b = std::bit_cast<float>(0x7fc00002u);

template <class P>
constexpr int count_of(const P& p, const tessel::ir::primitive& prim) {
  int n = 0;
  for (const auto& node : p.program.nodes) n += node.prim == &prim;
  return n;
}

TEST(Fusion, LiteralsAreComparedByTheirBytes) {
  const auto zeros = [](auto x) { return std::make_tuple(x * 0.0f, x * -0.0f, x * 0.0f); };
  const tensor<float, shape<3>> x{1, 2, 3};
  const auto [plus, minus, plus_again] = jit(zeros)(x);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(std::signbit(plus[i])) << i;
    EXPECT_TRUE(std::signbit(minus[i])) << "x * -0.0f must be -0 where x > 0; element " << i;
    EXPECT_FALSE(std::signbit(plus_again[i])) << i;
  }
  constexpr auto& zeros_plan = plan_of(zeros, x);
  EXPECT_EQ(count_of(zeros_plan, tessel::prim::literal_p), 2) << "0.0f written twice is one constant";
  EXPECT_EQ(count_of(zeros_plan, tessel::prim::mul_p), 2);

  const auto nans = [](auto v) { return std::make_tuple(v + nan_a, v + nan_b, v + nan_a); };
  const auto [a, b, a_again] = jit(nans)(x);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(a[i]), 0x7fc00001u) << i;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(b[i]), 0x7fc00002u) << "a NaN's payload is its own; element " << i;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(a_again[i]), 0x7fc00001u) << i;
  }
  EXPECT_EQ(count_of(plan_of(nans, x), tessel::prim::literal_p), 2) << "the same NaN written twice is one constant";
}

TEST(Fusion, MultiUseValuesAreMaterialisedOnce) {
  // e feeds a reduction and an elementwise output: one buffer, computed once, alive until its last reader.
  const auto f = [](auto x) {
    auto e = tessel::exp(tessel::transpose<1, 0>(x));
    return std::make_tuple(tessel::sum<0>(e), e * 2.0f);
  };
  const auto x = random_tensor<float, shape<3, 5>>(4);
  constexpr auto& p = plan_of(f, x);
  constexpr int exp_node = [] {
    for (int i = 0; i < static_cast<int>(p.program.size); ++i)
      if (p.node(i).prim == &tessel::prim::exp_p) return i;
    return -1;
  }();
  static_assert(exp_node >= 0, "e = exp(...) is one node");
  // Exactly one kernel computes e, and it is stored once (an arena slot), read by both consumers.
  constexpr int computing = [] {
    int n = 0;
    for (int k = 0; k < p.kernel_count; ++k) {
      const auto& kr = p.kernels[static_cast<std::size_t>(k)];
      for (int m = 0; m < kr.member_count; ++m) n += p.members[static_cast<std::size_t>(kr.first_member + m)] == exp_node;
    }
    return n;
  }();
  static_assert(computing == 1, "e must be computed by one kernel, not recomputed by each consumer");
  static_assert(p.materialized[exp_node] && p.arena_offset[exp_node] >= 0);
  constexpr std::size_t a = tessel::plan::arena_alignment;
  static_assert(p.arena_bytes == 2 * ((5 * 3 * sizeof(float) + a - 1) / a * a), "two buffers: the transpose and e");
  const auto [s, d] = jit(f)(x);
  for (std::size_t j = 0; j < 3; ++j) {
    double r = 0;
    for (std::size_t i = 0; i < 5; ++i) r += std::exp(static_cast<double>(x(j, i)));
    EXPECT_NEAR(s[j], r, 1e-4);
  }
  EXPECT_FLOAT_EQ(d(4, 2), 2 * std::exp(x(2, 4)));
}

// A reshape of a buffer some kernel stores whole (a transpose, a matmul) is that buffer: no copy kernel.
// Attention merges its heads so: [B, T, H, Dh] -> [B, T, H * Dh], then a matmul.
TEST(Fusion, ReshapeOfAStoredBufferIsThatBuffer) {
  const auto f = [](auto x, auto w) {
    const auto merged = tessel::reshape<shape<2, 6, 12>>(tessel::transpose<0, 2, 1, 3>(x));  // x: [2, 3 heads, 6, 4]
    const auto flat = tessel::reshape<shape<12, 12>>(merged);
    return tessel::reshape<shape<2, 6, 12>>(tessel::matmul(flat, w)) * 2.0f;
  };
  const auto x = random_tensor<float, shape<2, 3, 6, 4>>(5);
  const auto w = random_tensor<float, shape<12, 12>>(6);
  constexpr auto& p = plan_of(f, x, w);
  constexpr int copies = [] {
    int n = 0;
    for (int k = 0; k < p.kernel_count; ++k) {
      const auto& kr = p.kernels[static_cast<std::size_t>(k)];
      bool only_reshapes = kr.kind == tessel::plan::kernel_kind::loop;
      for (int m = 0; m < kr.member_count; ++m)
        only_reshapes = only_reshapes && p.node(p.members[static_cast<std::size_t>(kr.first_member + m)]).prim->kind == tessel::ir::prim_kind::reshape;
      n += only_reshapes;
    }
    return n;
  }();
  static_assert(copies == 0, "no kernel only copies a reshape");
  static_assert(p.kernel_count == 3, "the transpose, the matmul and the scaling (which reads the matmul's bytes reshaped)");
  const auto y = jit(f)(x, w);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t t = 0; t < 6; ++t)
      for (std::size_t o = 0; o < 12; ++o) {
        double r = 0;
        for (std::size_t h = 0; h < 3; ++h)
          for (std::size_t d = 0; d < 4; ++d) r += static_cast<double>(x(b, h, t, d)) * w(h * 4 + d, o);
        EXPECT_NEAR(y(b, t, o), 2 * r, 1e-4) << b << " " << t << " " << o;
      }
}

// A broadcast of an iota that no kernel stores computes the iota where it reads it (it read a buffer that
// did not exist before: vmap leaves an iota unbatched under a batched broadcast, as in a vmapped
// random::uniform<shape<N>>).
TEST(Fusion, BroadcastOfAnIotaReadsItsValues) {
  const auto f = [](auto x) { return x + tessel::broadcast_to<shape<3, 5>>(tessel::broadcasted_iota<float, shape<5>, 0>(x)); };
  const auto y = jit(f)(tensor<float, shape<3, 5>>{});
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 5; ++c) EXPECT_EQ(y(r, c), static_cast<float>(c)) << r << "," << c;
  const auto g = [](auto x) { return x + tessel::broadcast_to<shape<4, 2, 3>>(tessel::broadcasted_iota<std::uint32_t, shape<2, 3>, 1>(x)); };
  const auto z = jit(g)(tensor<std::uint32_t, shape<4, 2, 3>>{});
  for (std::size_t i = 0; i < z.size; ++i) EXPECT_EQ(z[i], i % 3) << i;
  // Along the leading axis (not the result's trailing dims): the whole iota, then gathered.
  const auto h = [](auto x) { return x + tessel::broadcast_in_dim<shape<5, 3>, 0>(tessel::broadcasted_iota<std::int32_t, shape<5>, 0>(x)); };
  const auto w = jit(h)(tensor<std::int32_t, shape<5, 3>>{});
  for (std::size_t i = 0; i < w.size; ++i) EXPECT_EQ(w[i], static_cast<std::int32_t>(i / 3)) << i;
}

// Results that only one loop reads are computed in that loop and stored from it (plan::stored_member):
// an Adam-like update of a parameter is one loop reading p, m, v and g once and writing p, m and v, where
// it was three (the moments stored by two loops and read back by the third). Over five tiles, the
// values are bit for bit those of each result planned alone. Donated, every result lands in its argument's
// buffer, written once the tile's members are computed: p's update also reads the old m, which a moment
// stored as soon as computed would have overwritten.
constexpr auto adam_moment = [](auto m, auto g) { return m * 0.9f + g * 0.1f; };
constexpr auto adam_second = [](auto v, auto g) { return v * 0.999f + g * g * 0.001f; };
constexpr auto adam_param = [](auto p, auto m, auto v, auto g) {
  return p - adam_moment(m, g) * 0.01f / (tessel::sqrt(adam_second(v, g)) + 1e-8f) + m * 1e-4f;
};

TEST(Fusion, ResultsOnlyOneLoopReadsAreStoredFromIt) {
  const auto step = [](auto p, auto m, auto v, auto g) {
    return std::make_tuple(adam_param(p, m, v, g), adam_moment(m, g), adam_second(v, g));
  };
  const auto param = adam_param;
  const auto moment = adam_moment;
  const auto second = adam_second;
  using vec = tensor<float, shape<5000>>;
  const vec p = random_tensor<float, shape<5000>>(21), m = random_tensor<float, shape<5000>>(22),
            v = random_tensor<float, shape<5000>>(23, 0.0, 1.0), g = random_tensor<float, shape<5000>>(24);
  constexpr auto& plan = plan_of(step, p, m, v, g);
  static_assert(plan.kernel_count == 1 && plan.kernels[0].kind == tessel::plan::kernel_kind::loop &&
                    plan.kernels[0].stores_members && plan.arena_bytes == 0,
                "one loop stores the parameter and both moments");
  const vec want_p = jit(param)(p, m, v, g), want_m = jit(moment)(m, g), want_v = jit(second)(v, g);
  const auto check = [&](const vec& got_p, const vec& got_m, const vec& got_v) {
    for (std::size_t i = 0; i < 5000; ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got_p[i]), std::bit_cast<std::uint32_t>(want_p[i])) << "p " << i;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got_m[i]), std::bit_cast<std::uint32_t>(want_m[i])) << "m " << i;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got_v[i]), std::bit_cast<std::uint32_t>(want_v[i])) << "v " << i;
    }
  };
  {
    const auto [p1, m1, v1] = jit(step)(p, m, v, g);
    check(p1, m1, v1);
  }
  vec pd = p, md = m, vd = v;
  const float *p_buffer = pd.data(), *m_buffer = md.data(), *v_buffer = vd.data();
  const auto [p1, m1, v1] = jit(step)(tessel::donate(pd), tessel::donate(md), tessel::donate(vd), g);
  EXPECT_EQ(p1.data(), p_buffer);
  EXPECT_EQ(m1.data(), m_buffer);
  EXPECT_EQ(v1.data(), v_buffer);
  check(p1, m1, v1);
}

// A product that only such a loop reads joins it as a contraction: Adam's update of a weight is the
// epilogue of its gradient's product, the gradient never stored. 300 x 40 by 40 x 70 on the host's
// grid: the values are bit for bit those of the product and the update planned apart. Donated, p, m
// and v are updated in their buffers; a parameter the product itself reads is not (another block's
// product would read what this block's epilogue wrote).
TEST(Fusion, AProductTheStoringLoopReadsIsItsEpilogue) {
  const auto step = [](auto p, auto m, auto v, auto a, auto b) {
    const auto g = tessel::matmul(a, b);
    return std::make_tuple(adam_param(p, m, v, g), adam_moment(m, g), adam_second(v, g));
  };
  const auto param = adam_param;
  const auto moment = adam_moment;
  const auto second = adam_second;
  const auto product = [](auto a, auto b) { return tessel::matmul(a, b); };
  using mat = tensor<float, shape<300, 70>>;
  const mat p = random_tensor<float, shape<300, 70>>(31), m = random_tensor<float, shape<300, 70>>(32),
            v = random_tensor<float, shape<300, 70>>(33, 0.0, 1.0);
  const auto a = random_tensor<float, shape<300, 40>>(34);
  const auto b = random_tensor<float, shape<40, 70>>(35);
  constexpr auto& plan = plan_of(step, p, m, v, a, b);
  static_assert(plan.kernel_count == 1 && plan.kernels[0].kind == tessel::plan::kernel_kind::contraction &&
                    plan.kernels[0].stores_members && plan.arena_bytes == 0,
                "one contraction stores the parameter and both moments");
  const mat g = jit(product)(a, b);
  const mat want_p = jit(param)(p, m, v, g), want_m = jit(moment)(m, g), want_v = jit(second)(v, g);
  const auto check = [&](const mat& got_p, const mat& got_m, const mat& got_v) {
    for (std::size_t i = 0; i < mat::size; ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got_p[i]), std::bit_cast<std::uint32_t>(want_p[i])) << "p " << i;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got_m[i]), std::bit_cast<std::uint32_t>(want_m[i])) << "m " << i;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got_v[i]), std::bit_cast<std::uint32_t>(want_v[i])) << "v " << i;
    }
  };
  {
    const auto [p1, m1, v1] = jit(step)(p, m, v, a, b);
    check(p1, m1, v1);
  }
  mat pd = p, md = m, vd = v;
  const float *p_buffer = pd.data(), *m_buffer = md.data(), *v_buffer = vd.data();
  const auto [p1, m1, v1] = jit(step)(tessel::donate(pd), tessel::donate(md), tessel::donate(vd), a, b);
  EXPECT_EQ(p1.data(), p_buffer);
  EXPECT_EQ(m1.data(), m_buffer);
  EXPECT_EQ(v1.data(), v_buffer);
  check(p1, m1, v1);

  // The product reads the parameter: no result takes its buffer.
  const auto self_step = [](auto p, auto m, auto v, auto a) {
    const auto g = tessel::matmul(a, p);
    return std::make_tuple(adam_param(p, m, v, g), adam_moment(m, g), adam_second(v, g));
  };
  using sq = tensor<float, shape<96, 96>>;
  const sq sp = random_tensor<float, shape<96, 96>>(36), sm = random_tensor<float, shape<96, 96>>(37),
           sv = random_tensor<float, shape<96, 96>>(38, 0.0, 1.0), sa = random_tensor<float, shape<96, 96>>(39);
  static_assert(plan_of(self_step, sp, sm, sv, sa).kernels[0].kind == tessel::plan::kernel_kind::contraction);
  const sq sg = jit(product)(sa, sp);
  const sq want_sp = jit(param)(sp, sm, sv, sg), want_sm = jit(moment)(sm, sg), want_sv = jit(second)(sv, sg);
  sq spd = sp, smd = sm, svd = sv;
  const float* sp_buffer = spd.data();
  const auto [sp1, sm1, sv1] = jit(self_step)(tessel::donate(spd), tessel::donate(smd), tessel::donate(svd), sa);
  EXPECT_NE(sp1.data(), sp_buffer);
  EXPECT_NE(sm1.data(), sp_buffer);
  EXPECT_NE(sv1.data(), sp_buffer);
  for (std::size_t i = 0; i < sq::size; ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(sp1[i]), std::bit_cast<std::uint32_t>(want_sp[i])) << "p " << i;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(sm1[i]), std::bit_cast<std::uint32_t>(want_sm[i])) << "m " << i;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(sv1[i]), std::bit_cast<std::uint32_t>(want_sv[i])) << "v " << i;
  }
}

// Pads that a loop reads are computed in it, a tile at a time: the transpose of slicing q, k and v out of
// one [B, T, 3D] projection is three pads summed, one pass and no [B, T, 3D] buffer per pad. Tiles of 1024
// straddle rows of 120 and 37; the second sum crops (negative lo), pads outer axes and spreads with
// interior padding, from a padding value given at run time.
TEST(Fusion, PadsSummedInALoopAreComputedInIt) {
  using tessel::pad_axis;
  const auto f = [](auto q, auto k, auto v) {
    return tessel::pad<std::array{pad_axis{}, pad_axis{}, pad_axis{0, 80, 0}}>(q, 0.0f) +
           tessel::pad<std::array{pad_axis{}, pad_axis{}, pad_axis{40, 40, 0}}>(k, 0.0f) * 2.0f +
           tessel::pad<std::array{pad_axis{}, pad_axis{}, pad_axis{80, 0, 0}}>(v, 0.0f);
  };
  const auto q = random_tensor<float, shape<5, 33, 40>>(7), k = random_tensor<float, shape<5, 33, 40>>(8),
             v = random_tensor<float, shape<5, 33, 40>>(9);
  constexpr auto& p = plan_of(f, q, k, v);
  static_assert(p.kernel_count == 1 && p.kernels[0].kind == tessel::plan::kernel_kind::loop && p.arena_bytes == 0,
                "one loop, no pad stored");
  const auto y = jit(f)(q, k, v);
  for (std::size_t b = 0; b < 5; ++b)
    for (std::size_t t = 0; t < 33; ++t)
      for (std::size_t c = 0; c < 120; ++c) {
        const std::size_t j = c % 40;
        const float want = c < 40 ? q(b, t, j) : c < 80 ? k(b, t, j) * 2.0f : v(b, t, j);
        ASSERT_EQ(y(b, t, c), want) << b << " " << t << " " << c;
      }

  const auto g = [](auto x, auto fill, auto z) {
    return tessel::pad<std::array{pad_axis{2, 1, 1}, pad_axis{-3, 2, 0}, pad_axis{1, 0, 2}}>(x, fill) + z;
  };
  const auto x = random_tensor<float, shape<4, 9, 13>>(10);
  const tensor<float, shape<>> fill{-0.5f};
  const auto z = random_tensor<float, shape<10, 8, 38>>(11);  // 2 + 4 + 3 + 1, -3 + 9 + 2, 1 + 13 + 24
  constexpr auto& pg = plan_of(g, x, fill, z);
  static_assert(pg.kernel_count == 1 && pg.kernels[0].kind == tessel::plan::kernel_kind::loop);
  const auto w = jit(g)(x, fill, z);
  for (std::size_t i = 0; i < 10; ++i)
    for (std::size_t r = 0; r < 8; ++r)
      for (std::size_t c = 0; c < 38; ++c) {
        const bool in_i = i >= 2 && (i - 2) % 2 == 0 && (i - 2) / 2 < 4, in_c = c >= 1 && (c - 1) % 3 == 0;
        const bool in_r = r + 3 < 9;
        const float padded = in_i && in_r && in_c ? x((i - 2) / 2, r + 3, (c - 1) / 3) : -0.5f;
        ASSERT_EQ(w(i, r, c), padded + z(i, r, c)) << i << " " << r << " " << c;
      }

  // A pad reads its operand at other elements than the loop writes, so a donated operand's buffer is not
  // the result's: a shift by one over 5000 elements (five tiles, on every thread) reads only the input.
  const auto shift = [](auto u) { return tessel::pad<std::array{pad_axis{-1, 1, 0}}>(u, 0.0f) + u; };
  auto u = random_tensor<float, shape<5000>>(12);
  const auto before = u;
  static_assert(!plan_of(shift, u).kernels[0].uniform);
  const auto shifted = jit(shift)(tessel::donate(u));
  for (std::size_t i = 0; i < 5000; ++i) ASSERT_EQ(shifted[i], (i + 1 < 5000 ? before[i + 1] : 0.0f) + before[i]) << i;
}

// A broadcast defined outside a loop body and read inside it (an attention bias over heads, an invariant of
// the scan over layers) is gathered from its operand by each step's kernels, not stored whole once.
TEST(Fusion, ABroadcastReadInALoopBodyIsGatheredNotStored) {
  const auto f = [](auto x, auto bias, auto ws) {
    auto [h, unused] = tessel::scan([&](auto carry, auto w) { return std::tuple{tessel::softmax(carry * w + bias), std::tuple<>{}}; }, x, ws);
    return h;
  };
  const auto x = random_tensor<float, shape<3, 4, 40, 40>>(13);
  const auto bias = random_tensor<float, shape<3, 1, 40, 40>>(14);
  const auto ws = random_tensor<float, shape<5>>(15);
  constexpr auto& p = plan_of(f, x, bias, ws);
  constexpr bool stored = [] {
    for (std::size_t i = 0; i < p.program.nodes.size(); ++i)
      if (p.program.nodes[i].prim->kind == tessel::ir::prim_kind::broadcast && p.program.nodes[i].shape.size() == 3 * 4 * 40 * 40 && p.materialized[i])
        return true;
    return false;
  }();
  static_assert(!stored, "the bias spread over heads has no buffer");
  const auto y = jit(f)(x, bias, ws);
  std::vector<double> h(x.size);
  for (std::size_t i = 0; i < x.size; ++i) h[i] = x[i];
  for (std::size_t l = 0; l < 5; ++l)
    for (std::size_t row = 0; row < 3 * 4 * 40; ++row) {
      double z[40], most = -INFINITY, sum = 0;
      for (std::size_t j = 0; j < 40; ++j) {
        const std::size_t b = row / 160, i = row % 40;
        z[j] = h[row * 40 + j] * ws[l] + bias[(b * 40 + i) * 40 + j];
        most = std::max(most, z[j]);
      }
      for (double& v : z) sum += v = std::exp(v - most);
      for (std::size_t j = 0; j < 40; ++j) h[row * 40 + j] = z[j] / sum;
    }
  for (std::size_t i = 0; i < x.size; ++i) ASSERT_NEAR(y[i], h[i], 1e-5) << i;
}

TEST(Fusion, ArenaReusesDeadBuffers) {
  // Four layout kernels in a chain: each intermediate dies when the next is made, so two slots suffice.
  const auto f = [](auto x) {
    auto a = tessel::transpose<1, 0>(x);
    auto b = tessel::transpose<1, 0>(a * 2.0f);
    auto c = tessel::transpose<1, 0>(b * 3.0f);
    return tessel::transpose<1, 0>(c * 4.0f);
  };
  constexpr auto& p = decltype(jit(f))::traced_for<tensor<float, shape<64, 32>>>::plan;
  constexpr std::size_t one = 64 * 32 * 4;
  static_assert(p.arena_bytes <= 2 * one, "dead buffers must be reused");
  static_assert(p.arena_bytes >= one);
  const auto x = random_tensor<float, shape<64, 32>>(5);
  const auto y = jit(f)(x);
  EXPECT_FLOAT_EQ(y(7, 9), 24 * x(7, 9));
}

TEST(Fusion, OutputsCanRepeatAndBeArguments) {
  const auto f = [](auto x) { return std::make_tuple(x, x + 1.0f, x + 1.0f, 2.0f * x); };
  const tensor<float, shape<2>> x{1, 2};
  const auto [a, b, c, d] = jit(f)(x);
  EXPECT_EQ(a, x);
  EXPECT_EQ(b, (tensor<float, shape<2>>{2, 3}));
  EXPECT_EQ(c, b);
  EXPECT_EQ(d, (tensor<float, shape<2>>{2, 4}));
}

TEST(Fusion, LargeLoopsRunOnEveryCore) {
  // Chunks go to whichever thread asks first, so one call may leave a thread idle; over calls of a
  // 2^20-element loop every thread of the pool must have run blocks of it. Calls for up to 10 s, not a
  // count: on a machine loaded by other tests (ctest -j2 on 2 cores) 200 calls once ran in 0.1 s on one thread.
  auto& pool = tessel::kernels::thread_pool::host();
  if (pool.size() < 2) GTEST_SKIP() << "the host pool has one thread (TESSEL_NUM_THREADS or the affinity mask)";
  const auto f = [](auto x) { return tessel::tanh(x) * 3.0f - 1.0f; };
  const auto x = random_tensor<float, shape<1 << 20>>(6);
  const std::uint64_t every = pool.size() >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << pool.size()) - 1;
  std::uint64_t seen = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int call = 0; seen != every && (call < 200 || std::chrono::steady_clock::now() < until); ++call) {
    const auto y = jit(f)(x);
    seen |= pool.last_participants();
    if (call == 0) {
      for (std::size_t i = 0; i < x.size; i += 4099) ASSERT_NEAR(y[i], std::tanh(x[i]) * 3 - 1, 1e-6);
    }
  }
  EXPECT_EQ(seen, every) << "threads that ran blocks (bit mask) of a pool of " << pool.size();
}
}  // namespace

namespace {
// A convolution with its bias and relu: one kernel, the epilogue applied to each block of output rows;
// the values equal the convolution's (run as its own kernel) followed by the epilogue.
TEST(Fusion, ConvBiasReluIsOneKernel) {
  using tessel::padding::same;
  using tessel::stride;
  const auto fused = [](auto x, auto w, auto b) { return tessel::relu(tessel::conv_general<stride<1, 1>, same>(x, w) + b); };
  const auto conv = [](auto x, auto w) { return tessel::conv_general<stride<1, 1>, same>(x, w); };
  const auto x = random_tensor<float, shape<3, 12, 12, 5>>(11);
  const auto w = random_tensor<float, shape<3, 3, 5, 16>>(12);
  const auto b = random_tensor<float, shape<16>>(13);
  constexpr auto& p = decltype(jit(fused))::traced_for<decltype(x), decltype(w), decltype(b)>::plan;
  static_assert(p.kernel_count == 1 && p.kernels[0].kind == tessel::plan::kernel_kind::contraction);
  static_assert(p.arena_bytes == 0, "no buffer between the convolution and its epilogue");
  const auto y = jit(fused)(x, w, b);
  const auto c = jit(conv)(x, w);
  for (std::size_t i = 0; i < decltype(y)::size; ++i) ASSERT_EQ(y[i], std::max(0.0f, c[i] + b[i % 16])) << i;
}
}  // namespace
