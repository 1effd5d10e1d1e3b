// bf16 GEMM C = A B (bf16 operands and result, f32 accumulation), square N x N, against oneDNN's bf16
// matmul (dnnl::matmul, bf16 src/weights/dst) and against the measured vdpbf16ps peak (bf16_peak.cpp),
// each ratio from the same run (race.hpp), and where the CPU has AMX against the tile unit's peak too.
// Two threads: jit runs on the host pool, one thread per hardware thread. The f32 FMA peak is reported
// too: tessel multiplies bf16 x bf16 on the AMX tiles, with vdpbf16ps or widened to f32 while packing,
// whichever it measured faster on the running CPU (on a Xeon with AMX vdpbf16ps runs at half the f32 FMA
// rate, on an AMD EPYC Zen 4 at twice it); TESSEL_BF16_PRODUCTS=widened, dpbf16 or amx forces one. The
// label names the path taken.
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include <tessel/ops.hpp>
#include <tessel/tessel.hpp>
#include <tessel/jit.hpp>
#include <tessel/kernels/gemm.hpp>
#include <tessel/kernels/machine.hpp>

#include "race.hpp"

namespace {
using tessel::bfloat16;
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel_bench::race;

constexpr int threads = 2;
const auto matmul_op = [](auto a, auto b) { return tessel::matmul(a, b); };

template <class T>
T random_tensor(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  T t;
  for (auto& v : t) v = bfloat16(d(gen));
  return t;
}

struct onednn_matmul {
  onednn_matmul(std::size_t n, const bfloat16* a, const bfloat16* b, bfloat16* c) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const auto d = static_cast<dnnl::memory::dim>(n);
    const dnnl::memory::desc md({d, d}, dt::bf16, tag::ab);
    src = dnnl::memory(md, engine, const_cast<bfloat16*>(a));
    weights = dnnl::memory(md, engine, const_cast<bfloat16*>(b));
    dst = dnnl::memory(md, engine, c);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), engine);
    implementation = pd.impl_info_str();
    prim = dnnl::matmul(pd);
  }
  void operator()() {
    prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
  }
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory src, weights, dst;
  dnnl::matmul prim;
  std::string implementation;
};

template <std::size_t N>
void bf16_gemm(benchmark::State& state) {
  using sq = shape<N, N>;
  const auto a = random_tensor<tensor<bfloat16, sq>>(1);
  const auto b = random_tensor<tensor<bfloat16, sq>>(2);
  tensor<bfloat16, sq> c;
  omp_set_num_threads(threads);
  onednn_matmul peer(N, a.data(), b.data(), c.data());
  const double flops = 2.0 * N * N * N;
  const double peak_flops = std::max(flops, 2e9);  // blocks of >= 5 ms: both pool threads get going
  auto ours = [&] {
    auto y = jit(matmul_op)(a, b);
    benchmark::DoNotOptimize(y.data());
  };
  {
    const auto y = jit(matmul_op)(a, b);
    peer();
    double most = 0;
    for (std::size_t i = 0; i < N * N; ++i)
      most = std::max(most, std::abs(static_cast<double>(static_cast<float>(y[i])) - static_cast<float>(c[i])) /
                                (1 + std::abs(static_cast<float>(c[i]))));
    if (most > 2e-2) state.SkipWithError("tessel and oneDNN disagree");
  }
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(ours));
  const bool tiles = tessel::kernels::this_machine().amx_bf16;
  race r(5);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, peer, reps);
    r.run_settled(2, [&] { tessel_bench::dpbf16_loop(static_cast<std::uint64_t>(peak_flops), threads); }, 1, peak_flops / flops);
    r.run_settled(3, [&] { tessel_bench::fma_f32_loop(static_cast<std::uint64_t>(peak_flops), threads); }, 1, peak_flops / flops);
    if (tiles) r.run_settled(4, [&] { tessel_bench::amx_loop(static_cast<std::uint64_t>(peak_flops), threads); }, 1, peak_flops / flops);
  }
  // The path tessel's bf16 products took and the ISA oneDNN chose (AMX would say amx).
  state.SetLabel(std::string("tessel: ") + tessel::kernels::hwy_gemm_bf16_path() + ", onednn: " + peer.implementation);
  if (tiles) {
    state.counters["of_amx_peak"] = r.speedup(0, 4);
    state.counters["onednn_of_amx_peak"] = r.speedup(1, 4);
  }
  state.counters["GFLOPs"] = flops / r.best(0) / 1e9;
  state.counters["vs_onednn_bf16"] = r.speedup(0, 1);
  state.counters["of_bf16_peak"] = r.speedup(0, 2);
  state.counters["of_fma_peak"] = r.speedup(0, 3);
  state.counters["onednn_of_bf16_peak"] = r.speedup(1, 2);
  state.counters["bf16_peak_GFLOPs"] = flops / r.best(2) / 1e9;
}

BENCHMARK_TEMPLATE(bf16_gemm, 256)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bf16_gemm, 512)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bf16_gemm, 1024)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bf16_gemm, 2048)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
