// The Fashion-MNIST MLP's train step (784-512-256-10, relu, softmax cross-entropy, optax.adam, f32) on the
// same global batch of 128, one device against two, each ratio measured in the same run (race.hpp):
//
//   one         jit(step) on one device (the host pool's threads share each kernel).
// Each trains its own copy of the parameters, stepped as examples/fashion_mnist's loop steps them.
//   replicated  shard_map on mesh ("data", 2): the batch split, parameters and Adam state whole on each
//               device, the loss pmean'ed so that the gradients arrive all-reduced (examples/fashion_mnist
//               --devices 2). The update runs in blocks: each device reduce-scatters the gradients and
//               computes its half of each leaf's update, written in place (transform/update_sharding.hpp).
//   sharded     jit with shardings on the same mesh, fully sharded (ZeRO-3, SHARDING.md §3.4): parameters,
//               mu and nu split by rows, the count whole; the partitioner gathers each parameter before use
//               and reduce-scatters each gradient, so each device updates half of every leaf.
//
// Counters: replicated_over_one and sharded_over_one (step time / one-device step time; issue target
// <= 1.10 for two devices), the best step times, and max_rel_diff (the sharded step's mu and w1 against the
// one-device step's after one step, relative to each leaf's largest magnitude: the contestants agree).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <tuple>

#include <tessel/nn/losses.hpp>
#include <tessel/tessel.hpp>

#include "race.hpp"

namespace {
using namespace tessel;
using tessel_bench::race;

constexpr std::size_t batch = 128, pixels = 784, classes = 10;

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<pixels, 512>>, w1), (T<float, shape<512>>, b1), (T<float, shape<512, 256>>, w2),
                           (T<float, shape<256>>, b2), (T<float, shape<256, classes>>, w3), (T<float, shape<classes>>, b3));
};
using optimizer = optim::adam<1e-3>;
using state_t = optim::adam_state<mlp<>>;

constexpr auto loss = [](auto p, auto x, auto y) {
  auto h1 = relu(matmul(x, p.w1) + p.b1);
  auto h2 = relu(matmul(h1, p.w2) + p.b2);
  return mean(nn::softmax_cross_entropy_with_integer_labels(matmul(h2, p.w3) + p.b3, y));
};
constexpr auto mean_loss_over_data = [](auto p, auto x, auto y) { return pmean<"data">(loss(p, x, y)); };

template <class Loss>
struct train_step {
  template <class Params, class State, class X, class Y>
  constexpr auto operator()(Params params, State state, X x, Y y) const {
    auto [value, grads] = value_and_grad(Loss{})(params, x, y);
    auto [updates, next] = optimizer{}.update(grads, state);
    return std::make_tuple(optim::apply_updates(params, updates), next, value);
  }
};

template <class T, class S>
void fill(tensor<T, S>& t, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  for (std::size_t i = 0; i < S::size; ++i) t[i] = d(rng);
}

void data_parallel_step(benchmark::State& state) {
  using M = mesh<axis<"data", 2>>;
  std::mt19937 rng(7);
  mlp<> p;
  tree::for_each(p, [&](auto& leaf) { fill(leaf, rng, 0.05f); });
  const state_t s = optimizer{}.init(p);
  tensor<float, shape<batch, pixels>> x;
  fill(x, rng, 1.0f);
  tensor<std::int32_t, shape<batch>> y;
  for (std::size_t i = 0; i < batch; ++i) y[i] = static_cast<std::int32_t>((i * 7) % classes);

  const auto one = jit(train_step<decltype(loss)>{});
  const auto replicated = shard_map<M, specs<P<>, P<>, P<"data">, P<"data">>, P<>>(train_step<decltype(mean_loss_over_data)>{});
  using state_spec = specs<P<>, P<"data">, P<"data">>;
  const auto sharded = jit<M>(train_step<decltype(loss)>{}, in_shardings<P<"data">, state_spec, P<"data">, P<"data">>,
                              out_shardings<P<"data">, state_spec, P<>>);

  // The first step's mu (a tenth of the mean gradient) and parameters, sharded against one device, each
  // difference relative to its leaf's largest magnitude.
  double diff = 0;
  const auto want = one(p, s, x, y);
  const auto got = sharded(p, s, x, y);
  auto compare = [&](const auto& a, const auto& b) {
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < std::remove_cvref_t<decltype(a)>::size; ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(a[i])));
      worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    }
    diff = std::max(diff, worst / scale);
  };
  auto compare_all = [&](const mlp<>& a, const mlp<>& b) {
    compare(a.w1, b.w1), compare(a.b1, b.b1), compare(a.w2, b.w2), compare(a.b2, b.b2), compare(a.w3, b.w3), compare(a.b3, b.b3);
  };
  compare_all(std::get<1>(std::get<1>(want)), std::get<1>(std::get<1>(got)));
  compare_all(std::get<0>(want), std::get<0>(got));

  // Each contestant trains its own copy, as the example's loop does: one device takes its parameters and
  // state donated and writes the new ones in place; a mesh's step takes them and returns new ones.
  mlp<> p0 = p, p1 = p, p2 = p;
  state_t s0 = s, s1 = s, s2 = s;
  tensor<float, shape<>> l0, l1, l2;
  auto step_one = [&] { std::tie(p0, s0, l0) = one(donate(p0), donate(s0), x, y); };
  auto step_replicated = [&] { std::tie(p1, s1, l1) = replicated(p1, s1, x, y); };
  auto step_sharded = [&] { std::tie(p2, s2, l2) = sharded(p2, s2, x, y); };
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(step_one));
  step_replicated();
  step_sharded();
  race r(3);
  for (auto _ : state) {
    r.run(0, step_one, reps);
    r.run(1, step_replicated, reps);
    state.SetIterationTime(r.run(2, step_sharded, reps));
  }
  state.counters["replicated_over_one"] = r.best(1) / r.best(0);
  state.counters["sharded_over_one"] = r.best(2) / r.best(0);
  state.counters["one_us"] = r.best(0) * 1e6;
  state.counters["replicated_us"] = r.best(1) * 1e6;
  state.counters["sharded_us"] = r.best(2) * 1e6;
  state.counters["max_rel_diff"] = diff;
}
BENCHMARK(data_parallel_step)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
