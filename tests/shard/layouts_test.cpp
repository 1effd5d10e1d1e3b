// The parallel layouts people use, written with shard_map and checked against the unsharded program:
// - Megatron tensor parallelism of an MLP (first weight split by columns, second by rows over "model"):
//   one all-reduce in the forward (the psum of the partial outputs) and one in the backward (the psum
//   tracing inserts for the replicated input's gradient), counted in the plan;
// - fully sharded data parallelism (parameters and optimizer state split over "data", all-gathered before
//   use and again in the backward; the all-gather's transpose reduce-scatters the gradients): the same
//   update as replicated data parallelism, with at most 0.6 of its memory per device at D = 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "reference.hpp"
#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

template <class T>
T random_tensor(std::uint32_t seed, float scale = 1) {
  return tessel::testing::random_tensor<typename T::value_type, typename T::shape_type>(seed, -scale, scale);
}

template <class A, class B>
void expect_close(const A& got, const B& want, const char* what, double rtol = 1e-6) {
  tessel::testing::expect_close_at_scale(got, want, what, rtol);
}

using tessel::testing::count_kernels;

// ---- Megatron MLP ------------------------------------------------------------------------------------

using TP = mesh<axis<"model", 4>>;
using X = tensor<float, shape<8, 16>>;
using W1 = tensor<float, shape<16, 32>>;
using W2 = tensor<float, shape<32, 16>>;

constexpr auto mlp = [](auto x, auto w1, auto w2) { return matmul(gelu(matmul(x, w1)), w2); };
constexpr auto mean_square = [](auto y) { return mean(y * y); };
constexpr auto mlp_loss = [](auto x, auto w1, auto w2) { return mean_square(mlp(x, w1, w2)); };

// Each device holds 8 columns of w1 and the matching 8 rows of w2: its partial output is summed.
constexpr auto tensor_parallel_loss = [](auto x, auto w1, auto w2) {
  return mean_square(psum<"model">(matmul(gelu(matmul(x, w1)), w2)));
};
using megatron_specs = specs<P<>, P<none, "model">, P<"model", none>>;
constexpr auto megatron_forward = shard_map<TP, megatron_specs, P<>>(tensor_parallel_loss);
constexpr auto megatron_step = shard_map<TP, megatron_specs, specs<P<>, P<>, P<none, "model">, P<"model", none>>>(
    [](auto x, auto w1, auto w2) {
      const auto [loss, g] = value_and_grad<0, 1, 2>(tensor_parallel_loss)(x, w1, w2);
      return std::tuple{loss, std::get<0>(g), std::get<1>(g), std::get<2>(g)};
    });

TEST(Layouts, MegatronMlpEqualsTheUnshardedProgram) {
  const auto x = random_tensor<X>(1);
  const auto w1 = random_tensor<W1>(2, 0.25f);
  const auto w2 = random_tensor<W2>(3, 0.2f);
  const auto [loss, gx, gw1, gw2] = megatron_step(x, w1, w2);
  const auto [want_loss, want] = jit([](auto a, auto b, auto c) { return value_and_grad<0, 1, 2>(mlp_loss)(a, b, c); })(x, w1, w2);
  expect_close(loss, want_loss, "loss");
  expect_close(gx, std::get<0>(want), "gradient of x");
  expect_close(gw1, std::get<1>(want), "gradient of w1");
  expect_close(gw2, std::get<2>(want), "gradient of w2");
}

TEST(Layouts, MegatronMlpHasOneAllReduceEachWay) {
  using forward = decltype(megatron_forward)::traced_for<X, W1, W2>;
  using step = decltype(megatron_step)::traced_for<X, W1, W2>;
  EXPECT_EQ(count_kernels<forward>("psum"), 1u) << "the forward";
  EXPECT_EQ(count_kernels<step>("psum"), 2u) << "the forward and the backward";
  for (const char* other : {"all_gather", "psum_scatter", "all_to_all", "ppermute"}) {
    EXPECT_EQ(count_kernels<step>(other), 0u) << other;
  }
}

// ---- fully sharded data parallelism -------------------------------------------------------------------

constexpr std::size_t D = 2;
using DP = mesh<axis<"data", D>>;
using V1 = tensor<float, shape<64, 128>>;
using V2 = tensor<float, shape<128, 128>>;
using V3 = tensor<float, shape<128, 16>>;
using Params = std::tuple<V1, V2, V3>;
using Batch = tensor<float, shape<32, 64>>;
using Target = tensor<float, shape<32, 16>>;
constexpr float learning_rate = 0.05f, momentum = 0.9f;

// Three layers of Layer (hidden: tanh, hidden, then linear) and a mean squared error.
template <class Layer>
constexpr auto net_loss = [](auto w1, auto w2, auto w3, auto x, auto y) {
  constexpr Layer layer{};
  return mean_square(layer.linear(layer.hidden(layer.hidden(x, w1), w2), w3) - y);
};
struct plain_layers {
  static constexpr auto hidden = [](auto h, auto w) { return tanh(matmul(h, w)); };
  static constexpr auto linear = [](auto h, auto w) { return matmul(h, w); };
};

// SGD with momentum on each leaf: the optimizer state is as large as the parameters.
constexpr auto sgd = [](auto w, auto m, auto g) {
  const auto next = m * momentum + g;
  return std::pair{w - next * learning_rate, next};
};

// One step on the leaves (w1, w2, w3, their momenta, the batch), the loss averaged over "data".
template <class Layer>
constexpr auto train_step = [](auto w1, auto w2, auto w3, auto m1, auto m2, auto m3, auto x, auto y) {
  const auto loss = [](auto q, auto a, auto b) { return pmean<"data">(net_loss<Layer>(std::get<0>(q), std::get<1>(q), std::get<2>(q), a, b)); };
  const auto [value, g] = value_and_grad(loss)(std::tuple{w1, w2, w3}, x, y);
  const auto [n1, v1] = sgd(w1, m1, std::get<0>(g));
  const auto [n2, v2] = sgd(w2, m2, std::get<1>(g));
  const auto [n3, v3] = sgd(w3, m3, std::get<2>(g));
  return std::tuple{n1, n2, n3, v1, v2, v3, value};
};

// Fully sharded layers gather their weight's rows from every device. As ZeRO-3 does, the whole weight is
// not kept from the forward for the backward: each layer is a checkpoint, which gathers it again when the
// backward reaches the layer, so about one whole weight is alive at a time.
struct gathering_layers {
  static constexpr auto hidden = checkpoint([](auto h, auto w) { return tanh(matmul(h, all_gather<DP, "data", 0, true>(w))); });
  static constexpr auto linear = checkpoint([](auto h, auto w) { return matmul(h, all_gather<DP, "data", 0, true>(w)); });
};

// Replicated: every device holds everything; the gradients come back summed (tracing's psum).
using rep = P<>;
using rows = P<"data">;
constexpr auto replicated_step =
    shard_map<DP, specs<rep, rep, rep, rep, rep, rep, rows, rows>, specs<rep, rep, rep, rep, rep, rep, rep>>(train_step<plain_layers>);
// Fully sharded: each device holds 1/D of the rows of every weight and of its momentum, gathers each weight
// where the forward needs it, and updates only its rows.
constexpr auto fsdp_step =
    shard_map<DP, specs<rows, rows, rows, rows, rows, rows, rows, rows>, specs<rows, rows, rows, rows, rows, rows, rep>>(train_step<gathering_layers>);

Params random_params() { return {random_tensor<V1>(11, 0.15f), random_tensor<V2>(12, 0.1f), random_tensor<V3>(13, 0.1f)}; }
Params random_state() { return {random_tensor<V1>(21, 0.01f), random_tensor<V2>(22, 0.01f), random_tensor<V3>(23, 0.01f)}; }

TEST(Layouts, FullyShardedDataParallelEqualsReplicated) {
  const Params p = random_params(), m = random_state();
  const auto x = random_tensor<Batch>(31);
  const auto y = random_tensor<Target>(32);
  const auto [p1, p2, p3, m1, m2, m3] = std::tuple_cat(p, m);
  const auto rep_out = replicated_step(p1, p2, p3, m1, m2, m3, x, y);
  const auto fsdp_out = fsdp_step(p1, p2, p3, m1, m2, m3, x, y);
  expect_close(std::get<6>(fsdp_out), std::get<6>(rep_out), "loss");
  expect_close(std::get<0>(fsdp_out), std::get<0>(rep_out), "w1");
  expect_close(std::get<1>(fsdp_out), std::get<1>(rep_out), "w2");
  expect_close(std::get<2>(fsdp_out), std::get<2>(rep_out), "w3");
  expect_close(std::get<4>(fsdp_out), std::get<4>(rep_out), "momentum of w2");
  // And both equal one device's step on the whole batch.
  const auto one = jit([](auto q, auto s, auto a, auto b) {
    const auto loss = [](auto r, auto c, auto d) { return net_loss<plain_layers>(std::get<0>(r), std::get<1>(r), std::get<2>(r), c, d); };
    const auto [value, g] = value_and_grad(loss)(q, a, b);
    return std::tuple{std::get<0>(sgd(std::get<1>(q), std::get<1>(s), std::get<1>(g))), value};
  })(p, m, x, y);
  expect_close(std::get<1>(fsdp_out), std::get<0>(one), "w2 against one device", 1e-5);
  expect_close(std::get<6>(fsdp_out), std::get<1>(one), "loss against one device", 1e-5);
}

// Per device: the arena's peak plus the parameters and results it holds (what dump reports).
template <class Plan>
std::size_t device_bytes() {
  return Plan::plan.arena_bytes + Plan::plan.parameter_bytes + Plan::plan.output_bytes;
}

TEST(Layouts, FullyShardedDataParallelHoldsLessThanSixTenthsPerDevice) {
  // The replicated layout as written, each result whole on every device, as a device of a mesh holds it
  // (on this host its update runs in blocks written in place: transform/update_sharding.hpp).
  using replicated = decltype(replicated_step)::traced_for<V1, V2, V3, V1, V2, V3, Batch, Target>::traced;
  using fully_sharded = decltype(fsdp_step)::traced_for<V1, V2, V3, V1, V2, V3, Batch, Target>;
  const double ratio = static_cast<double>(device_bytes<fully_sharded>()) / static_cast<double>(device_bytes<replicated>());
  EXPECT_LE(ratio, 0.6) << "fully sharded " << device_bytes<fully_sharded>() << " bytes per device, replicated " << device_bytes<replicated>()
                        << "\n" << dump(fsdp_step, V1{}, V2{}, V3{}, V1{}, V2{}, V3{}, Batch{}, Target{});
  std::printf("per-device bytes (arena peak + parameters + outputs): fully sharded %zu, replicated %zu: %.3f\n",
              device_bytes<fully_sharded>(), device_bytes<replicated>(), ratio);
  // The gradients are reduce-scattered (the all-gathers' transposes), never all-reduced; every weight is
  // gathered for the forward and again when the backward recomputes its layer.
  EXPECT_EQ(count_kernels<fully_sharded>("psum_scatter"), 3u);
  EXPECT_EQ(count_kernels<fully_sharded>("all_gather"), 6u);
  EXPECT_EQ(count_kernels<fully_sharded>("psum"), 1u) << "the loss's pmean only";
  const std::string text = dump(fsdp_step, V1{}, V2{}, V3{}, V1{}, V2{}, V3{}, Batch{}, Target{});
  EXPECT_NE(text.find("psum_scatter over {data}"), std::string::npos) << text;
}

}  // namespace
