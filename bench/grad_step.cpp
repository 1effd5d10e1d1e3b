// The gradient step of a 784-256-10 MLP (relu, softmax cross-entropy, mean over a batch of 128), each
// ratio measured in the same run (race.hpp: contestants alternate, best blocks compared):
//
//   value_and_grad  jit(value_and_grad(loss)): the loss and the four parameter gradients, derived by
//                   reverse mode (transform/autodiff.hpp) and planned as one program.
//   forward         jit(loss): the loss alone. Counter step_over_forward = step time / forward time
//                   (target <= 3.2; the backward pass has twice the forward's GEMM flops, minus dx).
//   hand            the same loss and gradients with the backward pass written out in the DSL: the same
//                   GEMMs (dW2 = h^T g, dh = g W2^T, dW1 = x^T dz), softmax - labels, relu's mask, bias
//                   sums; jitted. Counter step_over_hand = step time / hand time (target <= 1.10).
// Counters also give the absolute best times (step_us, forward_us, hand_us) and the gradient agreement
// (max_abs_diff between the two gradients of W1, a sanity check of the contestants).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>

#include <tessel/nn/losses.hpp>
#include <tessel/ops.hpp>
#include <tessel/tessel.hpp>
#include <tessel/transform/grad.hpp>

#include "race.hpp"

namespace {
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel_bench::race;

constexpr std::size_t batch = 128;

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<784, 256>>, w1), (T<float, shape<256>>, b1), (T<float, shape<256, 10>>, w2),
                           (T<float, shape<10>>, b2));
};

constexpr auto loss = [](auto p, auto x, auto y) {
  auto h = tessel::relu(tessel::matmul(x, p.w1) + p.b1);
  return tessel::mean(tessel::nn::softmax_cross_entropy(tessel::matmul(h, p.w2) + p.b2, y));
};

// The backward pass by hand: d logits = (softmax(logits) - y) / batch, then the chain rule's GEMMs.
constexpr auto hand = [](auto p, auto x, auto y) {
  auto z1 = tessel::matmul(x, p.w1) + p.b1;
  auto h = tessel::relu(z1);
  auto logits = tessel::matmul(h, p.w2) + p.b2;
  auto value = tessel::mean(tessel::nn::softmax_cross_entropy(logits, y));
  auto g = (tessel::softmax(logits) - y) * (1.0f / static_cast<float>(batch));
  decltype(p) grads = p;
  grads.w2 = tessel::matmul(tessel::transpose<1, 0>(h), g);
  grads.b2 = tessel::sum<0>(g);
  auto dh = tessel::matmul(g, tessel::transpose<1, 0>(p.w2));
  auto dz = tessel::select(z1 > 0.0f, dh, dh * 0.0f);
  grads.w1 = tessel::matmul(tessel::transpose<1, 0>(x), dz);
  grads.b1 = tessel::sum<0>(dz);
  return std::make_tuple(value, grads);
};

template <class T, class S>
void fill(tensor<T, S>& t, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  for (std::size_t i = 0; i < S::size; ++i) t[i] = d(rng);
}

void grad_step(benchmark::State& state) {
  std::mt19937 rng(42);
  mlp<> p;
  fill(p.w1, rng, 0.05f);
  fill(p.b1, rng, 0.01f);
  fill(p.w2, rng, 0.06f);
  fill(p.b2, rng, 0.01f);
  tensor<float, shape<batch, 784>> x;
  fill(x, rng, 1.0f);
  tensor<float, shape<batch, 10>> y{};
  for (std::size_t i = 0; i < batch; ++i) y[i * 10 + (i * 7) % 10] = 1.0f;

  const auto step = jit(tessel::value_and_grad(loss));
  const auto forward = jit(loss);
  const auto by_hand = jit(hand);
  const auto [v0, g0] = step(p, x, y);
  const auto [v1, g1] = by_hand(p, x, y);
  double diff = std::abs(v0[0] - v1[0]);
  for (std::size_t i = 0; i < 784 * 256; ++i) diff = std::max(diff, static_cast<double>(std::abs(g0.w1[i] - g1.w1[i])));

  const int reps = tessel_bench::reps_for(tessel_bench::time_once([&] { benchmark::DoNotOptimize(step(p, x, y)); }));
  race r(3);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, [&] { benchmark::DoNotOptimize(step(p, x, y)); }, reps));
    r.run(1, [&] { benchmark::DoNotOptimize(forward(p, x, y)); }, reps);
    r.run(2, [&] { benchmark::DoNotOptimize(by_hand(p, x, y)); }, reps);
  }
  state.counters["step_over_forward"] = r.best(0) / r.best(1);
  state.counters["step_over_hand"] = r.best(0) / r.best(2);
  state.counters["step_us"] = r.best(0) * 1e6;
  state.counters["forward_us"] = r.best(1) * 1e6;
  state.counters["hand_us"] = r.best(2) * 1e6;
  state.counters["max_abs_diff"] = diff;
}
BENCHMARK(grad_step)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
