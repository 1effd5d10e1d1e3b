// dot_general in every layout the GEMM reads through strides, and the ones that need a transpose,
// against a double reference; sizes that hit full micro-kernel tiles, edges and several K blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::axes;
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

template <std::size_t M, std::size_t K, std::size_t N>
void check_matmul() {
  const auto a = random_tensor<float, shape<M, K>>(31);
  const auto b = random_tensor<float, shape<K, N>>(32);
  const auto c = jit([](auto x, auto y) { return tessel::matmul(x, y); })(a, b);
  // The same product with A^T and B^T given (read through strides) and with a transposed result.
  const auto at = jit([](auto x) { return tessel::transpose<1, 0>(x); })(a);
  const auto bt = jit([](auto y) { return tessel::transpose<1, 0>(y); })(b);
  const auto c_at = jit([](auto xt, auto y) { return tessel::dot_general<axes<0>, axes<0>>(xt, y); })(at, b);
  const auto c_bt = jit([](auto x, auto yt) { return tessel::dot_general<axes<1>, axes<1>>(x, yt); })(a, bt);
  const auto ct = jit([](auto x, auto y) { return tessel::dot_general<axes<0>, axes<1>>(y, x); })(a, b);  // [N, M]
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      double r = 0;
      for (std::size_t k = 0; k < K; ++k) r += static_cast<double>(a(i, k)) * b(k, j);
      const double tol = 1e-5 * K;
      ASSERT_NEAR(c(i, j), r, tol) << i << "," << j;
      ASSERT_NEAR(c_at(i, j), r, tol);
      ASSERT_NEAR(c_bt(i, j), r, tol);
      ASSERT_NEAR(ct(j, i), r, tol);
    }
}

TEST(Contraction, MatmulShapes) {
  check_matmul<1, 1, 1>();
  check_matmul<12, 8, 32>();    // one full micro-kernel tile
  check_matmul<13, 7, 33>();    // edges everywhere
  check_matmul<100, 300, 70>();  // two K blocks, several M blocks
}

TEST(Contraction, BatchedAndMultipleContractingAxes) {
  const auto a = random_tensor<float, shape<3, 4, 5>>(33);
  const auto b = random_tensor<float, shape<3, 5, 6>>(34);
  const auto c = jit([](auto x, auto y) { return tessel::matmul(x, y); })(a, b);
  const auto w = random_tensor<float, shape<4, 5, 2>>(35);
  // Contract a's axes (1, 2) with w's (0, 1): [3, 4, 5] x [4, 5, 2] -> [3, 2].
  const auto d = jit([](auto x, auto y) { return tessel::dot_general<axes<1, 2>, axes<0, 1>>(x, y); })(a, w);
  // Contract in swapped order (2, 1) with (1, 0): needs a transpose of one operand first.
  const auto wt = jit([](auto y) { return tessel::transpose<1, 0, 2>(y); })(w);  // [5, 4, 2]
  const auto e = jit([](auto x, auto y) { return tessel::dot_general<axes<2, 1>, axes<0, 1>>(x, y); })(a, wt);
  for (std::size_t bi = 0; bi < 3; ++bi) {
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 6; ++j) {
        double r = 0;
        for (std::size_t k = 0; k < 5; ++k) r += static_cast<double>(a(bi, i, k)) * b(bi, k, j);
        EXPECT_NEAR(c(bi, i, j), r, 1e-5);
      }
    for (std::size_t n = 0; n < 2; ++n) {
      double r = 0;
      for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t k = 0; k < 5; ++k) r += static_cast<double>(a(bi, i, k)) * w(i, k, n);
      EXPECT_NEAR(d(bi, n), r, 1e-5);
      EXPECT_NEAR(e(bi, n), r, 1e-5);
    }
  }
}

TEST(Contraction, Bf16AccumulatesInF32) {
  const auto a = random_tensor<float, shape<16, 64>>(36).astype<tessel::bfloat16>();
  const auto b = random_tensor<float, shape<64, 8>>(37).astype<tessel::bfloat16>();
  const auto c = jit([](auto x, auto y) { return tessel::matmul(x, y); })(a, b);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(c)>, tensor<tessel::bfloat16, shape<16, 8>>>);
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t j = 0; j < 8; ++j) {
      double r = 0;
      for (std::size_t k = 0; k < 64; ++k) r += static_cast<double>(static_cast<float>(a(i, k))) * static_cast<float>(b(k, j));
      EXPECT_NEAR(static_cast<float>(c(i, j)), r, std::abs(r) / 128 + 1e-6);  // one bf16 rounding of an f32 sum
    }
}

// A bf16 product with no epilogue is converted from each f32 block of C straight to its storage (run_contraction),
// one with an epilogue through the epilogue's tiles: over blocks cut at odd rows and columns, and batched, the same
// bits (times 1 is exact), within one bf16 rounding of the exact sum.
TEST(Contraction, Bf16BlocksAreConvertedAsTheEpilogueConvertsThem) {
  const auto check = [](const auto& a, const auto& b) {
    const auto c = jit([](auto x, auto y) { return tessel::matmul(x, y); })(a, b);
    const auto e = jit([](auto x, auto y) { return tessel::matmul(x, y) * tessel::bfloat16(1.0f); })(a, b);
    ASSERT_EQ(c.size, e.size);
    for (std::size_t i = 0; i < c.size; ++i) ASSERT_EQ(c[i].bits(), e[i].bits()) << i;
  };
  const auto a = random_tensor<float, shape<203, 70>>(41).astype<tessel::bfloat16>();
  const auto b = random_tensor<float, shape<70, 301>>(42).astype<tessel::bfloat16>();
  check(a, b);
  const auto c = jit([](auto x, auto y) { return tessel::matmul(x, y); })(a, b);
  for (std::size_t i = 0; i < 203; i += 17)
    for (std::size_t j = 0; j < 301; j += 13) {
      double r = 0;
      for (std::size_t k = 0; k < 70; ++k) r += static_cast<double>(static_cast<float>(a(i, k))) * static_cast<float>(b(k, j));
      EXPECT_NEAR(static_cast<float>(c(i, j)), r, std::abs(r) / 128 + 1e-5) << i << " " << j;
    }
  check(random_tensor<float, shape<3, 37, 50>>(43).astype<tessel::bfloat16>(),
        random_tensor<float, shape<3, 50, 29>>(44).astype<tessel::bfloat16>());
}

TEST(Contraction, EpilogueFusesAndMatchesUnfused) {
  const auto x = random_tensor<float, shape<37, 19>>(38);
  const auto w = random_tensor<float, shape<19, 23>>(39);
  const auto b = random_tensor<float, shape<23>>(40);
  const auto f = [](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); };
  // Fused: one contraction kernel whose members are the GEMM, the bias broadcast, the add and the max,
  // with no intermediate buffer.
  constexpr auto& p = decltype(jit(f))::traced_for<decltype(x), decltype(w), decltype(b)>::plan;
  static_assert(p.kernel_count == 1 && p.kernels[0].kind == tessel::plan::kernel_kind::contraction);
  static_assert(p.arena_bytes == 0);
  static_assert([] {
    bool add = false, max = false;
    for (int m = 0; m < p.kernels[0].member_count; ++m) {
      const auto* prim = p.node(p.members[static_cast<std::size_t>(p.kernels[0].first_member + m)]).prim;
      add = add || prim == &tessel::prim::add_p;
      max = max || prim == &tessel::prim::max_p;
    }
    return add && max;
  }());
  const auto y = jit(f)(x, w, b);
  // Unfused and independent of the GEMM: each element from its own dot product in double, then the epilogue.
  for (std::size_t i = 0; i < 37; ++i)
    for (std::size_t j = 0; j < 23; ++j) {
      double dot = 0, magnitude = 0;
      for (std::size_t k = 0; k < 19; ++k) {
        dot += static_cast<double>(x(i, k)) * w(k, j);
        magnitude += std::abs(static_cast<double>(x(i, k)) * w(k, j));
      }
      const double r = std::max(0.0, dot + b[j]);
      EXPECT_NEAR(y(i, j), r, 2 * 19 * 0x1p-24 * magnitude + 0x1p-24 * (std::abs(dot) + std::abs(b[j])) + 1e-7) << i << "," << j;
    }
}
}  // namespace
