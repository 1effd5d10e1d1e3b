// Fused elementwise and row kernels against the machine's memory bandwidth and against peers, each
// ratio measured in the same run (race.hpp: contestants alternate, best blocks compared).
//
//   relu_affine      y = relu(a*x + b), a scalar argument, x and b f32[2^24]: tessel's one fused pass vs
//                    a STREAM triad c = a*x + b on the same two threads (plain stores), vs the same
//                    expression unfused (one jit per op), vs an Eigen array expression.
//   relu_affine_row  the same with b a broadcast row: x f32[4096,4096], b f32[4096]; vs a STREAM scale pass.
//   softmax_rows     row softmax of f32[4096,1024] vs one read + one write of the matrix (a scale pass),
//                    vs Eigen's row softmax.
// Minimal traffic counts each input once and the output once. Every reference kernel runs on tessel's
// host pool (2 threads here), cut into two contiguous halves; Eigen does too (Eigen's array expressions
// are single-threaded, so each thread evaluates its half).
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>

#include <Eigen/Core>

#include <tessel/ops.hpp>
#include <tessel/tessel.hpp>
#include <tessel/transform/jit.hpp>

#include "race.hpp"

namespace {
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel_bench::race;

constexpr std::size_t threads = 2;

template <class T>
T random_tensor(unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  T t;
  for (auto& v : t) v = d(gen);
  return t;
}

template <class A, class B>
double max_difference(const A& a, const B& b, std::size_t n) {
  double most = 0;
  for (std::size_t i = 0; i < n; ++i) most = std::max(most, std::abs(static_cast<double>(a[i]) - b[i]));
  return most;
}

// c[i] = a*x[i] + b[i] (STREAM triad), plain stores.
void triad(float a, const float* x, const float* b, float* c, std::size_t n) {
  tessel_bench::split(threads, n, [&](std::size_t first, std::size_t last) {
    const __m512 va = _mm512_set1_ps(a);
    std::size_t i = first;
    for (; i + 16 <= last; i += 16)
      _mm512_storeu_ps(c + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(b + i)));
    for (; i < last; ++i) c[i] = a * x[i] + b[i];
  });
}

// c[i] = a*x[i] (STREAM scale), plain stores: one read and one write.
void scale(float a, const float* x, float* c, std::size_t n) {
  tessel_bench::split(threads, n, [&](std::size_t first, std::size_t last) {
    const __m512 va = _mm512_set1_ps(a);
    std::size_t i = first;
    for (; i + 16 <= last; i += 16) _mm512_storeu_ps(c + i, _mm512_mul_ps(va, _mm512_loadu_ps(x + i)));
    for (; i < last; ++i) c[i] = a * x[i];
  });
}

const auto affine_relu = [](auto x, auto a, auto b) { return tessel::relu(a * x + b); };
const auto mul_op = [](auto a, auto x) { return a * x; };
const auto add_op = [](auto x, auto b) { return x + b; };
const auto relu_op = [](auto x) { return tessel::relu(x); };

void relu_affine(benchmark::State& state) {
  using big = shape<1 << 24>;
  constexpr std::size_t n = big::size;
  const auto x = random_tensor<tensor<float, big>>(1);
  const auto b = random_tensor<tensor<float, big>>(2);
  const float a = 1.5f;
  tensor<float, big> c, e;

  using array = Eigen::Map<Eigen::ArrayXf>;
  using const_array = Eigen::Map<const Eigen::ArrayXf>;
  auto eigen = [&] {
    tessel_bench::split(threads, n, [&](std::size_t first, std::size_t last) {
      const auto len = static_cast<Eigen::Index>(last - first);
      array(e.data() + first, len) = (a * const_array(x.data() + first, len) + const_array(b.data() + first, len)).cwiseMax(0.0f);
    });
  };
  auto ours = [&] {
    auto y = jit(affine_relu)(x, a, b);
    benchmark::DoNotOptimize(y.data());
  };
  auto unfused = [&] {
    auto t1 = jit(mul_op)(a, x);
    auto t2 = jit(add_op)(t1, b);
    auto y = jit(relu_op)(t2);
    benchmark::DoNotOptimize(y.data());
  };
  // A diagnostic: the triad writing a fresh zero-filled tensor per call, as jit's result is.
  auto triad_fresh = [&] {
    tensor<float, big> fresh;
    triad(a, x.data(), b.data(), fresh.data(), n);
    benchmark::DoNotOptimize(fresh.data());
  };

  {
    const auto y = jit(affine_relu)(x, a, b);
    const auto z = jit(relu_op)(jit(add_op)(jit(mul_op)(a, x), b));
    eigen();
    const double err = std::max({max_difference(y, e, n), max_difference(z, e, n)});
    if (err > 1e-5) state.SkipWithError("tessel and Eigen disagree");
  }
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(ours));
  race r(5);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, [&] { triad(a, x.data(), b.data(), c.data(), n); benchmark::DoNotOptimize(c.data()); }, reps);
    r.run(2, unfused, reps);
    r.run(3, eigen, reps);
    r.run(4, triad_fresh, reps);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 3 * n * sizeof(float)));
  state.counters["of_triad_bandwidth"] = r.speedup(0, 1);
  state.counters["speedup_vs_unfused"] = r.speedup(0, 2);
  state.counters["vs_eigen"] = r.speedup(0, 3);
  state.counters["of_triad_fresh_output"] = r.speedup(0, 4);
  state.counters["triad_GBps"] = 3.0 * n * sizeof(float) / r.best(1) / 1e9;
}

void relu_affine_row(benchmark::State& state) {
  using mat = shape<4096, 4096>;
  constexpr std::size_t rows = 4096, cols = 4096, n = rows * cols;
  const auto x = random_tensor<tensor<float, mat>>(3);
  const auto b = random_tensor<tensor<float, shape<cols>>>(4);
  const float a = 1.5f;
  tensor<float, mat> c, e;

  using matrix = Eigen::Map<Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  using const_matrix = Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  const Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>> brow(b.data(), cols);
  auto eigen = [&] {
    tessel_bench::split(threads, rows, [&](std::size_t first, std::size_t last) {
      const auto h = static_cast<Eigen::Index>(last - first);
      matrix(e.data() + first * cols, h, cols) =
          (a * const_matrix(x.data() + first * cols, h, cols)).rowwise() + brow;
      matrix(e.data() + first * cols, h, cols) = matrix(e.data() + first * cols, h, cols).cwiseMax(0.0f);
    });
  };
  auto ours = [&] {
    auto y = jit(affine_relu)(x, a, b);
    benchmark::DoNotOptimize(y.data());
  };
  auto unfused = [&] {
    auto t1 = jit(mul_op)(a, x);
    auto t2 = jit(add_op)(t1, b);
    auto y = jit(relu_op)(t2);
    benchmark::DoNotOptimize(y.data());
  };
  {
    const auto y = jit(affine_relu)(x, a, b);
    eigen();
    if (max_difference(y, e, n) > 1e-5) state.SkipWithError("tessel and Eigen disagree");
  }
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(ours));
  race r(4);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, [&] { scale(a, x.data(), c.data(), n); benchmark::DoNotOptimize(c.data()); }, reps);
    r.run(2, unfused, reps);
    r.run(3, eigen, reps);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * (2 * n + cols) * sizeof(float)));
  state.counters["of_scale_bandwidth"] = r.speedup(0, 1);
  state.counters["speedup_vs_unfused"] = r.speedup(0, 2);
  state.counters["vs_eigen"] = r.speedup(0, 3);
}

void softmax_rows(benchmark::State& state) {
  constexpr std::size_t rows = 4096, cols = 1024, n = rows * cols;
  using mat = shape<rows, cols>;
  const auto x = random_tensor<tensor<float, mat>>(5, -5, 5);
  tensor<float, mat> c, e;
  const auto f = [](auto v) { return tessel::softmax(v); };

  using matrix = Eigen::Map<Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  using const_matrix = Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  auto eigen = [&] {
    tessel_bench::split(threads, rows, [&](std::size_t first, std::size_t last) {
      const auto h = static_cast<Eigen::Index>(last - first);
      const const_matrix in(x.data() + first * cols, h, cols);
      matrix out(e.data() + first * cols, h, cols);
      out = (in.colwise() - in.rowwise().maxCoeff()).exp();
      out.colwise() /= out.rowwise().sum();
    });
  };
  auto ours = [&] {
    auto y = jit(f)(x);
    benchmark::DoNotOptimize(y.data());
  };
  {
    const auto y = jit(f)(x);
    eigen();
    if (max_difference(y, e, n) > 1e-5) state.SkipWithError("tessel and Eigen disagree");
  }
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(ours));
  race r(3);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, [&] { scale(0.5f, x.data(), c.data(), n); benchmark::DoNotOptimize(c.data()); }, reps);
    r.run(2, eigen, reps);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * n * sizeof(float)));
  state.counters["of_rw_bound"] = r.speedup(0, 1);
  state.counters["vs_eigen"] = r.speedup(0, 2);
  state.counters["eigen_of_rw_bound"] = r.speedup(2, 1);
}

BENCHMARK(relu_affine)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK(relu_affine_row)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK(softmax_rows)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
