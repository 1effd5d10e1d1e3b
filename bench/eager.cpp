// Eager calls against jit: what one op on concrete tensors costs (a one-op program, its result allocated
// per call) against the same op jitted and against a C++ loop into a buffer allocated once (the floor), for
// a tiny, a cache-sized and a memory-sized tensor; and a chain of three eager ops (three programs, two
// temporaries) against the chain jitted into one fused loop.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <random>

#include <tessel/jit.hpp>
#include <tessel/ops.hpp>

namespace {
using tessel::shape;
using tessel::tensor;

template <std::size_t N>
using vec = tensor<float, shape<N>>;

template <std::size_t N>
vec<N> random_vec(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  vec<N> t;
  for (auto& v : t) v = d(gen);
  return t;
}

template <std::size_t N>
void set_bytes(benchmark::State& state, int tensors) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * tensors * static_cast<std::int64_t>(N * sizeof(float)));
}

template <std::size_t N>
void BM_AddEager(benchmark::State& state) {
  const auto a = random_vec<N>(1), b = random_vec<N>(2);
  for (auto _ : state) {
    auto c = a + b;
    benchmark::DoNotOptimize(c.data());
  }
  set_bytes<N>(state, 3);
}

template <std::size_t N>
void BM_AddJit(benchmark::State& state) {
  const auto a = random_vec<N>(1), b = random_vec<N>(2);
  const auto add = tessel::jit([](auto x, auto y) { return x + y; });
  for (auto _ : state) {
    auto c = add(a, b);
    benchmark::DoNotOptimize(c.data());
  }
  set_bytes<N>(state, 3);
}

template <std::size_t N>
void BM_AddLoop(benchmark::State& state) {
  const auto a = random_vec<N>(1), b = random_vec<N>(2);
  vec<N> c;
  for (auto _ : state) {
    for (std::size_t i = 0; i < N; ++i) c[i] = a[i] + b[i];
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_bytes<N>(state, 3);
}

template <std::size_t N>
void BM_ChainEager(benchmark::State& state) {
  const auto a = random_vec<N>(1), b = random_vec<N>(2);
  for (auto _ : state) {
    auto c = tessel::exp(a * b + a);
    benchmark::DoNotOptimize(c.data());
  }
  set_bytes<N>(state, 3);
}

template <std::size_t N>
void BM_ChainJit(benchmark::State& state) {
  const auto a = random_vec<N>(1), b = random_vec<N>(2);
  const auto chain = tessel::jit([](auto x, auto y) { return tessel::exp(x * y + x); });
  for (auto _ : state) {
    auto c = chain(a, b);
    benchmark::DoNotOptimize(c.data());
  }
  set_bytes<N>(state, 3);
}

constexpr std::size_t tiny = 16, cached = 16384, large = 1 << 22;
BENCHMARK(BM_AddEager<tiny>);
BENCHMARK(BM_AddJit<tiny>);
BENCHMARK(BM_AddLoop<tiny>);
BENCHMARK(BM_AddEager<cached>);
BENCHMARK(BM_AddJit<cached>);
BENCHMARK(BM_AddLoop<cached>);
BENCHMARK(BM_AddEager<large>);
BENCHMARK(BM_AddJit<large>);
BENCHMARK(BM_AddLoop<large>);
BENCHMARK(BM_ChainEager<cached>);
BENCHMARK(BM_ChainJit<cached>);
BENCHMARK(BM_ChainEager<large>);
BENCHMARK(BM_ChainJit<large>);
}  // namespace

BENCHMARK_MAIN();
