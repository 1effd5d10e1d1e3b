// Every collective on meshes of 1, 2, 4 and 8 devices, with one and two axes, against the same computation
// done unsharded on the host: the global array cut into the devices' blocks, the collective's reference
// semantics (JAX's shard_map docs, `collective_ref`) applied per group, the blocks put back together.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

using X = tensor<float, shape<8, 8>>;

X random_x(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  X x(uninitialized);
  for (std::size_t i = 0; i < 64; ++i) x.data()[i] = u(rng);
  return x;
}

template <class T, class S>
void expect_equal(const tensor<T, S>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(want.size(), S::size) << what;
  for (std::size_t i = 0; i < S::size; ++i) ASSERT_EQ(static_cast<float>(got.data()[i]), want[i]) << what << " element " << i;
}

// One axis "a" of D devices; x split by rows: device k holds rows [k r, (k+1) r), r = 8 / D.
template <std::size_t D>
void one_axis() {
  using M = mesh<axis<"a", D>>;
  constexpr std::size_t r = 8 / D, c = 8 / D;
  const X x = random_x(D);
  auto at = [&](std::size_t i, std::size_t j) { return x.data()[i * 8 + j]; };

  {  // psum: the sum of the D row blocks, in device order
    const auto y = shard_map<M, specs<P<"a">>, P<>>([](auto b) { return psum<"a">(b); })(x);
    std::vector<float> want(r * 8, 0.0f);
    for (std::size_t k = 0; k < D; ++k)
      for (std::size_t i = 0; i < r * 8; ++i) want[i] = k == 0 ? at(i / 8, i % 8) : want[i] + at(k * r + i / 8, i % 8);
    expect_equal(y, want, "psum");
  }
  {  // pmax and pmin
    const auto hi = shard_map<M, specs<P<"a">>, P<>>([](auto b) { return pmax<"a">(b); })(x);
    const auto lo = shard_map<M, specs<P<"a">>, P<>>([](auto b) { return pmin<"a">(b); })(x);
    std::vector<float> want_hi(r * 8), want_lo(r * 8);
    for (std::size_t i = 0; i < r * 8; ++i) {
      want_hi[i] = want_lo[i] = at(i / 8, i % 8);
      for (std::size_t k = 1; k < D; ++k) {
        want_hi[i] = std::max(want_hi[i], at(k * r + i / 8, i % 8));
        want_lo[i] = std::min(want_lo[i], at(k * r + i / 8, i % 8));
      }
    }
    expect_equal(hi, want_hi, "pmax");
    expect_equal(lo, want_lo, "pmin");
  }
  {  // all_gather tiled along rows: every device holds x; out P<"a"> stacks the D copies
    const auto y = shard_map<M, specs<P<"a">>, P<"a">>([](auto b) { return all_gather<M, "a", 0, true>(b); })(x);
    std::vector<float> want;
    for (std::size_t k = 0; k < D; ++k) want.insert(want.end(), x.data(), x.data() + 64);
    expect_equal(y, want, "all_gather");
  }
  {  // psum_scatter along columns: device k keeps column block k of the sum
    const auto y = shard_map<M, specs<P<"a">>, P<"a">>([](auto b) { return psum_scatter<M, "a", 1, true>(b); })(x);
    std::vector<float> want;
    for (std::size_t k = 0; k < D; ++k)
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < c; ++j) {
          float s = at(i, k * c + j);
          for (std::size_t m = 1; m < D; ++m) s += at(m * r + i, k * c + j);
          want.push_back(s);
        }
    expect_equal(y, want, "psum_scatter");
  }
  {  // ppermute one step along a ring: device k gets device k-1's block
    auto shift = [](auto b) {
      if constexpr (D == 1) return ppermute<"a", edge{0, 0}>(b);
      else if constexpr (D == 2) return ppermute<"a", edge{0, 1}, edge{1, 0}>(b);
      else if constexpr (D == 4) return ppermute<"a", edge{0, 1}, edge{1, 2}, edge{2, 3}, edge{3, 0}>(b);
      else return ppermute<"a", edge{0, 1}, edge{1, 2}, edge{2, 3}, edge{3, 4}, edge{4, 5}, edge{5, 6}, edge{6, 7}, edge{7, 0}>(b);
    };
    const auto y = shard_map<M, specs<P<"a">>, P<"a">>(shift)(x);
    std::vector<float> want;
    for (std::size_t k = 0; k < D; ++k)
      for (std::size_t i = 0; i < r * 8; ++i) want.push_back(at(((k + D - 1) % D) * r + i / 8, i % 8));
    expect_equal(y, want, "ppermute");
  }
  {  // all_to_all: split columns, concatenate rows: device k ends with column block k of x
    const auto y = shard_map<M, specs<P<"a">>, P<"a">>([](auto b) { return all_to_all<M, "a", 1, 0, true>(b); })(x);
    std::vector<float> want;
    for (std::size_t k = 0; k < D; ++k)
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < c; ++j) want.push_back(at(i, k * c + j));
    expect_equal(y, want, "all_to_all");
  }
}

TEST(MeshSizes, OneAxisOf1) { one_axis<1>(); }
TEST(MeshSizes, OneAxisOf2) { one_axis<2>(); }
TEST(MeshSizes, OneAxisOf4) { one_axis<4>(); }
TEST(MeshSizes, OneAxisOf8) { one_axis<8>(); }

// Two axes "a" (A devices) and "b" (B devices); x split into A x B blocks of [8/A, 8/B].
template <std::size_t A, std::size_t B>
void two_axes() {
  using M = mesh<axis<"a", A>, axis<"b", B>>;
  constexpr std::size_t r = 8 / A, c = 8 / B;
  const X x = random_x(10 * A + B);
  auto at = [&](std::size_t i, std::size_t j) { return x.data()[i * 8 + j]; };

  {  // psum over "b": the row band i is the sum of its B blocks, in order
    const auto y = shard_map<M, specs<P<"a", "b">>, P<"a", none>>([](auto b) { return psum<"b">(b); })(x);
    std::vector<float> want;
    for (std::size_t i = 0; i < 8; ++i)
      for (std::size_t j = 0; j < c; ++j) {
        float s = at(i, j);
        for (std::size_t m = 1; m < B; ++m) s += at(i, m * c + j);
        want.push_back(s);
      }
    expect_equal(y, want, "psum over b");
  }
  {  // psum over both, "a" major: the sum of all A*B blocks in device order
    const auto y = shard_map<M, specs<P<"a", "b">>, P<>>([](auto b) { return psum<mesh_axes<"a", "b">>(b); })(x);
    std::vector<float> want;
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) {
        float s = 0;
        bool first = true;
        for (std::size_t p = 0; p < A; ++p)
          for (std::size_t q = 0; q < B; ++q) {
            s = first ? at(p * r + i, q * c + j) : s + at(p * r + i, q * c + j);
            first = false;
          }
        want.push_back(s);
      }
    expect_equal(y, want, "psum over (a, b)");
  }
  {  // all_gather over "b" along columns: block (p, q) becomes row band p, whole width
    const auto y = shard_map<M, specs<P<"a", "b">>, P<"a", "b">>([](auto b) { return all_gather<M, "b", 1, true>(b); })(x);
    std::vector<float> want;
    for (std::size_t i = 0; i < 8; ++i)
      for (std::size_t q = 0; q < B; ++q)
        for (std::size_t j = 0; j < 8; ++j) want.push_back(at(i, j));
    expect_equal(y, want, "all_gather over b");
  }
  {  // axis_index over (a, b): device (p, q) is p B + q
    const auto y = shard_map<M, specs<P<"a", "b">>, P<"a", "b">>(
        [](auto b) { return b * 0.0f + broadcast_to<shape<r, c>>(convert_element_type<float>(axis_index<mesh_axes<"a", "b">>(b))); })(x);
    std::vector<float> want;
    for (std::size_t i = 0; i < 8; ++i)
      for (std::size_t j = 0; j < 8; ++j) want.push_back(static_cast<float>((i / r) * B + j / c));
    expect_equal(y, want, "axis_index");
  }
}

TEST(MeshSizes, TwoAxes2x2) { two_axes<2, 2>(); }
TEST(MeshSizes, TwoAxes4x2) { two_axes<4, 2>(); }
TEST(MeshSizes, TwoAxes2x4) { two_axes<2, 4>(); }

// A mesh of more devices than this machine has cores gives the same bits, call after call.
TEST(MeshSizes, RepeatedCallsAreBitIdentical) {
  using M = mesh<axis<"a", 8>>;
  const X x = random_x(3);
  auto f = shard_map<M, specs<P<"a">>, P<>>([](auto b) { return psum<"a">(b * 1.37f); });
  const auto first = f(x);
  for (int run = 0; run < 20; ++run) {
    const auto again = f(x);
    for (std::size_t i = 0; i < first.size; ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(again.data()[i]), std::bit_cast<std::uint32_t>(first.data()[i]));
  }
}

}  // namespace
