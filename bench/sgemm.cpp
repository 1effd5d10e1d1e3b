// SGEMM C = A B, square f32 N x N (N = 128 ... 2048), row-major, against oneDNN's dnnl_sgemm (the best
// peer here), OpenBLAS's cblas_sgemm (with OPENBLAS_CORETYPE=Cooperlake and OPENBLAS_THREAD_TIMEOUT=4:
// main sets them and re-executes itself before OpenBLAS initialises, unless the caller set them) and the
// measured FMA peak, each ratio from the same run (race.hpp). oneDNN runs with OpenMP's defaults.
//
//   sgemm_2t<N>  tessel::jit(matmul) on a host pool of two threads vs the peers on 2 threads.
//   sgemm_1t<N>  tessel::jit(matmul) on a host pool of one thread vs the peers on 1 thread.
// The pool's size is fixed for the process (TESSEL_NUM_THREADS, read once), so each family needs its own
// run: `TESSEL_NUM_THREADS=1 bench_sgemm --benchmark_filter=1t` and `TESSEL_NUM_THREADS=2 bench_sgemm
// --benchmark_filter=2t` (bench/run_all does both); a row whose pool has another size says so and skips.
#include <benchmark/benchmark.h>

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>

#include <tessel/kernels/thread_pool.hpp>
#include <tessel/ops.hpp>
#include <tessel/tessel.hpp>
#include <tessel/jit.hpp>

#include "race.hpp"

namespace {
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel_bench::race;

const auto matmul_op = [](auto a, auto b) { return tessel::matmul(a, b); };

template <class T>
T random_tensor(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  T t;
  for (auto& v : t) v = d(gen);
  return t;
}

void onednn_sgemm(std::size_t n, int threads, const float* a, const float* b, float* c) {
  omp_set_num_threads(threads);
  const auto d = static_cast<dnnl_dim_t>(n);
  dnnl_sgemm('N', 'N', d, d, d, 1.0f, a, d, b, d, 0.0f, c, d);  // row-major, as tessel
}

void openblas_sgemm(std::size_t n, int threads, const float* a, const float* b, float* c) {
  static int current = -1;
  if (current != threads) openblas_set_num_threads(current = threads);
  const auto d = static_cast<blasint>(n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0f, a, d, b, d, 0.0f, c, d);
}

double max_relative_difference(const float* x, const float* y, std::size_t count) {
  double most = 0;
  for (std::size_t i = 0; i < count; ++i) most = std::max(most, std::abs(static_cast<double>(x[i]) - y[i]) / (1 + std::abs(y[i])));
  return most;
}

// Whether jit runs on a pool of `threads` threads here; if not, the row is skipped with the setting it needs.
bool pool_has(benchmark::State& state, std::size_t threads) {
  const std::size_t size = tessel::kernels::thread_pool::host().size();
  if (size == threads) return true;
  const std::string why = "jit's host pool has " + std::to_string(size) + " thread(s) here; this row needs " +
                          std::to_string(threads) + ": run with TESSEL_NUM_THREADS=" + std::to_string(threads);
  state.SkipWithError(why.c_str());
  return false;
}

template <std::size_t N>
void sgemm_2t(benchmark::State& state) {
  if (!pool_has(state, 2)) return;
  using sq = shape<N, N>;
  const auto a = random_tensor<tensor<float, sq>>(1);
  const auto b = random_tensor<tensor<float, sq>>(2);
  tensor<float, sq> c1, c2;
  const double flops = 2.0 * N * N * N;
  const double peak_flops = std::max(flops, 2e9);  // blocks of >= 5 ms: both pool threads get going
  auto ours = [&] {
    auto y = jit(matmul_op)(a, b);
    benchmark::DoNotOptimize(y.data());
  };
  {
    const auto y = jit(matmul_op)(a, b);
    onednn_sgemm(N, 2, a.data(), b.data(), c1.data());
    openblas_sgemm(N, 2, a.data(), b.data(), c2.data());
    if (max_relative_difference(y.data(), c1.data(), N * N) > 1e-3 || max_relative_difference(c2.data(), c1.data(), N * N) > 1e-3)
      state.SkipWithError("tessel, oneDNN and OpenBLAS disagree");
  }
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(ours));
  race r(4);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, [&] { onednn_sgemm(N, 2, a.data(), b.data(), c1.data()); }, reps);
    r.run(2, [&] { openblas_sgemm(N, 2, a.data(), b.data(), c2.data()); }, reps);
    r.run_settled(3, [&] { tessel_bench::fma_f32_loop(static_cast<std::uint64_t>(peak_flops), 2); }, 1, peak_flops / flops);
  }
  state.counters["GFLOPs"] = flops / r.best(0) / 1e9;
  state.counters["vs_onednn"] = r.speedup(0, 1);
  state.counters["vs_openblas"] = r.speedup(0, 2);
  state.counters["of_fma_peak"] = r.speedup(0, 3);
  state.counters["onednn_of_peak"] = r.speedup(1, 3);
  state.counters["openblas_of_peak"] = r.speedup(2, 3);
  state.counters["peak_GFLOPs"] = flops / r.best(3) / 1e9;
}

template <std::size_t N>
void sgemm_1t(benchmark::State& state) {
  if (!pool_has(state, 1)) return;
  using sq = shape<N, N>;
  const auto a = random_tensor<tensor<float, sq>>(1);
  const auto b = random_tensor<tensor<float, sq>>(2);
  tensor<float, sq> c1, c2;
  const double flops = 2.0 * N * N * N;
  const double peak_flops = std::max(flops, 1e9);
  auto ours = [&] {
    auto y = jit(matmul_op)(a, b);
    benchmark::DoNotOptimize(y.data());
  };
  {
    const auto y = jit(matmul_op)(a, b);
    onednn_sgemm(N, 1, a.data(), b.data(), c1.data());
    openblas_sgemm(N, 1, a.data(), b.data(), c2.data());
    if (max_relative_difference(y.data(), c1.data(), N * N) > 1e-3 || max_relative_difference(c2.data(), c1.data(), N * N) > 1e-3)
      state.SkipWithError("tessel, oneDNN and OpenBLAS disagree");
  }
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(ours));
  race r(4);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, [&] { onednn_sgemm(N, 1, a.data(), b.data(), c1.data()); }, reps);
    r.run(2, [&] { openblas_sgemm(N, 1, a.data(), b.data(), c2.data()); }, reps);
    r.run_settled(3, [&] { tessel_bench::fma_f32_loop(static_cast<std::uint64_t>(peak_flops), 1); }, 1, peak_flops / flops);
  }
  state.counters["GFLOPs"] = flops / r.best(0) / 1e9;
  state.counters["vs_onednn"] = r.speedup(0, 1);
  state.counters["vs_openblas"] = r.speedup(0, 2);
  state.counters["of_fma_peak"] = r.speedup(0, 3);
  state.counters["onednn_of_peak"] = r.speedup(1, 3);
  state.counters["openblas_of_peak"] = r.speedup(2, 3);
  state.counters["peak_GFLOPs"] = flops / r.best(3) / 1e9;
}

#define TESSEL_SGEMM_SIZES(bench)                                                                        \
  BENCHMARK_TEMPLATE(bench, 128)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond); \
  BENCHMARK_TEMPLATE(bench, 256)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond); \
  BENCHMARK_TEMPLATE(bench, 512)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond); \
  BENCHMARK_TEMPLATE(bench, 1024)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond); \
  BENCHMARK_TEMPLATE(bench, 2048)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond)
TESSEL_SGEMM_SIZES(sgemm_2t);
TESSEL_SGEMM_SIZES(sgemm_1t);
}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS reads its environment once, when it is loaded, so set what it needs and start again:
  //  - Debian's OpenBLAS 0.3.21 takes this CPU for a Prescott (SSE3 kernels): OPENBLAS_CORETYPE=Cooperlake.
  //  - its idle workers spin (sched_yield) for 2^28 cycles, about 0.1 s, after every call, taking the
  //    second core from whatever runs next (tessel's pool, the peak loop: measured, the two-thread FMA
  //    peak fell to the one-thread rate): OPENBLAS_THREAD_TIMEOUT=4 (2^4 cycles) puts them to sleep.
  // Values the caller set are kept (OPENBLAS_CORETYPE=Prescott shows the default install).
  bool changed = false;
  for (const auto& [name, value] : {std::pair{"OPENBLAS_CORETYPE", "Cooperlake"}, std::pair{"OPENBLAS_THREAD_TIMEOUT", "4"}}) {
    if (std::getenv(name) == nullptr) {
      setenv(name, value, 1);
      changed = true;
    }
  }
  if (changed) {
    execv("/proc/self/exe", argv);
    std::perror("bench_sgemm: re-executing with OpenBLAS's environment failed");
    return 1;
  }
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  benchmark::AddCustomContext("openblas_thread_timeout", std::getenv("OPENBLAS_THREAD_TIMEOUT"));
  benchmark::AddCustomContext("omp_wait_policy", std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "(default)");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
