// What a profiler scope costs: an empty loop iteration, a scope while profiling is disabled (a load and a
// branch), and a scope while enabled (two clock reads, two uncontended locks, the name's copy).
#include <benchmark/benchmark.h>

#include <cstddef>

#include "tessel/profile/profiler.hpp"

namespace {

void empty_loop(benchmark::State& state) {
  int x = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(x);
    ++x;
  }
}
BENCHMARK(empty_loop);

void disabled_scope(benchmark::State& state) {
  tessel::profile::disable();
  int x = 0;
  for (auto _ : state) {
    tessel::profile::scope s("train_step");
    benchmark::DoNotOptimize(x);
    ++x;
  }
}
BENCHMARK(disabled_scope);

void disabled_kernel_event(benchmark::State& state) {
  tessel::profile::disable();
  const auto t = tessel::profile::clock::now();
  for (auto _ : state) {
    tessel::profile::kernel_event("fused_dot_add", t, t);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(disabled_kernel_event);

void enabled_scope(benchmark::State& state) {
  tessel::profile::clear();
  tessel::profile::enable();
  int x = 0;
  std::size_t n = 0;
  for (auto _ : state) {
    {
      tessel::profile::scope s("train_step");
      benchmark::DoNotOptimize(x);
      ++x;
    }
    if (++n == (std::size_t{1} << 20)) {  // bounded memory; the clear is amortised over 2^20 scopes
      n = 0;
      tessel::profile::clear();
    }
  }
  tessel::profile::disable();
  tessel::profile::clear();
}
BENCHMARK(enabled_scope);

}  // namespace

BENCHMARK_MAIN();
