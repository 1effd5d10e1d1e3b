// f32 -> bf16 conversion of a large array against a plain copy of the same bytes in the same run:
// the ratio (counter "of_copy") says how close the scalar conversion is to memory speed.
#include <benchmark/benchmark.h>

#include <cstring>

#include <tessel/tessel.hpp>

namespace {
using big = tessel::shape<1 << 24>;

void copy_f32(benchmark::State& state) {
  auto src = tessel::tensor<float, big>::full(1.5f);
  tessel::tensor<float, big> dst;
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), big::size * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * big::size * 2 * sizeof(float));
}

void f32_to_bf16(benchmark::State& state) {
  auto src = tessel::tensor<float, big>::full(1.5f);
  for (auto _ : state) {
    auto dst = src.astype<tessel::bfloat16>();
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * big::size * (sizeof(float) + sizeof(tessel::bfloat16)));
}

BENCHMARK(copy_f32)->Unit(benchmark::kMillisecond);
BENCHMARK(f32_to_bf16)->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
