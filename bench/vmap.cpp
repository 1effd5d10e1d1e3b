// vmap against the batched function written by hand, in the same run (race.hpp: contestants alternate,
// best blocks compared). Counter vmap_vs_direct = direct time / vmap time (1 = as fast; > 0.95 is the
// target: vmap within 5%), max_diff = largest difference between the two results.
//
//   mlp_forward        per example relu(x.W1 + b1).W2 + b2, x f32[784], W1 f32[784,256], W2 f32[256,10], mapped
//                      over 256 examples (in_axes<0, none, none, none, none>) vs the same on x f32[256,784].
//   per_example_loss   cross-entropy of that MLP per example (x and one-hot y mapped) vs the batched
//                      expression (log_softmax over the last axis, sum over it).
//   per_example_grads  vmap(grad(loss), in_axes<none, none, 0, 0>) of a softmax regression (W f32[784,10],
//                      256 examples) vs the hand-derived batched gradients x_b (softmax_b - y_b)^T as one
//                      batched dot_general, f32[256,784,10].
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>

#include <tessel/ops.hpp>
#include <tessel/tessel.hpp>
#include <tessel/transform/grad.hpp>
#include <tessel/jit.hpp>
#include <tessel/transform/vmap.hpp>

#include "race.hpp"

namespace {
using tessel::axes;
using tessel::in_axes;
using tessel::jit;
using tessel::none;
using tessel::shape;
using tessel::tensor;
using tessel_bench::race;

constexpr std::size_t B = 256;

template <class T>
T random_tensor(unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  T t;
  for (auto& v : t) v = d(gen);
  return t;
}

template <class T>
T one_hot_rows(unsigned seed) {
  std::mt19937 gen(seed);
  T t;
  for (auto& v : t) v = 0;
  constexpr std::size_t classes = T::shape_type::dims[T::shape_type::rank - 1];
  for (std::size_t r = 0; r < T::shape_type::size / classes; ++r) t[r * classes + gen() % classes] = 1;
  return t;
}

template <class A>
double max_difference(const A& a, const A& b) {
  double most = 0;
  for (std::size_t i = 0; i < A::shape_type::size; ++i) most = std::max(most, std::abs(static_cast<double>(a[i]) - b[i]));
  return most;
}

template <class Ours, class Direct>
void compare(benchmark::State& state, Ours ours, Direct direct) {
  const double diff = max_difference(ours(), direct());
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(direct));
  race r(2);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, [&] { benchmark::DoNotOptimize(ours()); }, reps));
    r.run(1, [&] { benchmark::DoNotOptimize(direct()); }, reps);
  }
  state.counters["vmap_vs_direct"] = r.speedup(0, 1);
  state.counters["max_diff"] = diff;
}

const auto mlp = [](auto x, auto w1, auto b1, auto w2, auto b2) {
  return tessel::matmul(tessel::relu(tessel::matmul(x, w1) + b1), w2) + b2;
};
const auto mlp_loss = [](auto x, auto y, auto w1, auto b1, auto w2, auto b2) {
  return -tessel::sum(tessel::log_softmax(mlp(x, w1, b1, w2, b2)) * y);
};
const auto batched_mlp_loss = [](auto x, auto y, auto w1, auto b1, auto w2, auto b2) {
  return -tessel::sum<1>(tessel::log_softmax<-1>(mlp(x, w1, b1, w2, b2)) * y);
};

struct mlp_params {
  tensor<float, shape<784, 256>> w1 = random_tensor<tensor<float, shape<784, 256>>>(1, -0.05f, 0.05f);
  tensor<float, shape<256>> b1 = random_tensor<tensor<float, shape<256>>>(2);
  tensor<float, shape<256, 10>> w2 = random_tensor<tensor<float, shape<256, 10>>>(3, -0.1f, 0.1f);
  tensor<float, shape<10>> b2 = random_tensor<tensor<float, shape<10>>>(4);
};

void mlp_forward(benchmark::State& state) {
  static const mlp_params p;
  static const auto x = random_tensor<tensor<float, shape<B, 784>>>(5);
  const auto mapped = tessel::vmap(mlp, in_axes<0, none, none, none, none>);
  compare(state, [&] { return mapped(x, p.w1, p.b1, p.w2, p.b2); }, [&] { return jit(mlp)(x, p.w1, p.b1, p.w2, p.b2); });
}

void per_example_loss(benchmark::State& state) {
  static const mlp_params p;
  static const auto x = random_tensor<tensor<float, shape<B, 784>>>(6);
  static const auto y = one_hot_rows<tensor<float, shape<B, 10>>>(7);
  const auto mapped = tessel::vmap(mlp_loss, in_axes<0, 0, none, none, none, none>);
  compare(state, [&] { return mapped(x, y, p.w1, p.b1, p.w2, p.b2); },
          [&] { return jit(batched_mlp_loss)(x, y, p.w1, p.b1, p.w2, p.b2); });
}

const auto regression_loss = [](auto w, auto b, auto x, auto y) {
  return -tessel::sum(tessel::log_softmax(tessel::matmul(x, w) + b) * y);
};
// d loss / d W for each example: x_b (softmax(x_b W + b) - y_b)^T, all examples in one batched contraction.
const auto batched_regression_grads = [](auto w, auto b, auto x, auto y) {
  const auto d = tessel::softmax<-1>(tessel::matmul(x, w) + b) - y;  // [B, 10]
  return tessel::dot_general<axes<>, axes<>, axes<0>, axes<0>>(x, d);  // [B, 784, 10]
};

void per_example_grads(benchmark::State& state) {
  static const auto w = random_tensor<tensor<float, shape<784, 10>>>(8, -0.05f, 0.05f);
  static const auto b = random_tensor<tensor<float, shape<10>>>(9);
  static const auto x = random_tensor<tensor<float, shape<B, 784>>>(10);
  static const auto y = one_hot_rows<tensor<float, shape<B, 10>>>(11);
  const auto mapped = tessel::vmap(tessel::grad(regression_loss), in_axes<none, none, 0, 0>);
  compare(state, [&] { return mapped(w, b, x, y); }, [&] { return jit(batched_regression_grads)(w, b, x, y); });
}

}  // namespace

BENCHMARK(mlp_forward)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMicrosecond);
BENCHMARK(per_example_loss)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMicrosecond);
BENCHMARK(per_example_grads)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
