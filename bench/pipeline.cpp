// Pipeline schedules measured against what they predict (transform/pipeline_schedule.hpp): for GPipe and
// 1F1B over S = 2 and 4 stages and M = 4 and 8 microbatches, the bubble taken from the run's own timeline
// (pipeline_report::bubble: the devices' idle share between the first step and the last) beside the
// schedule's, and the bytes of activations device 0 kept, beside one stage on one thread (S = 1: every
// layer on one device, same microbatches) for the speed-up. The model: 8 layers of tanh(x w + b) at width
// 512, microbatches of 64 rows. A stage is a thread: S = 4 needs 4 free cores to mean anything (check
// `nproc`; on fewer the threads share cores and the measured bubble is not the schedule's).
//
//   build/bench/bench/bench_pipeline --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <cmath>

#include "tessel/pipeline.hpp"
#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

constexpr std::size_t layers = 8, width = 512, rows = 64;

template <template <class, class> class T = tensor>
struct stack {
  BOOST_HANA_DEFINE_STRUCT(stack, (T<float, shape<layers, width, width>>, w), (T<float, shape<layers, width>>, b));
};
constexpr auto stage = [](const auto& p, auto x) {
  constexpr std::size_t k = std::remove_cvref_t<decltype(p.w)>::shape_type::dims[0];
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((x = tanh(matmul(x, reshape<shape<width, width>>(slice_in_dim<0, I, I + 1>(p.w))) +
               reshape<shape<width>>(slice_in_dim<0, I, I + 1>(p.b)))),
     ...);
  }(std::make_index_sequence<k>{});
  return x;
};
constexpr auto loss = [](auto y, auto t) { return mean((y - t) * (y - t)); };

template <class Sched, std::size_t S, std::size_t M>
void BM_pipeline(benchmark::State& state) {
  const auto pipe = pipeline<mesh<axis<"stage", S>>, "stage", Sched, M>(stage, loss);
  stack<> p;
  for (std::size_t i = 0; i < p.w.size; ++i) p.w.data()[i] = 0.04f * std::sin(0.7f * static_cast<float>(i));
  tensor<float, shape<M * rows, width>> x, t;
  for (std::size_t i = 0; i < x.size; ++i) x.data()[i] = std::sin(0.37f * static_cast<float>(i)), t.data()[i] = 0.5f;
  benchmark::DoNotOptimize(pipe.run(p, x, t));  // traced and planned: not timed
  double measured = 0;
  std::size_t kept = 0;
  for (auto _ : state) {
    auto r = pipe.run(p, x, t);
    measured += r.report.bubble();
    kept = r.report.peak_kept_bytes[0];
    benchmark::DoNotOptimize(r.value);
  }
  state.counters["bubble_predicted"] = decltype(pipe)::table.bubble();
  state.counters["bubble_measured"] = measured / static_cast<double>(state.iterations());
  state.counters["kept_bytes_device0"] = static_cast<double>(kept);
  state.counters["rows_per_s"] = benchmark::Counter(static_cast<double>(M * rows), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_pipeline<schedules::gpipe, 1, 8>)->Name("one_stage/M:8")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::gpipe, 2, 4>)->Name("gpipe/S:2/M:4")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::gpipe, 2, 8>)->Name("gpipe/S:2/M:8")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::one_f_one_b, 2, 4>)->Name("1f1b/S:2/M:4")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::one_f_one_b, 2, 8>)->Name("1f1b/S:2/M:8")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::zero_bubble, 2, 8>)->Name("zero_bubble/S:2/M:8")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::gpipe, 4, 4>)->Name("gpipe/S:4/M:4")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::gpipe, 4, 8>)->Name("gpipe/S:4/M:8")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::one_f_one_b, 4, 4>)->Name("1f1b/S:4/M:4")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pipeline<schedules::one_f_one_b, 4, 8>)->Name("1f1b/S:4/M:8")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
