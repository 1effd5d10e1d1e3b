// vmap of cond and switch_ (transform/control_batching.hpp): a shared predicate / index keeps the
// construct with batched branches; a batched one runs every branch and selects per example (switch_'s
// index clamped); a cond inside a scan whose predicate reads the batched carry. Against jit(f) per slice.
#include "control_check.hpp"

namespace {
using namespace control_check;
using tessel::in_axes;
using tessel::none;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
using tessel::testing::stack;

// ---- cond and switch_ ---------------------------------------------------------------------------------

constexpr auto branchy = [](auto p, auto x, auto w) {
  return tessel::cond(tessel::sum(p) > 0.0f, [&](auto v) { return tessel::tanh(tessel::matmul(v, w)); },
                      [](auto v) { return v * -2.0f; }, x);
};

// Predicates of both signs across the batch.
std::array<H, B> mixed_signs() {
  auto p = slices<H>(40);
  for (std::size_t b = 0; b < B; ++b)
    for (auto& v : p[b]) v = b == 1 ? -std::abs(v) : std::abs(v);
  return p;
}

TEST(VmapControl, CondSharedPredicate) {
  const auto p = mixed_signs();
  std::array<H, B> neg = p;
  for (auto& v : neg[0]) v = -std::abs(v);
  EXPECT_TRUE((check_vmap<none, 0, none>(branchy, p, slices<H>(41), slices<W>(42))));
  EXPECT_TRUE((check_vmap<none, 0, none>(branchy, neg, slices<H>(41), slices<W>(42))));
  // Only the true branch reads the batched closure: the false branch's output is broadcast.
  EXPECT_TRUE((check_vmap<none, none, 0>(branchy, p, slices<H>(43), slices<W>(44))));
  EXPECT_TRUE((check_vmap<none, none, 0>(branchy, neg, slices<H>(43), slices<W>(44))));
}

TEST(VmapControl, CondBatchedPredicateIsASelect) {
  const auto p = mixed_signs();
  EXPECT_TRUE((check_vmap<0, 0, none>(branchy, p, slices<H>(45), slices<W>(46))));
  EXPECT_TRUE((check_vmap<0, none, none>(branchy, p, slices<H>(47), slices<W>(48))));
  EXPECT_TRUE((check_vmap<0, 0, 0>(branchy, p, slices<H>(49), slices<W>(50))));
  // No construct is left: the program runs both branches and selects.
  using program = tessel::jitted<tessel::vmap_fn<std::remove_const_t<decltype(branchy)>, tessel::in_axes_t<0, 0, none>,
                                                 tessel::out_axes_t<0>>>::traced_for<tensor<float, shape<B, 4>>, tensor<float, shape<B, 4>>, W>;
  static_assert(program::program.construct_count == 0);
}

constexpr auto three_way = [](auto i, auto x, auto w) {
  return tessel::switch_(i, std::tuple{[](auto v, auto) { return std::tuple{v * 3.0f, tessel::sum(v)}; },
                                       [](auto v, auto u) { return std::tuple{tessel::tanh(tessel::matmul(v, u)), tessel::sum(u)}; },
                                       [](auto v, auto) { return std::tuple{-v, tessel::sum(v * v)}; }},
                         x, w);
};

TEST(VmapControl, SwitchSharedAndBatchedIndex) {
  std::array<I, B> index;
  const std::int32_t values[B] = {-1, 1, 5};  // clamped: 0, 1, 2
  for (std::size_t b = 0; b < B; ++b) index[b][0] = values[b];
  std::array<I, B> one;
  for (auto& i : one) i[0] = 1;
  EXPECT_TRUE((check_vmap<0, 0, none>(three_way, index, slices<H>(51), slices<W>(52))));
  EXPECT_TRUE((check_vmap<0, none, 0>(three_way, index, slices<H>(53), slices<W>(54))));
  EXPECT_TRUE((check_vmap<none, 0, none>(three_way, one, slices<H>(55), slices<W>(56))));
  EXPECT_TRUE((check_vmap<none, none, 0>(three_way, one, slices<H>(57), slices<W>(58))));
}

TEST(VmapControl, CondInsideScanWithABatchedCarry) {
  // The predicate reads the carry: batched inside the body, so the body selects per example.
  constexpr auto f = [](auto h, auto xs, auto w) {
    return tessel::scan([&](auto c, auto x) {
      const auto n = tessel::cond(tessel::sum(c) > 0.0f, [&](auto v) { return tessel::tanh(tessel::matmul(v, w)); },
                                  [](auto v) { return v * 0.5f + 0.25f; }, c + x);
      return std::tuple{n, tessel::sum(n)};
    }, h, xs);
  };
  EXPECT_TRUE((check_vmap<0, 0, none>(f, mixed_signs(), slices<XS>(60), slices<W>(61))));
  EXPECT_TRUE((check_vmap<none, 1, none>(f, slices<H>(62), slices<XS>(63), slices<W>(64))));
}

}  // namespace
