// Collectives between a mesh's devices on this host: all-reduce (psum), all-gather and reduce-scatter
// (psum_scatter) of 4 KiB to 64 MiB across 2 and 4 devices, reported as nccl-tests do (doc/PERFORMANCE.md):
// algbw = S / t and busbw = algbw x 2(N-1)/N (all-reduce) or (N-1)/N (the others), S the per-device buffer
// of an all-reduce, the whole gathered array of an all-gather or reduce-scatter. Beside them, in the same
// run: the machine's copy bandwidth (memcpy of S) and the alpha-beta prediction with alpha and beta
// measured here (alpha from a 4-byte all-reduce, beta from the largest copy), SHARDING.md §5.
// OpenMPI's MPI_Allreduce on 2 ranks is bench/mpi_allreduce.cpp; bench/collectives.sh runs both.
//
//   bench/collectives.sh build/bench
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

enum class op { all_reduce, all_gather, reduce_scatter };

// One call of the collective on every device of a mesh of D; S bytes as nccl-tests count them.
template <std::size_t D, std::size_t S, op Op>
struct collective {
  static constexpr std::size_t n = S / 4;  // f32 elements of the whole buffer
  using M = mesh<axis<"d", D>>;
  static auto make() {
    if constexpr (Op == op::all_reduce) return shard_map<M, specs<P<"d">>, P<"d">>([](auto b) { return psum<"d">(b); });
    else if constexpr (Op == op::all_gather) return shard_map<M, specs<P<"d">>, P<"d">>([](auto b) { return all_gather<M, "d", 1, true>(b); });
    else return shard_map<M, specs<P<"d">>, P<"d">>([](auto b) { return psum_scatter<M, "d", 1, true>(b); });
  }
  // The global input: each device's operand is a row (all-reduce, reduce-scatter: n; all-gather: n / D).
  using input = tensor<float, shape<D, Op == op::all_gather ? n / D : n>>;
};

template <std::size_t D, std::size_t S, op Op>
void BM_collective(benchmark::State& state) {
  using c = collective<D, S, Op>;
  const auto f = c::make();
  typename c::input x{};
  for (std::size_t i = 0; i < c::input::size; ++i) x.data()[i] = static_cast<float>(i % 7);
  for (int warm = 0; warm < 3; ++warm) benchmark::DoNotOptimize(f(x));
  for (auto _ : state) benchmark::DoNotOptimize(f(x));
  const double factor = Op == op::all_reduce ? 2.0 * (D - 1) / D : 1.0 * (D - 1) / D;
  state.counters["algbw_GBps"] = benchmark::Counter(static_cast<double>(S) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["busbw_GBps"] = benchmark::Counter(static_cast<double>(S) * factor * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes"] = static_cast<double>(S);
  state.counters["devices"] = D;
}

// memcpy of S bytes: the machine's copy bandwidth at this size.
template <std::size_t S>
void BM_copy(benchmark::State& state) {
  std::vector<char> from(S, 1), to(S);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), S);
    benchmark::ClobberMemory();
  }
  state.counters["copy_GBps"] = benchmark::Counter(static_cast<double>(S) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes"] = static_cast<double>(S);
}

constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;

#define TESSEL_COLLECTIVE_SIZES(D, OP)                                               \
  BENCHMARK(BM_collective<D, 4 * KiB, OP>)->UseRealTime()->MinTime(0.2);            \
  BENCHMARK(BM_collective<D, 64 * KiB, OP>)->UseRealTime()->MinTime(0.2);           \
  BENCHMARK(BM_collective<D, 1 * MiB, OP>)->UseRealTime()->MinTime(0.2);            \
  BENCHMARK(BM_collective<D, 16 * MiB, OP>)->UseRealTime()->MinTime(0.2);           \
  BENCHMARK(BM_collective<D, 64 * MiB, OP>)->UseRealTime()->MinTime(0.2);

// The latency term: a 4-byte all-reduce.
BENCHMARK(BM_collective<2, 4, op::all_reduce>)->UseRealTime()->MinTime(0.2);
BENCHMARK(BM_collective<4, 16, op::all_reduce>)->UseRealTime()->MinTime(0.2);
TESSEL_COLLECTIVE_SIZES(2, op::all_reduce)
TESSEL_COLLECTIVE_SIZES(4, op::all_reduce)
TESSEL_COLLECTIVE_SIZES(2, op::all_gather)
TESSEL_COLLECTIVE_SIZES(4, op::all_gather)
TESSEL_COLLECTIVE_SIZES(2, op::reduce_scatter)
TESSEL_COLLECTIVE_SIZES(4, op::reduce_scatter)
BENCHMARK(BM_copy<4 * KiB>)->MinTime(0.2);
BENCHMARK(BM_copy<64 * KiB>)->MinTime(0.2);
BENCHMARK(BM_copy<1 * MiB>)->MinTime(0.2);
BENCHMARK(BM_copy<16 * MiB>)->MinTime(0.2);
BENCHMARK(BM_copy<64 * MiB>)->MinTime(0.2);

}  // namespace

BENCHMARK_MAIN();
