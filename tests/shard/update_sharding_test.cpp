// Weight-update sharding of a shard_map body (transform/update_sharding.hpp): a replicated optimizer update
// of psummed gradients runs in blocks, one per device, written in place into the replicated results. The
// results must not change: bit for bit against the same step written with psum_scatter by hand, and to
// 1e-6 against one device on the whole batch; what cannot be blocked (a dimension the group does not
// divide, a result split over the summed axis) stays as traced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>

#include "reference.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

using W1 = tensor<float, shape<8, 16>>;
using B1 = tensor<float, shape<16>>;
using W2 = tensor<float, shape<16, 6>>;
using B2 = tensor<float, shape<6>>;  // 2 divides it, 4 does not
using Params = std::tuple<W1, B1, W2, B2>;
using Xs = tensor<float, shape<32, 8>>;
using Ys = tensor<float, shape<32, 6>>;
using optimizer = optim::adam<0.01>;
using State = optim::adam_state<Params>;

template <class T>
T random_tensor(unsigned seed, float scale = 1) {
  return tessel::testing::random_tensor<typename T::value_type, typename T::shape_type>(seed, -scale, scale);
}

constexpr auto local_loss = [](auto p, auto x, auto y) {
  const auto h = relu(matmul(x, std::get<0>(p)) + std::get<1>(p));
  return mean(nn::softmax_cross_entropy(matmul(h, std::get<2>(p)) + std::get<3>(p), y));
};

// The data-parallel step as the seeds write it: parameters and Adam state replicated, the loss pmean'ed.
template <spec_entry Data>
struct replicated_step {
  template <class Q, class S, class X, class Y>
  constexpr auto operator()(Q params, S state, X x, Y y) const {
    const auto loss = [](auto q, auto a, auto b) { return pmean<Data>(local_loss(q, a, b)); };
    const auto [value, g] = value_and_grad(loss)(params, x, y);
    const auto [updates, next] = optimizer{}.update(g, state);
    return std::tuple{optim::apply_updates(params, updates), next, value};
  }
};

// The same update written with psum_scatter by hand (ZeRO-1 over "data" on 2 devices): the local gradients
// (of the local loss over 2, pvary'd parameters), each device's block of their sum, its block of the update.
template <class M>
struct blocked_by_hand {
  template <class Q, class B, class S, class X, class Y>
  constexpr auto operator()(Q params, B blocks, S state, X x, Y y) const {
    const auto varying = std::apply([](auto... w) { return std::tuple{pvary<"data">(w)...}; }, params);
    const auto [value, g] = value_and_grad([](auto q, auto a, auto b) { return local_loss(q, a, b) * 0.5f; })(varying, x, y);
    const B g_blocks = std::apply([](auto... w) { return B{psum_scatter<M, "data", 0, true>(w)...}; }, g);
    const auto [updates, next] = optimizer{}.update(g_blocks, state);
    return std::tuple{optim::apply_updates(blocks, updates), next, psum<"data">(value)};
  }
};

using tessel::testing::count_kernels;

template <class A>
bool same_bits(const A& a, const A& b) {
  return std::memcmp(a.data(), b.data(), A::size * sizeof(typename A::value_type)) == 0;
}

template <class A>
double relative_error(const A& got, const A& want) {
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < A::size; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got.data()[i]) - want.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want.data()[i])));
  }
  return worst / scale;
}

struct inputs {
  Params p{random_tensor<W1>(1, 0.3f), random_tensor<B1>(2, 0.1f), random_tensor<W2>(3, 0.3f), random_tensor<B2>(4, 0.1f)};
  State s = optimizer{}.init(p);
  Xs x = random_tensor<Xs>(5);
  Ys y{};
  inputs() {
    for (std::size_t i = 0; i < 32; ++i) y.data()[i * 6 + i % 6] = 1;
  }
};

// Two steps on the mesh against two steps of one device on the whole batch.
template <class Step>
void expect_one_device(const Step& step, const char* mesh) {
  const inputs in;
  auto global = jit([](auto params, auto state, auto x, auto y) {
    const auto [value, g] = value_and_grad(local_loss)(params, x, y);
    const auto [updates, next] = optimizer{}.update(g, state);
    return std::tuple{optim::apply_updates(params, updates), next, value};
  });
  auto [p1, s1, l1] = step(in.p, in.s, in.x, in.y);
  std::tie(p1, s1, l1) = step(p1, s1, in.x, in.y);
  auto [p0, s0, l0] = global(in.p, in.s, in.x, in.y);
  std::tie(p0, s0, l0) = global(p0, s0, in.x, in.y);
  EXPECT_LE(relative_error(std::get<0>(p1), std::get<0>(p0)), 1e-6) << "w1 on " << mesh;
  EXPECT_LE(relative_error(std::get<1>(p1), std::get<1>(p0)), 1e-6) << "b1 on " << mesh;
  EXPECT_LE(relative_error(std::get<2>(p1), std::get<2>(p0)), 1e-6) << "w2 on " << mesh;
  EXPECT_LE(relative_error(std::get<3>(p1), std::get<3>(p0)), 1e-6) << "b2 on " << mesh;
  EXPECT_LE(relative_error(std::get<2>(std::get<1>(s1)), std::get<2>(std::get<1>(s0))), 1e-5) << "mu of w2 on " << mesh;
  EXPECT_LE(relative_error(std::get<0>(std::get<2>(s1)), std::get<0>(std::get<2>(s0))), 1e-5) << "nu of w1 on " << mesh;
  EXPECT_EQ(std::get<0>(s1)[0], 2);
  EXPECT_LE(relative_error(l1, l0), 1e-6) << "loss on " << mesh;
}

TEST(UpdateSharding, ReplicatedAdamUpdateRunsInBlocksBitForBitAsWrittenByHand) {
  using M = mesh<axis<"data", 2>>;
  const auto step = shard_map<M, specs<P<>, P<>, P<"data">, P<"data">>, specs<P<>, P<>, P<>>>(replicated_step<"data">{});
  using traced = decltype(step)::traced_for<Params, State, Xs, Ys>;
  // Each gradient is reduce-scattered, not all-reduced; only the loss is psummed.
  EXPECT_EQ(count_kernels<traced>("psum_scatter"), 4u);
  EXPECT_EQ(count_kernels<traced>("psum"), 1u);
  // As written, the body all-reduces the loss and the four gradients.
  EXPECT_EQ(count_kernels<traced::traced>("psum"), 5u);
  EXPECT_EQ(count_kernels<traced::traced>("psum_scatter"), 0u);

  using split_state = specs<P<>, P<"data">, P<"data">>;
  const auto by_hand =
      shard_map<M, specs<P<>, P<"data">, split_state, P<"data">, P<"data">>, specs<P<"data">, split_state, P<>>>(blocked_by_hand<M>{});
  const inputs in;
  auto [p1, s1, l1] = step(in.p, in.s, in.x, in.y);
  auto [p2, s2, l2] = by_hand(in.p, in.p, in.s, in.x, in.y);
  std::tie(p1, s1, l1) = step(p1, s1, in.x, in.y);
  std::tie(p2, s2, l2) = by_hand(p2, p2, s2, in.x, in.y);
  EXPECT_TRUE(same_bits(std::get<0>(p1), std::get<0>(p2)));
  EXPECT_TRUE(same_bits(std::get<1>(p1), std::get<1>(p2)));
  EXPECT_TRUE(same_bits(std::get<2>(p1), std::get<2>(p2)));
  EXPECT_TRUE(same_bits(std::get<3>(p1), std::get<3>(p2)));
  EXPECT_TRUE(same_bits(std::get<0>(std::get<1>(s1)), std::get<0>(std::get<1>(s2))));
  EXPECT_TRUE(same_bits(std::get<3>(std::get<2>(s1)), std::get<3>(std::get<2>(s2))));
  EXPECT_TRUE(same_bits(l1, l2));
  expect_one_device(step, "2 devices");
}

TEST(UpdateSharding, AnIndivisibleLeafKeepsItsAllReduce) {
  using M = mesh<axis<"data", 4>>;
  const auto step = shard_map<M, specs<P<>, P<>, P<"data">, P<"data">>, specs<P<>, P<>, P<>>>(replicated_step<"data">{});
  using traced = decltype(step)::traced_for<Params, State, Xs, Ys>;
  EXPECT_EQ(count_kernels<traced>("psum_scatter"), 3u) << "w1, b1, w2";
  EXPECT_EQ(count_kernels<traced>("psum"), 2u) << "b2 (f32[6] on 4 devices) and the loss";
  expect_one_device(step, "4 devices");
}

// On a 2 x 2 mesh the batch is split over "data" only: the sums are over "data", and along "model" the
// devices compute the same blocks (device (d, 0) writes its block; (d, 1) keeps its own).
TEST(UpdateSharding, BlocksFollowTheSummedAxisOnTwoAxisMeshes) {
  using M = mesh<axis<"data", 2>, axis<"model", 2>>;
  const auto step = shard_map<M, specs<P<>, P<>, P<"data">, P<"data">>, specs<P<>, P<>, P<>>>(replicated_step<"data">{});
  using traced = decltype(step)::traced_for<Params, State, Xs, Ys>;
  EXPECT_EQ(count_kernels<traced>("psum_scatter"), 4u);
  expect_one_device(step, "a 2 x 2 mesh");
  // Over both axes (the batch split four ways): blocks of a quarter, in mesh order.
  const auto both = shard_map<M, specs<P<>, P<>, P<mesh_axes<"data", "model">>, P<mesh_axes<"data", "model">>>, specs<P<>, P<>, P<>>>(
      replicated_step<mesh_axes<"data", "model">>{});
  using traced_both = decltype(both)::traced_for<Params, State, Xs, Ys>;
  EXPECT_EQ(count_kernels<traced_both>("psum_scatter"), 3u) << "b2 (f32[6]) is not divided by 4";
  expect_one_device(both, "a 2 x 2 mesh, both axes");
}

// A result the out_specs split over the summed axis is not replicated: the body runs as written.
TEST(UpdateSharding, ResultsSplitOverTheSumAreLeftAsWritten) {
  using M = mesh<axis<"data", 2>>;
  const auto step = shard_map<M, specs<P<>, P<"data">>, P<"data">>([](auto w, auto x) { return psum<"data">(matmul(x, w)) * 2.0f; });
  using traced = decltype(step)::traced_for<W1, Xs>;
  EXPECT_EQ(count_kernels<traced>("psum"), 1u);
  EXPECT_EQ(count_kernels<traced>("psum_scatter"), 0u);
}

}  // namespace
