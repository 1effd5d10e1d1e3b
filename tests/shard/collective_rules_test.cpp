// Every collective's transpose (VJP), JVP and batching rule, through shard_map on a mesh of 4 devices:
// the gradient of loss(x) = psum(sum(C(x) * w)) against central finite differences of the same sharded
// loss (C is linear, so the differences are exact up to f32 rounding), the JVP against the gradient, and
// vmap(C) inside the shard_map against C applied to each slice. pmax and pmin have no derivative (a
// fail-test checks the message); axis_index has no operand to differentiate or batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

using M = mesh<axis<"i", 4>>;

template <class S>
tensor<float, S> random_tensor(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  tensor<float, S> t(uninitialized);
  for (std::size_t i = 0; i < S::size; ++i) t.data()[i] = u(rng);
  return t;
}

std::set<std::string>& checked() {
  static std::set<std::string> names;
  return names;
}

// Filled before main runs, by every check_rules<C> the binary holds (whichever tests a run selects).
template <class C>
inline const bool registered = checked().insert(C::name).second || true;

// C on a device's block of x f32[16, 4] (block [4, 4]), and the global shape of w, C's result under P<"i">.
template <class C, class W>
void check_rules(C, W) {
  (void)registered<C>;
  const char* name = C::name;
  using X = tensor<float, shape<16, 4>>;
  const X x = random_tensor<shape<16, 4>>(1);
  const W w = random_tensor<typename W::shape_type>(2);
  static constexpr auto loss = [](auto b, auto wl) { return psum<"i">(sum(C{}(b) * wl)); };

  const auto value = shard_map<M, specs<P<"i">, P<"i">>, P<>>(loss);
  const auto gradient = shard_map<M, specs<P<"i">, P<"i">>, P<"i">>([](auto b, auto wl) { return grad<0>(loss)(b, wl); })(x, w);
  for (std::size_t k = 0; k < X::size; ++k) {
    X up = x, down = x;
    up.data()[k] += 0.5f;
    down.data()[k] -= 0.5f;
    const float fd = (value(up, w)[0] - value(down, w)[0]) / 1.0f;
    ASSERT_NEAR(gradient.data()[k], fd, 1e-4f * (1 + std::abs(fd))) << name << ": VJP element " << k;
  }

  const X v = random_tensor<shape<16, 4>>(3);
  const auto tangent = shard_map<M, specs<P<"i">, P<"i">, P<"i">>, P<>>([](auto b, auto t, auto wl) {
    return std::get<1>(jvp([](auto bb, auto ww) { return psum<"i">(sum(C{}(bb) * ww)); }, std::make_tuple(b, wl), std::make_tuple(t, wl * 0.0f)));
  })(x, v, w);
  double dot = 0;
  for (std::size_t k = 0; k < X::size; ++k) dot += static_cast<double>(gradient.data()[k]) * v.data()[k];
  EXPECT_NEAR(tangent[0], dot, 1e-4 * (1 + std::abs(dot))) << name << ": JVP against VJP";

  // vmap(C) over a batch of 3 inside the shard_map equals C on each slice.
  using XB = tensor<float, shape<3, 16, 4>>;
  const XB xb = random_tensor<shape<3, 16, 4>>(4);
  const auto batched = shard_map<M, specs<P<none, "i">>, P<none, "i">>([](auto b) { return vmap(C{})(b); })(xb);
  auto single = shard_map<M, specs<P<"i">>, P<"i">>(C{});
  for (std::size_t s = 0; s < 3; ++s) {
    X slice(uninitialized);
    std::copy_n(xb.data() + s * 64, 64, slice.data());
    const auto one = single(slice);
    for (std::size_t k = 0; k < one.size; ++k)
      ASSERT_EQ(batched.data()[s * one.size + k], one.data()[k]) << name << ": batching, slice " << s << " element " << k;
  }
}

struct psum_c {
  static constexpr const char* name = "psum";
  constexpr auto operator()(auto b) const { return psum<"i">(b); }
};
// pvary of an invariant value (its transpose sums the cotangent back)
struct pvary_c {
  static constexpr const char* name = "pvary";
  constexpr auto operator()(auto b) const { return pvary<"i">(psum<"i">(b) * 0.5f) + b; }
};
struct all_gather_tiled {
  static constexpr const char* name = "all_gather";
  constexpr auto operator()(auto b) const { return all_gather<M, "i", 1, true>(b); }
};
struct all_gather_stacked {
  static constexpr const char* name = "all_gather";
  constexpr auto operator()(auto b) const { return all_gather<M, "i">(b); }
};
struct psum_scatter_tiled {
  static constexpr const char* name = "psum_scatter";
  constexpr auto operator()(auto b) const { return psum_scatter<M, "i", 0, true>(b); }
};
struct psum_scatter_untiled {
  static constexpr const char* name = "psum_scatter";
  constexpr auto operator()(auto b) const { return psum_scatter<M, "i", 1>(b); }
};
struct ppermute_c {
  static constexpr const char* name = "ppermute";
  constexpr auto operator()(auto b) const { return ppermute<"i", edge{0, 2}, edge{2, 1}, edge{1, 0}>(b); }
};
struct all_to_all_tiled {
  static constexpr const char* name = "all_to_all";
  constexpr auto operator()(auto b) const { return all_to_all<M, "i", 1, 0, true>(b); }
};
struct all_to_all_untiled {
  static constexpr const char* name = "all_to_all";
  constexpr auto operator()(auto b) const { return all_to_all<M, "i", 0, 1>(b); }
};

TEST(CollectiveRules, Psum) { check_rules(psum_c{}, tensor<float, shape<16, 4>>{}); }
TEST(CollectiveRules, Pvary) { check_rules(pvary_c{}, tensor<float, shape<16, 4>>{}); }
TEST(CollectiveRules, AllGatherTiled) { check_rules(all_gather_tiled{}, tensor<float, shape<16, 16>>{}); }
TEST(CollectiveRules, AllGatherStacked) { check_rules(all_gather_stacked{}, tensor<float, shape<16, 4, 4>>{}); }
TEST(CollectiveRules, PsumScatterTiled) { check_rules(psum_scatter_tiled{}, tensor<float, shape<4, 4>>{}); }
TEST(CollectiveRules, PsumScatterUntiled) { check_rules(psum_scatter_untiled{}, tensor<float, shape<16>>{}); }
TEST(CollectiveRules, Ppermute) { check_rules(ppermute_c{}, tensor<float, shape<16, 4>>{}); }
TEST(CollectiveRules, AllToAllTiled) { check_rules(all_to_all_tiled{}, tensor<float, shape<64, 1>>{}); }
TEST(CollectiveRules, AllToAllUntiled) { check_rules(all_to_all_untiled{}, tensor<float, shape<16, 4>>{}); }

// The collectives' table: every primitive that runs over mesh axes is checked above or has no derivative.
TEST(CollectiveRules, EveryCollectiveIsChecked) {
  const std::set<std::string> not_differentiable{"pmax", "pmin", "axis_index"};
  for (const ir::primitive* p : all_primitives) {
    if (p->varying == nullptr || p->kind == ir::prim_kind::control) continue;
    const std::string name(p->name);
    if (not_differentiable.contains(name)) {
      EXPECT_EQ(p->vjp, nullptr) << name;
      continue;
    }
    EXPECT_TRUE(checked().contains(name)) << "collective " << name << " has no rules check in tests/shard/collective_rules_test.cpp";
  }
}

}  // namespace
