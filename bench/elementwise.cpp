// Fused elementwise and row kernels against the machine's memory bandwidth and against peers, each
// ratio measured in the same run (race.hpp: contestants alternate, best blocks compared).
//
//   relu_affine      y = relu(a*x + b), a scalar argument, x and b f32[2^24]: tessel's one fused pass vs
//                    a STREAM triad c = a*x + b on the same two threads (plain stores), vs the same
//                    expression unfused (one jit per op), vs an Eigen array expression; and with b
//                    donated, so that the result is written into the caller's buffer (donated_*).
//   relu_affine_row  the same with b a broadcast row: x f32[4096,4096], b f32[4096]; vs a STREAM scale pass.
//   softmax_rows     row softmax of f32[4096,1024] vs one read + one write of the matrix (a scale pass),
//                    vs Eigen's row softmax; and with x donated (donated_*).
//   transcendental/<f> y = f(x) over x f32[2^20] for exp, log, log1p, expm1, tanh, logistic, sin, cos,
//                    sqrt, rsqrt, erf and gelu (tanh form): the three paths of the unary primitives
//                    (backend/hwy_math.hpp) in the same run, through jit (forced with force_math_path)
//                    and as the bare kernel on one thread (map_unary_f32 over the same array). Counters:
//                    hwy_vs_xsimd, hwy_vs_scalar (> 1: Highway faster) and kernel_* for the bare kernels.
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
#include <tessel/jit.hpp>
#include <tessel/prim/family/elementwise-inl.hpp>  // map_unary_f32: the bare kernel

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
    std::size_t i = first;
#ifdef __AVX512F__  // a build without AVX-512 (-DTESSEL_NATIVE=OFF) runs the plain loop
    const __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= last; i += 16)
      _mm512_storeu_ps(c + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(b + i)));
#endif
    for (; i < last; ++i) c[i] = a * x[i] + b[i];
  });
}

// c[i] = a*x[i] (STREAM scale), plain stores: one read and one write.
void scale(float a, const float* x, float* c, std::size_t n) {
  tessel_bench::split(threads, n, [&](std::size_t first, std::size_t last) {
    std::size_t i = first;
#ifdef __AVX512F__
    const __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= last; i += 16) _mm512_storeu_ps(c + i, _mm512_mul_ps(va, _mm512_loadu_ps(x + i)));
#endif
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
  // The caller hands its buffer over (JAX's donation): the result is written into it, as a training
  // step's parameters are. Each call adds a*x's positive part at most, so the values stay ordinary.
  tensor<float, big> carried = b;
  auto donated = [&] {
    carried = jit(affine_relu)(x, a, tessel::donate(carried));
    benchmark::DoNotOptimize(carried.data());
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
  {
    const float* before = carried.data();
    donated();
    if (carried.data() != before) state.SkipWithError("the donated buffer was not reused");
  }
  race r(6);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, [&] { triad(a, x.data(), b.data(), c.data(), n); benchmark::DoNotOptimize(c.data()); }, reps);
    r.run(2, unfused, reps);
    r.run(3, eigen, reps);
    r.run(4, triad_fresh, reps);
    r.run(5, donated, reps);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 3 * n * sizeof(float)));
  state.counters["of_triad_bandwidth"] = r.speedup(0, 1);
  state.counters["speedup_vs_unfused"] = r.speedup(0, 2);
  state.counters["vs_eigen"] = r.speedup(0, 3);
  state.counters["of_triad_fresh_output"] = r.speedup(0, 4);
  state.counters["donated_of_triad"] = r.speedup(5, 1);
  state.counters["donated_vs_eigen"] = r.speedup(5, 3);
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
  // The input donated: each call's result lands in the buffer it read (a softmax of the last one's).
  tensor<float, mat> carried = x;
  auto donated = [&] {
    carried = jit(f)(tessel::donate(carried));
    benchmark::DoNotOptimize(carried.data());
  };
  {
    const auto y = jit(f)(x);
    eigen();
    if (max_difference(y, e, n) > 1e-5) state.SkipWithError("tessel and Eigen disagree");
    const float* before = carried.data();
    donated();
    if (carried.data() != before) state.SkipWithError("the donated buffer was not reused");
    if (max_difference(carried, e, n) > 1e-5) state.SkipWithError("the donated softmax and Eigen disagree");
  }
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(ours));
  race r(4);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, [&] { scale(0.5f, x.data(), c.data(), n); benchmark::DoNotOptimize(c.data()); }, reps);
    r.run(2, eigen, reps);
    r.run(3, donated, reps);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * n * sizeof(float)));
  state.counters["of_rw_bound"] = r.speedup(0, 1);
  state.counters["vs_eigen"] = r.speedup(0, 2);
  state.counters["donated_of_rw_bound"] = r.speedup(3, 1);
  state.counters["donated_vs_eigen"] = r.speedup(3, 2);
  state.counters["eigen_of_rw_bound"] = r.speedup(2, 1);
}

// The three paths of a unary primitive, through jit and bare; f is the traced function, Rule the
// primitive's rule (for gelu, tanh's: its one transcendental) and [lo, hi] the argument range.
template <class Rule, class F>
void transcendental(benchmark::State& state, F f, float lo, float hi) {
  using tessel::kernels::math_path;
  using big = shape<1 << 20>;
  constexpr std::size_t n = big::size;
  const auto x = random_tensor<tensor<float, big>>(6, lo, hi);
  tensor<float, big> k;
  auto through_jit = [&](math_path p) {
    return [&, p] {
      tessel::kernels::force_math_path(p);
      auto y = jit(f)(x);
      benchmark::DoNotOptimize(y.data());
    };
  };
  auto bare = [&](math_path p) {
    return [&, p] {
      tessel::prim::map_unary_f32<Rule>(p, x.data(), k.data(), n);
      benchmark::DoNotOptimize(k.data());
    };
  };
  const math_path paths[] = {math_path::hwy, math_path::xsimd, math_path::scalar};
  {
    tessel::kernels::force_math_path(math_path::hwy);
    const auto a = jit(f)(x);
    tessel::kernels::force_math_path(math_path::scalar);
    const auto b = jit(f)(x);
    for (std::size_t i = 0; i < n; ++i)
      if (!(std::abs(a[i] - b[i]) <= 1e-5f * (std::max(std::abs(a[i]), std::abs(b[i])) + 1.0f))) {
        state.SkipWithError("the Highway and scalar paths disagree");
        break;
      }
  }
  int reps[3], bare_reps[3];
  for (std::size_t p = 0; p < 3; ++p) {
    reps[p] = tessel_bench::reps_for(tessel_bench::time_once(through_jit(paths[p])));
    bare_reps[p] = tessel_bench::reps_for(tessel_bench::time_once(bare(paths[p])), 1e-3);
  }
  // The order rotates each round, so that no path always runs first (after the other benchmark, or
  // while the pool's workers still spin after a jit call). The bare kernels race after the jit rounds,
  // on one thread, with the pool idle, in short blocks (1 ms) and four times as many rounds: the
  // fastest of many short blocks is the one least disturbed by other users of the machine.
  race r(6);
  std::size_t round = 0;
  for (auto _ : state) {
    for (std::size_t k = 0; k < 3; ++k) {
      const std::size_t p = (round + k) % 3;
      const double t = r.run(p, through_jit(paths[p]), reps[p]);
      if (p == 0) state.SetIterationTime(t);
    }
    ++round;
  }
  for (round = 0; round < 4 * static_cast<std::size_t>(tessel_bench::rounds); ++round)
    for (std::size_t k = 0; k < 3; ++k) {
      const std::size_t p = (round + k) % 3;
      r.run(3 + p, bare(paths[p]), bare_reps[p]);
    }
  tessel::kernels::force_math_path(math_path::automatic);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
  state.counters["hwy_vs_xsimd"] = r.speedup(0, 1);
  state.counters["hwy_vs_scalar"] = r.speedup(0, 2);
  state.counters["kernel_hwy_vs_xsimd"] = r.speedup(3, 4);
  state.counters["kernel_hwy_vs_scalar"] = r.speedup(3, 5);
  state.counters["kernel_hwy_Gelem_s"] = n / r.best(3) / 1e9;
  state.counters["kernel_xsimd_Gelem_s"] = n / r.best(4) / 1e9;
  state.counters["kernel_scalar_Gelem_s"] = n / r.best(5) / 1e9;
}

#define TESSEL_TRANSCENDENTAL(fn, rule, lo, hi)                                                                  \
  void transcendental_##fn(benchmark::State& state) {                                                        \
    transcendental<tessel::prim::rule>(state, [](auto v) { return tessel::fn(v); }, lo, hi);                 \
  }                                                                                                          \
  BENCHMARK(transcendental_##fn)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMicrosecond)

TESSEL_TRANSCENDENTAL(exp, exp_rule, -10.0f, 10.0f);
TESSEL_TRANSCENDENTAL(log, log_rule, 1e-3f, 1e3f);
TESSEL_TRANSCENDENTAL(log1p, log1p_rule, -0.5f, 10.0f);
TESSEL_TRANSCENDENTAL(expm1, expm1_rule, -5.0f, 5.0f);
TESSEL_TRANSCENDENTAL(tanh, tanh_rule, -5.0f, 5.0f);
TESSEL_TRANSCENDENTAL(logistic, logistic_rule, -10.0f, 10.0f);
TESSEL_TRANSCENDENTAL(sin, sin_rule, -10.0f, 10.0f);
TESSEL_TRANSCENDENTAL(cos, cos_rule, -10.0f, 10.0f);
TESSEL_TRANSCENDENTAL(sqrt, sqrt_rule, 0.0f, 100.0f);
TESSEL_TRANSCENDENTAL(rsqrt, rsqrt_rule, 1e-3f, 100.0f);
TESSEL_TRANSCENDENTAL(erf, erf_rule, -3.0f, 3.0f);
TESSEL_TRANSCENDENTAL(gelu, tanh_rule, -5.0f, 5.0f);  // the kernel counters are tanh's

BENCHMARK(relu_affine)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK(relu_affine_row)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK(softmax_rows)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
