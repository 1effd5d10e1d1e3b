// jit with shardings: the partitioner lays out every value of a global program on the mesh and inserts the
// collectives (transform/partition.hpp). Each result is checked against the same program run on one
// device, and the collectives it needed are counted in the plan (SHARDING.md §3.4: data parallel, Megatron,
// FSDP), with the test vectors T17 and T18 of SHARDING.md §2.3.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "reference.hpp"
#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

template <class T>
T random_tensor(unsigned seed, float scale = 1) {
  return tessel::testing::random_tensor<typename T::value_type, typename T::shape_type>(seed, -scale, scale);
}

template <class T>
void expect_close(const T& got, const T& want, double rtol = 1e-6) {
  tessel::testing::expect_close_at_scale(got, want, "result", rtol);
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// ---- Megatron's MLP: column-parallel then row-parallel (T17, T18) ------------------------------------

using Model = mesh<axis<"model", 2>>;
constexpr auto mlp = [](auto x, auto w1, auto w2) { return matmul(relu(matmul(x, w1)), w2); };
const tensor<float, shape<2, 2>> t17_x{1, 2, 3, 4};
const tensor<float, shape<2, 4>> t17_w1{1, 0, -1, 2, 0, 1, 1, 1};
const tensor<float, shape<4, 2>> t17_w2{1, 0, 0, 1, 1, 1, 2, -1};

TEST(Partition, MegatronForwardIsOneAllReduce) {
  auto f = jit<Model>(mlp, in_shardings<P<>, P<none, "model">, P<"model">>, out_shardings<P<>>);
  const auto y = f(t17_x, t17_w1, t17_w2);
  const float want[] = {10, -1, 24, -5};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(y[i], want[i]) << i;
  const std::string text = dump(f, t17_x, t17_w1, t17_w2);
  EXPECT_NE(text.find("1 collectives"), std::string::npos) << text;
  EXPECT_NE(text.find("psum over {model} (2 devices): 16 bytes"), std::string::npos) << text;
  // Column-parallel: each device multiplies by its half of w1's columns, [2,2] of [2,4].
  EXPECT_NE(text.find("reads: param0:f32[2,2] param1:f32[2,2]"), std::string::npos) << text;
}

TEST(Partition, MegatronBackwardIsOneAllReduce) {
  auto f = jit<Model>(
      [](auto x, auto w1, auto w2) {
        const auto [loss, g] = value_and_grad<0, 1, 2>([](auto a, auto b, auto c) { return sum(mlp(a, b, c)); })(x, w1, w2);
        return std::tuple(loss, std::get<0>(g), std::get<1>(g), std::get<2>(g));
      },
      in_shardings<P<>, P<none, "model">, P<"model">>, out_shardings<P<>, P<>, P<none, "model">, P<"model">>);
  const auto [loss, dx, dw1, dw2] = f(t17_x, t17_w1, t17_w2);
  EXPECT_EQ(loss[0], 28.0f);  // 10 - 1 + 24 - 5
  const float want_dx[] = {1, 4, 1, 4};
  const float want_dw1[] = {4, 4, 8, 4, 6, 6, 12, 6};
  const float want_dw2[] = {4, 4, 6, 6, 2, 2, 14, 14};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(dx[i], want_dx[i]) << i;
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(dw1[i], want_dw1[i]) << i;
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(dw2[i], want_dw2[i]) << i;
  // One all-reduce forward (the loss, which sums y: the sum stays pending through it, 4 bytes instead of
  // y's 16) and one backward (dx, the column layer's input gradient: Megatron's f); dw1, dw2 stay split.
  const std::string text = dump(f, t17_x, t17_w1, t17_w2);
  EXPECT_NE(text.find("2 collectives"), std::string::npos) << text;
  EXPECT_NE(text.find("psum over {model} (2 devices): 4 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("psum over {model} (2 devices): 16 bytes"), std::string::npos) << text;
}

// Megatron's attention on a 2x2 mesh: the batch over "data", the heads over "model" (q, k, v projections
// split by columns, the output projection by rows). The head split follows the reshape and transposes; one
// all-reduce over "model" at the end, nothing over "data".
constexpr auto attention = [](auto x, auto wq, auto wk, auto wv, auto wo) {
  auto heads = [](auto y) { return transpose<0, 2, 1, 3>(reshape<shape<4, 8, 4, 4>>(y)); };  // [B,T,H*Dh] -> [B,H,T,Dh]
  const auto q = heads(matmul(x, wq)), k = heads(matmul(x, wk)), v = heads(matmul(x, wv));
  const auto s = softmax(dot_general<axes<3>, axes<3>, axes<0, 1>, axes<0, 1>>(q, k) * 0.5f);  // [B,H,T,T]
  const auto o = dot_general<axes<3>, axes<2>, axes<0, 1>, axes<0, 1>>(s, v);                 // [B,H,T,Dh]
  return matmul(reshape<shape<4, 8, 16>>(transpose<0, 2, 1, 3>(o)), wo);
};

TEST(Partition, TensorParallelAttentionSplitsHeads) {
  using M = mesh<axis<"data", 2>, axis<"model", 2>>;
  using Seq = tensor<float, shape<4, 8, 16>>;
  using Wd = tensor<float, shape<16, 16>>;
  const Seq x = random_tensor<Seq>(30);
  const Wd wq = random_tensor<Wd>(31, 0.3f), wk = random_tensor<Wd>(32, 0.3f), wv = random_tensor<Wd>(33, 0.3f), wo = random_tensor<Wd>(34, 0.3f);
  auto f = jit<M>(attention, in_shardings<P<"data">, P<none, "model">, P<none, "model">, P<none, "model">, P<"model">>, out_shardings<P<"data">>);
  expect_close(f(x, wq, wk, wv, wo), jit(attention)(x, wq, wk, wv, wo), 1e-5);
  const std::string text = dump(f, x, wq, wk, wv, wo);
  EXPECT_NE(text.find("1 collectives"), std::string::npos) << text;
  EXPECT_EQ(count_of(text, "psum over {model}"), 1u) << text;
  // Each device holds 2 of the 4 sequences and 2 of the 4 heads: scores f32[2,2,8,8].
  EXPECT_NE(text.find("f32[2,2,8,8]"), std::string::npos) << text;
}

// ---- data parallel: the batch split, the parameters whole ----------------------------------------------

using W = tensor<float, shape<6, 3>>;
using B = tensor<float, shape<3>>;
using X = tensor<float, shape<16, 6>>;
using Y = tensor<float, shape<16, 3>>;
constexpr auto regression = [](auto w, auto b, auto x, auto y) {
  const auto e = tanh(matmul(x, w) + b) - y;
  return mean(e * e);
};
constexpr auto regression_step = [](auto w, auto b, auto x, auto y) {
  const auto [loss, g] = value_and_grad<0, 1>(regression)(w, b, x, y);
  return std::tuple(loss, std::get<0>(g), std::get<1>(g));
};

// The regression step partitioned as f says equals it on one device, on the same global arguments; the
// partitioned plan's text is returned for counting its collectives.
template <class F>
std::string expect_step_equals_one_device(F f, unsigned seed) {
  const W w = random_tensor<W>(seed, 0.5f);
  const B b = random_tensor<B>(seed + 1);
  const X x = random_tensor<X>(seed + 2);
  const Y y = random_tensor<Y>(seed + 3);
  const auto [loss, dw, db] = f(w, b, x, y);
  const auto [loss1, dw1, db1] = jit(regression_step)(w, b, x, y);
  expect_close(loss, loss1);
  expect_close(dw, dw1);
  expect_close(db, db1);
  return dump(f, w, b, x, y);
}

template <std::size_t D>
void check_data_parallel() {
  const std::string text = expect_step_equals_one_device(
      jit<mesh<axis<"data", D>>>(regression_step, in_shardings<P<>, P<>, P<"data">, P<"data">>, out_shardings<P<>>), 1);
  // The loss's sum and each parameter's gradient are added up over the devices once: three all-reduces,
  // no gather (the forward needs no communication: case 1).
  EXPECT_NE(text.find("3 collectives"), std::string::npos) << text;
  EXPECT_EQ(count_of(text, "psum over {data}"), 3u) << text;
}
TEST(Partition, DataParallelEqualsOneDeviceOn2Devices) { check_data_parallel<2>(); }
TEST(Partition, DataParallelEqualsOneDeviceOn4Devices) { check_data_parallel<4>(); }

// ---- fully sharded data parallel: parameters split too ---------------------------------------------------

TEST(Partition, FullyShardedGathersWeightsAndScattersGradients) {
  // w's rows split over "data" (the contracting dimension: gathered before use, case 2); its gradient,
  // summed over the batch, comes back split the same way: a reduce-scatter, not an all-reduce.
  const std::string text = expect_step_equals_one_device(
      jit<mesh<axis<"data", 2>>>(regression_step, in_shardings<P<"data">, P<>, P<"data">, P<"data">>, out_shardings<P<>, P<"data">, P<>>), 5);
  EXPECT_EQ(count_of(text, "all_gather over {data}"), 1u) << text;
  EXPECT_EQ(count_of(text, "psum_scatter over {data}"), 1u) << text;
  EXPECT_EQ(count_of(text, "psum over {data}"), 2u) << text;  // the loss and db
}

TEST(Partition, FullyShardedTwoLayersRegatherWeightsForTheBackward) {
  using M = mesh<axis<"data", 2>>;
  using W1 = tensor<float, shape<8, 16>>;
  using W2 = tensor<float, shape<16, 4>>;
  using X2 = tensor<float, shape<16, 8>>;
  using Y2 = tensor<float, shape<16, 4>>;
  const W1 w1 = random_tensor<W1>(13, 0.4f);
  const W2 w2 = random_tensor<W2>(14, 0.3f);
  const X2 x = random_tensor<X2>(15);
  const Y2 y = random_tensor<Y2>(16);
  constexpr auto step = [](auto a, auto b, auto xs, auto ys) {
    const auto [loss, g] = value_and_grad<0, 1>([](auto p, auto q, auto u, auto v) {
      const auto e = matmul(tanh(matmul(u, p)), q) - v;
      return mean(e * e);
    })(a, b, xs, ys);
    return std::tuple(loss, std::get<0>(g), std::get<1>(g));
  };
  // The hidden layer's gradient needs dy . w2^T with dy split by rows (the batch) and w2 split by rows
  // (storage): both split over "data" in kept dimensions; w2, an argument, is gathered (the forward's
  // gather again: one all_gather per weight in the plan).
  auto f = jit<M>(step, in_shardings<P<"data">, P<"data">, P<"data">, P<"data">>, out_shardings<P<>, P<"data">, P<"data">>);
  const auto [loss, g1, g2] = f(w1, w2, x, y);
  const auto [loss1, g11, g21] = jit(step)(w1, w2, x, y);
  expect_close(loss, loss1);
  expect_close(g1, g11, 1e-5);
  expect_close(g2, g21, 1e-5);
  const std::string text = dump(f, w1, w2, x, y);
  EXPECT_EQ(count_of(text, "all_gather over {data}"), 2u) << text;
  EXPECT_EQ(count_of(text, "psum_scatter over {data}"), 2u) << text;
  EXPECT_EQ(count_of(text, "psum over {data}"), 1u) << text;  // the loss
  // Each device holds half of each weight: (64 + 32) floats of the parameters, not 192.
  EXPECT_NE(text.find("reads: param0:f32[4,16]"), std::string::npos) << text;
}

// ---- trees: a parameter struct, one PartitionSpec for all its leaves ---------------------------------

template <template <class, class> class T = tensor>
struct net {
  BOOST_HANA_DEFINE_STRUCT(net, (T<float, shape<16, 32>>, w1), (T<float, shape<32>>, b1), (T<float, shape<32, 8>>, w2));
};
using Xn = tensor<float, shape<32, 16>>;
using Yn = tensor<float, shape<32, 8>>;

constexpr auto sgd_step = [](auto params, auto x, auto y) {
  const auto [loss, g] = value_and_grad([](auto q, auto u, auto v) {
    const auto e = matmul(tanh(matmul(u, q.w1) + q.b1), q.w2) - v;
    return mean(e * e);
  })(params, x, y);
  return std::tuple(loss, tree::map([](auto w, auto dw) { return w - dw * 0.1f; }, params, g));
};

template <class Spec>
void check_sgd_step() {
  using M = mesh<axis<"data", 4>>;
  const net<> p{random_tensor<tensor<float, shape<16, 32>>>(17, 0.3f), random_tensor<tensor<float, shape<32>>>(18, 0.3f),
                random_tensor<tensor<float, shape<32, 8>>>(19, 0.3f)};
  const Xn x = random_tensor<Xn>(20);
  const Yn y = random_tensor<Yn>(21);
  auto f = jit<M>(sgd_step, in_shardings<Spec, P<"data">, P<"data">>, out_shardings<P<>, Spec>);
  const auto [loss, next] = f(p, x, y);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(next)>, net<>>, "the struct comes back as the struct");
  const auto [loss1, next1] = jit(sgd_step)(p, x, y);
  expect_close(loss, loss1);
  expect_close(next.w1, next1.w1);
  expect_close(next.b1, next1.b1);
  expect_close(next.w2, next1.w2);
}
// Data parallel: the struct whole on every device, its gradient all-reduced leaf by leaf.
TEST(Partition, ParameterStructDataParallelStepEqualsOneDevice) {
  check_sgd_step<P<>>();
  // One out_sharding for the whole (loss, struct) tuple: the struct still comes back as the struct.
  auto f = jit<mesh<axis<"data", 4>>>(sgd_step, in_shardings<P<>, P<"data">, P<"data">>, out_shardings<P<>>);
  using R = decltype(f(std::declval<const net<>&>(), std::declval<const Xn&>(), std::declval<const Yn&>()));
  static_assert(std::is_same_v<std::tuple_element_t<1, R>, net<>>, "a struct inside a tuple result comes back as the struct");
}
// Fully sharded: every leaf split by rows, gathered where used, its gradient reduce-scattered.
TEST(Partition, ParameterStructFullyShardedStepEqualsOneDevice) { check_sgd_step<P<"data">>(); }

// A momentum step whose optimizer state is (step count, momentum struct): a spec tree keeps the count whole
// and splits the momentum by rows (ZeRO: each device updates and keeps its share of the state).
TEST(Partition, SpecTreeShardsTheOptimizerStateOnly) {
  using M = mesh<axis<"data", 2>>;
  using Count = tensor<float, shape<>>;
  const net<> p{random_tensor<tensor<float, shape<16, 32>>>(22, 0.3f), random_tensor<tensor<float, shape<32>>>(23, 0.3f),
                random_tensor<tensor<float, shape<32, 8>>>(24, 0.3f)};
  const net<> m0{random_tensor<tensor<float, shape<16, 32>>>(25, 0.1f), random_tensor<tensor<float, shape<32>>>(26, 0.1f),
                 random_tensor<tensor<float, shape<32, 8>>>(27, 0.1f)};
  const std::tuple<Count, net<>> state{Count{3.0f}, m0};
  const Xn x = random_tensor<Xn>(28);
  const Yn y = random_tensor<Yn>(29);
  constexpr auto step = [](auto params, auto s, auto u, auto v) {
    const auto g = grad([](auto q, auto a, auto b) {
      const auto e = matmul(tanh(matmul(a, q.w1) + q.b1), q.w2) - b;
      return mean(e * e);
    })(params, u, v);
    const auto momentum = tree::map([](auto m, auto d) { return m * 0.9f + d; }, std::get<1>(s), g);
    return std::tuple(tree::map([](auto w, auto m) { return w - m * 0.1f; }, params, momentum), std::tuple(std::get<0>(s) + 1.0f, momentum));
  };
  using state_spec = specs<P<>, P<"data">>;  // the same spec tree for the state in and out
  auto f = jit<M>(step, in_shardings<P<>, state_spec, P<"data">, P<"data">>, out_shardings<P<>, state_spec>);
  const auto [next, next_state] = f(p, state, x, y);
  const auto [next1, next_state1] = jit(step)(p, state, x, y);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(next_state)>, std::tuple<Count, net<>>>);
  const auto& [count, momentum] = next_state;
  const auto& momentum1 = std::get<1>(next_state1);
  EXPECT_EQ(count[0], 4.0f);
  expect_close(next.w1, next1.w1, 1e-5);
  expect_close(next.b1, next1.b1, 1e-5);
  expect_close(next.w2, next1.w2, 1e-5);
  expect_close(momentum.w1, momentum1.w1, 1e-5);
  expect_close(momentum.w2, momentum1.w2, 1e-5);
  // Each gradient is reduce-scattered into the momentum's split (not all-reduced), and each new parameter
  // gathered back whole: three of each, and no all-reduce but the count's none.
  const std::string text = dump(f, p, state, x, y);
  EXPECT_EQ(count_of(text, "psum_scatter over {data}"), 3u) << text;
  EXPECT_EQ(count_of(text, "all_gather over {data}"), 3u) << text;
  EXPECT_EQ(count_of(text, "psum over {data}"), 0u) << text;
}

// A spec tree for a struct, one entry per member: on 4 devices a model whose output bias (f32[6]) does not
// divide by 4 keeps that bias whole and splits the rest (the Fashion-MNIST MLP's b3 is f32[10]), in the
// parameters and, nested in the state's spec tree, in the momentum. The learning rate is a float.
template <template <class, class> class T = tensor>
struct net6 {
  BOOST_HANA_DEFINE_STRUCT(net6, (T<float, shape<16, 32>>, w1), (T<float, shape<32>>, b1), (T<float, shape<32, 6>>, w2),
                           (T<float, shape<6>>, b2));
};
TEST(Partition, StructMembersTakeTheirOwnSpecs) {
  using M = mesh<axis<"data", 4>>;
  using Count = tensor<float, shape<>>;
  using Y6 = tensor<float, shape<32, 6>>;
  const net6<> p{random_tensor<tensor<float, shape<16, 32>>>(40, 0.3f), random_tensor<tensor<float, shape<32>>>(41, 0.3f),
                 random_tensor<tensor<float, shape<32, 6>>>(42, 0.3f), random_tensor<tensor<float, shape<6>>>(43, 0.3f)};
  const net6<> m0 = tree::map([](auto w) { return w * 0.5f; }, p);
  const std::tuple<Count, net6<>> state{Count{3.0f}, m0};
  const Xn x = random_tensor<Xn>(44);
  const Y6 y = random_tensor<Y6>(45);
  constexpr auto step = [](auto params, auto s, auto u, auto v, auto lr) {
    const auto [loss, g] = value_and_grad([](auto q, auto a, auto b) {
      const auto e = matmul(tanh(matmul(a, q.w1) + q.b1), q.w2) + q.b2 - b;
      return mean(e * e);
    })(params, u, v);
    const auto momentum = tree::map([](auto m, auto d) { return m * 0.9f + d; }, std::get<1>(s), g);
    return std::tuple(tree::map([&](auto w, auto m) { return w - m * lr; }, params, momentum), std::tuple(std::get<0>(s) + 1.0f, momentum), loss);
  };
  using members = specs<P<"data">, P<"data">, P<"data">, P<>>;  // w1, b1, w2 split by rows; b2 whole
  using state_spec = specs<P<>, members>;
  auto f = jit<M>(step, in_shardings<members, state_spec, P<"data">, P<"data">, P<>>, out_shardings<members, state_spec, P<>>);
  const auto [next, next_state, loss] = f(p, state, x, y, 0.1f);
  const auto [next1, next_state1, loss1] = jit(step)(p, state, x, y, 0.1f);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(next)>, net6<>>, "the struct comes back as the struct");
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(next_state)>, std::tuple<Count, net6<>>>);
  expect_close(loss, loss1);
  EXPECT_EQ(std::get<0>(next_state)[0], 4.0f);
  expect_close(next.w1, next1.w1, 1e-5);
  expect_close(next.b1, next1.b1, 1e-5);
  expect_close(next.w2, next1.w2, 1e-5);
  expect_close(next.b2, next1.b2, 1e-5);
  expect_close(std::get<1>(next_state).w2, std::get<1>(next_state1).w2, 1e-5);
  expect_close(std::get<1>(next_state).b2, std::get<1>(next_state1).b2, 1e-5);
  // The three split members: gathered once each, their gradients reduce-scattered; b2's gradient and the
  // loss all-reduced (b2 is whole on every device).
  const std::string text = dump(f, p, state, x, y, 0.1f);
  EXPECT_EQ(count_of(text, "all_gather over {data}"), 3u) << text;
  EXPECT_EQ(count_of(text, "psum_scatter over {data}"), 3u) << text;
  EXPECT_EQ(count_of(text, "psum over {data}"), 2u) << text;
  EXPECT_NE(text.find("psum over {data} (4 devices): 24 bytes"), std::string::npos) << text;  // b2's gradient, f32[6]
}

// ---- layouts of elementwise operations, reductions and results ----------------------------------------

TEST(Partition, WholeOperandTakesItsBlockAndResultsAreRelaidOut) {
  using M = mesh<axis<"data", 4>>;
  using V = tensor<float, shape<8, 2>>;
  const V a = random_tensor<V>(9), c = random_tensor<V>(10);
  // a split by rows, c whole: each device takes c's rows of its block (no communication); the product is
  // returned split (as computed) and whole (gathered).
  auto f = jit<M>([](auto p, auto q) { return std::tuple(p * q, exp(p * q)); }, in_shardings<P<"data">, P<>>,
                  out_shardings<P<"data">, P<>>);
  const auto [prod, whole] = f(a, c);
  const auto [prod1, whole1] = jit([](auto p, auto q) { return std::tuple(p * q, exp(p * q)); })(a, c);
  expect_close(prod, prod1);
  expect_close(whole, whole1);
  const std::string text = dump(f, a, c);
  EXPECT_EQ(count_of(text, "all_gather over {data}"), 1u) << text;
  EXPECT_NE(text.find("1 collectives"), std::string::npos) << text;
}

TEST(Partition, ReductionsOverASplitDimension) {
  using M = mesh<axis<"data", 2>, axis<"model", 2>>;
  using V = tensor<float, shape<4, 6>>;
  const V a = random_tensor<V>(11);
  // Rows over "data", columns over "model". The column sums are pending over "data" and end split over it
  // (reduce-scatter); the row maxima are a local max and a pmax over "model".
  auto g = [](auto p) { return std::tuple(reduce_sum<0>(p), reduce_max<1>(p)); };
  auto f = jit<M>(g, in_shardings<P<"data", "model">>, out_shardings<P<"data">, P<"data">>);
  const auto [sums, maxima] = f(a);
  const auto [sums1, maxima1] = jit(g)(a);
  expect_close(sums, sums1);
  expect_close(maxima, maxima1, 0);
  const std::string text = dump(f, a);
  EXPECT_EQ(count_of(text, "pmax over {model}"), 1u) << text;
  EXPECT_EQ(count_of(text, "all_gather over {model}"), 1u) << text;  // the sums' columns, split over model, made whole
}

// argmax over a whole dimension runs on each device's rows; over a split one, on the gathered array. An iota
// along a whole dimension (a one-hot's class index) is made at the block's shape, not cut out of the whole.
TEST(Partition, ArgmaxAndIotaKeepTheRowsSplit) {
  using M = mesh<axis<"data", 2>>;
  using V = tensor<float, shape<8, 5>>;
  const V a = random_tensor<V>(35);
  auto g = [](auto p) { return std::tuple(argmax<1>(p), argmax<0>(p), broadcasted_iota<float, shape<8, 5>, 1>(p) * p); };
  auto f = jit<M>(g, in_shardings<P<"data">>, out_shardings<P<"data">, P<>, P<"data">>);
  const auto [rows, columns, scaled] = f(a);
  const auto [rows1, columns1, scaled1] = jit(g)(a);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(rows[i], rows1[i]);
  for (std::size_t j = 0; j < 5; ++j) EXPECT_EQ(columns[j], columns1[j]);
  expect_close(scaled, scaled1, 0);
  const std::string text = dump(f, a);
  EXPECT_EQ(count_of(text, "all_gather over {data}"), 1u) << text;  // argmax<0>'s operand only
  EXPECT_EQ(count_of(text, "take"), 0u) << text;
}

TEST(Partition, ReshapeAndTransposeCarryTheirSplits) {
  using M = mesh<axis<"data", 2>>;
  using V = tensor<float, shape<4, 3, 2>>;
  const V a = random_tensor<V>(12);
  // [4@data,3,2] -> [4@data,6] -> [6,4@data]: no communication; the result comes back split as computed.
  auto g = [](auto p) { return transpose<1, 0>(reshape<shape<4, 6>>(p)) * 2.0f; };
  auto f = jit<M>(g, in_shardings<P<"data">>, out_shardings<P<none, "data">>);
  expect_close(f(a), jit(g)(a));
  const std::string text = dump(f, a);
  EXPECT_NE(text.find("0 collectives"), std::string::npos) << text;
}

}  // namespace

// optax.adam, fully sharded (ZeRO-3: parameters, mu and nu split by rows, the count whole). Each gradient is
// reduce-scattered once, and mu (linear in it) and nu (its square) both use that one; the bias, split for
// storage, is gathered as f32[32] before its broadcast, not as the f32[32,32] after it.
TEST(Partition, FullyShardedAdamStepMovesEachLeafOnceEachWay) {
  using M = mesh<axis<"data", 2>>;
  using opt = optim::adam<0.01>;
  const net<> p{random_tensor<tensor<float, shape<16, 32>>>(30, 0.3f), random_tensor<tensor<float, shape<32>>>(31, 0.3f),
                random_tensor<tensor<float, shape<32, 8>>>(32, 0.3f)};
  const auto state = opt{}.init(p);
  const Xn x = random_tensor<Xn>(33);
  const Yn y = random_tensor<Yn>(34);
  constexpr auto step = [](auto params, auto s, auto u, auto v) {
    const auto [loss, g] = value_and_grad([](auto q, auto a, auto b) {
      const auto e = matmul(tanh(matmul(a, q.w1) + q.b1), q.w2) - b;
      return mean(e * e);
    })(params, u, v);
    const auto [updates, next] = opt{}.update(g, s);
    return std::tuple(optim::apply_updates(params, updates), next, loss);
  };
  using state_spec = specs<P<>, P<"data">, P<"data">>;
  auto f = jit<M>(step, in_shardings<P<"data">, state_spec, P<"data">, P<"data">>, out_shardings<P<"data">, state_spec, P<>>);
  auto [next, next_state, loss] = f(p, state, x, y);
  auto [next1, next_state1, loss1] = jit(step)(p, state, x, y);
  for (int k = 0; k < 2; ++k) {  // a second step sees nonzero moments
    std::tie(next, next_state, loss) = f(next, next_state, x, y);
    std::tie(next1, next_state1, loss1) = jit(step)(next1, next_state1, x, y);
  }
  expect_close(loss, loss1);
  expect_close(next.w1, next1.w1, 1e-5);
  expect_close(next.b1, next1.b1, 1e-5);
  expect_close(next.w2, next1.w2, 1e-5);
  expect_close(std::get<2>(next_state).w1, std::get<2>(next_state1).w1, 1e-5);
  const std::string text = dump(f, p, state, x, y);
  EXPECT_EQ(count_of(text, "psum_scatter over {data}"), 3u) << text;  // one per gradient: mu and nu share it
  EXPECT_EQ(count_of(text, "all_gather over {data}"), 3u) << text;    // one per parameter, forward and backward
  EXPECT_EQ(count_of(text, "psum over {data}"), 1u) << text;          // the loss
  EXPECT_NE(text.find("all_gather over {data} (2 devices): 128 bytes"), std::string::npos) << text;  // b1: 32 floats
}

// Per device (arena peak, parameters and results: what dump reports), the fully sharded Adam step of the
// Fashion-MNIST MLP (784-512-256-10, batch 128) holds at most 0.6x what the data-parallel one does, whose
// parameters and state are whole on every device. (In a model as small as net<> above, the batch's
// activations, split either way, weigh as much as the parameters: 0.68.)
template <template <class, class> class T = tensor>
struct fashion_mlp {
  BOOST_HANA_DEFINE_STRUCT(fashion_mlp, (T<float, shape<784, 512>>, w1), (T<float, shape<512>>, b1), (T<float, shape<512, 256>>, w2),
                           (T<float, shape<256>>, b2), (T<float, shape<256, 10>>, w3), (T<float, shape<10>>, b3));
};
TEST(Partition, FullyShardedAdamHoldsUnderSixTenthsOfDataParallelPerDevice) {
  using M = mesh<axis<"data", 2>>;
  using opt = optim::adam<0.01>;
  constexpr auto step = [](auto params, auto s, auto u, auto v) {
    const auto [loss, g] = value_and_grad([](auto q, auto a, auto b) {
      const auto h1 = relu(matmul(a, q.w1) + q.b1);
      const auto h2 = relu(matmul(h1, q.w2) + q.b2);
      return mean(nn::softmax_cross_entropy_with_integer_labels(matmul(h2, q.w3) + q.b3, b));
    })(params, u, v);
    const auto [updates, next] = opt{}.update(g, s);
    return std::tuple(optim::apply_updates(params, updates), next, loss);
  };
  using state_spec = specs<P<>, P<"data">, P<"data">>;
  auto sharded = jit<M>(step, in_shardings<P<"data">, state_spec, P<"data">, P<"data">>, out_shardings<P<"data">, state_spec, P<>>);
  auto replicated = jit<M>(step, in_shardings<P<>, P<>, P<"data">, P<"data">>, out_shardings<P<>, P<>, P<>>);
  using S = optim::adam_state<fashion_mlp<>>;
  using X = tensor<float, shape<128, 784>>;
  using Y = tensor<std::int32_t, shape<128>>;
  using sharded_plan = decltype(sharded)::traced_for<fashion_mlp<>, S, X, Y>;
  // Data parallel as written, each result whole on every device (as a device of a mesh holds it; this host
  // runs its update in blocks written in place, transform/update_sharding.hpp).
  using replicated_plan = decltype(replicated)::traced_for<fashion_mlp<>, S, X, Y>::traced;
  constexpr auto bytes = [](const auto& plan) { return plan.arena_bytes + plan.parameter_bytes + plan.output_bytes; };
  const double ratio = static_cast<double>(bytes(sharded_plan::plan)) / static_cast<double>(bytes(replicated_plan::plan));
  EXPECT_LE(ratio, 0.6) << "fully sharded " << bytes(sharded_plan::plan) << " bytes per device, data parallel " << bytes(replicated_plan::plan);
  std::printf("per-device bytes, fully sharded %zu / data parallel %zu: %.3f\n", std::size_t{bytes(sharded_plan::plan)},
              std::size_t{bytes(replicated_plan::plan)}, ratio);
}
