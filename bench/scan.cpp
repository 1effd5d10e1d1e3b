// scan against the same loop written in C++: a 1000-step Elman cell h = tanh(h W + x U + b), 256 wide,
// run as one jitted scan (the body traced once, its kernels run 1000 times by the executor) against a C++
// loop calling the jitted cell once per step (the x rows prepared beforehand, not timed). The ratio
// scan time / loop time, minus 1, is the scan's overhead per step (target: under 5%); both measured in
// the same run (race.hpp). Also grad through the scan (backprop through time: the reverse scan reads the
// residuals the forward scan stacked) against the forward scan, to show what a training step costs, and
// against the same grad with the cell checkpointed (re-run in each backward step).
#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <tuple>

#include <tessel/ops.hpp>
#include <tessel/transform/grad.hpp>
#include <tessel/jit.hpp>
#include <tessel/transform/scan.hpp>
#include <tessel/transform/remat.hpp>

#include "race.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel_bench::race;

constexpr std::size_t steps = 1000, width = 256;
using row = tensor<float, shape<1, width>>;
using matrix = tensor<float, shape<width, width>>;
using bias = tensor<float, shape<width>>;
using sequence = tensor<float, shape<steps, 1, width>>;

template <class T>
T random_tensor(unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  T t;
  for (auto& v : t) v = d(gen);
  return t;
}

constexpr auto cell = [](auto h, auto x, auto w, auto u, auto b) {
  return tessel::tanh(tessel::matmul(h, w) + tessel::matmul(x, u) + b);
};

constexpr auto run_scan = [](auto h, auto xs, auto w, auto u, auto b) {
  return std::get<0>(tessel::scan([&](auto h, auto x) { return std::tuple{cell(h, x, w, u, b), std::tuple<>{}}; }, h, xs));
};

constexpr auto bptt_loss = [](auto h, auto xs, auto w, auto u, auto b) {
  auto [last, hs] = tessel::scan([&](auto h, auto x) {
    auto n = cell(h, x, w, u, b);
    return std::tuple{n, n};
  }, h, xs);
  return tessel::mean(hs * hs) + tessel::sum(last) * 0.0f;
};

struct inputs {
  row h0 = random_tensor<row>(1, -1, 1);
  sequence xs = random_tensor<sequence>(2, -1, 1);
  matrix w = random_tensor<matrix>(3, -0.06f, 0.06f);
  matrix u = random_tensor<matrix>(4, -0.06f, 0.06f);
  bias b = random_tensor<bias>(5, -0.1f, 0.1f);
  std::vector<row> x_rows;
  inputs() {
    x_rows.resize(steps);
    for (std::size_t i = 0; i < steps; ++i) std::memcpy(x_rows[i].data(), xs.data() + i * width, width * sizeof(float));
  }
};

void scan_vs_loop(benchmark::State& state) {
  static const inputs in;
  const auto scanned = tessel::jit(run_scan);
  const auto step = tessel::jit(cell);
  auto loop = [&] {
    row h = in.h0;
    for (std::size_t i = 0; i < steps; ++i) h = step(h, in.x_rows[i], in.w, in.u, in.b);
    return h;
  };
  // Same kernels, same order: the results agree bit for bit.
  const row a = scanned(in.h0, in.xs, in.w, in.u, in.b);
  const row e = loop();
  if (std::memcmp(a.data(), e.data(), sizeof(float) * width) != 0) state.SkipWithError("scan and loop differ");
  race r(2);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, [&] { benchmark::DoNotOptimize(scanned(in.h0, in.xs, in.w, in.u, in.b)); }, 2));
    r.run(1, [&] { benchmark::DoNotOptimize(loop()); }, 2);
  }
  state.counters["us_per_step_scan"] = r.best(0) / steps * 1e6;
  state.counters["us_per_step_loop"] = r.best(1) / steps * 1e6;
  state.counters["scan_overhead_pct"] = (r.best(0) / r.best(1) - 1) * 100;
}
BENCHMARK(scan_vs_loop)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);

void bptt_vs_forward(benchmark::State& state) {
  static const inputs in;
  const auto forward = tessel::jit(run_scan);
  const auto train = tessel::jit(tessel::grad<0, 2, 3, 4>(bptt_loss));
  race r(2);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, [&] { benchmark::DoNotOptimize(train(in.h0, in.xs, in.w, in.u, in.b)); }, 1));
    r.run(1, [&] { benchmark::DoNotOptimize(forward(in.h0, in.xs, in.w, in.u, in.b)); }, 2);
  }
  state.counters["grad_over_forward"] = r.best(0) / r.best(1);
}
BENCHMARK(bptt_vs_forward)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);

// unroll U: U copies of the cell per loop iteration (transform/scan.hpp), against unroll 1 in the same run;
// the results are the same bit for bit (checked), the time per step shows the per-iteration cost saved.
template <int U>
constexpr auto run_scan_unrolled = [](auto h, auto xs, auto w, auto u, auto b) {
  return std::get<0>(tessel::scan([&](auto h, auto x) { return std::tuple{cell(h, x, w, u, b), std::tuple<>{}}; }, h, xs,
                                  {.unroll = U}));
};
template <int U>
constexpr auto bptt_loss_unrolled = [](auto h, auto xs, auto w, auto u, auto b) {
  auto [last, hs] = tessel::scan([&](auto h, auto x) {
    auto n = cell(h, x, w, u, b);
    return std::tuple{n, n};
  }, h, xs, {.unroll = U});
  return tessel::mean(hs * hs) + tessel::sum(last) * 0.0f;
};

template <int U>
void scan_unroll(benchmark::State& state) {
  static const inputs in;
  const auto plain = tessel::jit(run_scan);
  const auto unrolled = tessel::jit(run_scan_unrolled<U>);
  const row a = unrolled(in.h0, in.xs, in.w, in.u, in.b);
  const row e = plain(in.h0, in.xs, in.w, in.u, in.b);
  if (std::memcmp(a.data(), e.data(), sizeof(float) * width) != 0) state.SkipWithError("unrolled scan differs");
  race r(2);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, [&] { benchmark::DoNotOptimize(unrolled(in.h0, in.xs, in.w, in.u, in.b)); }, 2));
    r.run(1, [&] { benchmark::DoNotOptimize(plain(in.h0, in.xs, in.w, in.u, in.b)); }, 2);
  }
  state.counters["us_per_step"] = r.best(0) / steps * 1e6;
  state.counters["us_per_step_unroll1"] = r.best(1) / steps * 1e6;
}
BENCHMARK_TEMPLATE(scan_unroll, 1)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(scan_unroll, 2)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(scan_unroll, 4)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(scan_unroll, 8)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);

template <int U>
void bptt_unroll(benchmark::State& state) {
  static const inputs in;
  const auto train = tessel::jit(tessel::grad<0, 2, 3, 4>(bptt_loss_unrolled<U>));
  race r(1);
  for (auto _ : state) state.SetIterationTime(r.run(0, [&] { benchmark::DoNotOptimize(train(in.h0, in.xs, in.w, in.u, in.b)); }, 1));
  state.counters["us_per_step"] = r.best(0) / steps * 1e6;
}
BENCHMARK_TEMPLATE(bptt_unroll, 1)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bptt_unroll, 4)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bptt_unroll, 8)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);

// grad through the scan with saved residuals (the default: the cell runs once per step, its tanh output
// is the stacked y already) against the cell under checkpoint (nothing_saveable: only the carries are
// stacked, the cell runs again in each backward step). Counters: time ratio, both plans' peak arena bytes.
constexpr auto bptt_loss_checkpointed = [](auto h, auto xs, auto w, auto u, auto b) {
  auto [last, hs] = tessel::scan([&](auto h, auto x) {
    auto n = tessel::checkpoint(cell)(h, x, w, u, b);
    return std::tuple{n, n};
  }, h, xs);
  return tessel::mean(hs * hs) + tessel::sum(last) * 0.0f;
};

void bptt_saved_vs_checkpointed(benchmark::State& state) {
  static const inputs in;
  const auto saved = tessel::jit(tessel::grad<0, 2, 3, 4>(bptt_loss));
  const auto recomputed = tessel::jit(tessel::grad<0, 2, 3, 4>(bptt_loss_checkpointed));
  const auto a = std::get<1>(saved(in.h0, in.xs, in.w, in.u, in.b));
  const auto e = std::get<1>(recomputed(in.h0, in.xs, in.w, in.u, in.b));
  for (std::size_t i = 0; i < a.size; ++i)
    if (std::abs(a[i] - e[i]) > 1e-6f + 1e-5f * std::abs(e[i])) state.SkipWithError("checkpointed gradient differs");
  race r(2);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, [&] { benchmark::DoNotOptimize(saved(in.h0, in.xs, in.w, in.u, in.b)); }, 1));
    r.run(1, [&] { benchmark::DoNotOptimize(recomputed(in.h0, in.xs, in.w, in.u, in.b)); }, 1);
  }
  using saved_t = decltype(saved)::traced_for<row, sequence, matrix, matrix, bias>;
  using recomputed_t = decltype(recomputed)::traced_for<row, sequence, matrix, matrix, bias>;
  state.counters["ms_saved"] = r.best(0) * 1e3;
  state.counters["ms_checkpointed"] = r.best(1) * 1e3;
  state.counters["checkpointed_over_saved"] = r.best(1) / r.best(0);
  state.counters["arena_kib_saved"] = static_cast<double>(saved_t::plan.arena_bytes) / 1024;
  state.counters["arena_kib_checkpointed"] = static_cast<double>(recomputed_t::plan.arena_bytes) / 1024;
}
BENCHMARK(bptt_saved_vs_checkpointed)->UseManualTime()->Iterations(tessel_bench::rounds)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
