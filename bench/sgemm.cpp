// SGEMM C = A B, square f32 N x N (N = 128 ... 2048), row-major, against oneDNN's dnnl_sgemm (the best
// peer here), OpenBLAS's cblas_sgemm (with OPENBLAS_CORETYPE=Cooperlake and OPENBLAS_THREAD_TIMEOUT=4:
// main sets them and re-executes itself before OpenBLAS initialises, unless the caller set them) and the
// measured FMA peak, each ratio from the same run (race.hpp). oneDNN runs with OpenMP's defaults.
//
//   sgemm_2t<N>  tessel::jit(matmul) on the host pool (2 threads here: one per CPU of the affinity
//                mask) vs the peers on 2 threads.
//   sgemm_1t<N>  one thread. The pool's size is fixed for the process (TESSEL_NUM_THREADS is read once),
//                so this runs what jit's contraction kernel runs, on the calling thread: B packed once
//                (kernels::hwy_gemm_pack_b), then the executor's GEMM per block of MC rows straight into C
//                (a product with no epilogue is stored where it is made), vs the peers on 1 thread.
#include <benchmark/benchmark.h>

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <utility>

#include <tessel/kernels/gemm.hpp>
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

struct aligned_floats {
  explicit aligned_floats(std::size_t n) : p(static_cast<float*>(::operator new(n * sizeof(float), std::align_val_t{64}))) {}
  ~aligned_floats() { ::operator delete(p, std::align_val_t{64}); }
  aligned_floats(const aligned_floats&) = delete;
  aligned_floats& operator=(const aligned_floats&) = delete;
  float* p;
};

// What jit's contraction kernel does for C = A B, on one thread: B packed once, then each block of MC
// rows multiplied into its rows of C.
void tessel_kernel(std::size_t n, const float* a, const float* b, float* c, float* scratch, float* packed) {
  namespace k = tessel::kernels;
  const k::matrix_view av{a, n, 1, false}, bv{b, n, 1, false};
  const k::gemm_blocking blocks = k::blocking_of();
  const k::packed_b_layout layout = k::hwy_gemm_packed_b_layout(av, bv, n, n, blocks);
  k::hwy_gemm_pack_b(bv, n, n, blocks, layout, 0, layout.panels, packed);
  for (std::size_t m0 = 0; m0 < n; m0 += blocks.mc) {
    const std::size_t m1 = std::min(n, m0 + blocks.mc);
    k::hwy_gemm_rows_packed(av, packed, layout, m0, m1, n, n, c + m0 * n, n, scratch, blocks);
  }
}

double max_relative_difference(const float* x, const float* y, std::size_t count) {
  double most = 0;
  for (std::size_t i = 0; i < count; ++i) most = std::max(most, std::abs(static_cast<double>(x[i]) - y[i]) / (1 + std::abs(y[i])));
  return most;
}

template <std::size_t N>
void sgemm_2t(benchmark::State& state) {
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
  using sq = shape<N, N>;
  const auto a = random_tensor<tensor<float, sq>>(1);
  const auto b = random_tensor<tensor<float, sq>>(2);
  tensor<float, sq> c0, c1, c2;
  aligned_floats scratch(tessel::kernels::gemm_scratch_floats());
  const std::size_t nr = tessel::kernels::blocking_of().nr;
  aligned_floats packed((N + nr - 1) / nr * nr * N);
  const double flops = 2.0 * N * N * N;
  const double peak_flops = std::max(flops, 1e9);
  auto ours = [&] { tessel_kernel(N, a.data(), b.data(), c0.data(), scratch.p, packed.p); };
  {
    ours();
    onednn_sgemm(N, 1, a.data(), b.data(), c1.data());
    openblas_sgemm(N, 1, a.data(), b.data(), c2.data());
    if (max_relative_difference(c0.data(), c1.data(), N * N) > 1e-3 || max_relative_difference(c2.data(), c1.data(), N * N) > 1e-3)
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
