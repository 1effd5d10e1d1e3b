// What a kernel pays to run on every thread: one parallel_for of the host pool with one trivial chunk
// per thread, against an OpenMP parallel region doing the same (GCC's libgomp, the fork/join peer), in
// the same run. Two cases: back to back (a step's kernels follow each other within microseconds), and
// after a serial gap of 200 us (a kernel run whole on the calling thread in between).
//
//   build/bench/bench_thread_pool
//
// Counter vs_openmp: the OpenMP region's time / the pool's (> 1: the pool is faster). The gap itself is
// not counted in either time.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <vector>

#include <tessel/kernels/thread_pool.hpp>

#include "race.hpp"  // rounds

namespace {

std::atomic<std::size_t> sink{0};

void pool_call(tessel::kernels::thread_pool& pool) {
  pool.parallel_for(pool.size(), 1, [](std::size_t begin, std::size_t, std::size_t) { sink.fetch_add(begin, std::memory_order_relaxed); });
}

void openmp_call(int threads) {
#pragma omp parallel num_threads(threads)
  sink.fetch_add(static_cast<std::size_t>(omp_get_thread_num()), std::memory_order_relaxed);
}

// Busy for `us` microseconds on the calling thread (a serial kernel).
void serial_gap(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Seconds per call of `call`, each call preceded by `gap_us` of serial work that is not timed.
template <class F>
double timed_calls(F call, int calls, int gap_us) {
  double total = 0;
  for (int i = 0; i < calls; ++i) {
    if (gap_us > 0) serial_gap(gap_us);
    const auto t0 = std::chrono::steady_clock::now();
    call();
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return total / calls;
}

void BM_ParallelFor(benchmark::State& state) {
  const int gap_us = static_cast<int>(state.range(0));
  auto& pool = tessel::kernels::thread_pool::host();
  const int threads = static_cast<int>(pool.size());
  const int calls = gap_us > 0 ? 2000 : 20000;
  std::vector<double> ours, peer;
  for (auto _ : state) {
    ours.push_back(timed_calls([&] { pool_call(pool); }, calls, gap_us));
    peer.push_back(timed_calls([&] { openmp_call(threads); }, calls, gap_us));
    state.SetIterationTime(ours.back() * calls);
  }
  const double best_ours = *std::min_element(ours.begin(), ours.end()), best_peer = *std::min_element(peer.begin(), peer.end());
  state.counters["threads"] = threads;
  state.counters["us_per_call"] = best_ours * 1e6;
  state.counters["openmp_us_per_call"] = best_peer * 1e6;
  state.counters["vs_openmp"] = best_peer / best_ours;
}

}  // namespace

BENCHMARK(BM_ParallelFor)->Arg(0)->Arg(200)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(tessel_bench::rounds);

BENCHMARK_MAIN();
