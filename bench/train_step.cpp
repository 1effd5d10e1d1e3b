// One training step of a 784-256-10 MLP (relu, softmax cross-entropy with integer labels, Adam 1e-3) at
// batch 128 in f32: tessel's single jitted step against the same step in libtorch (Debian's
// libtorch-dev, the same thread count) and against the step's GEMM flops at the measured FMA peak.
//
//   build/bench/bench_train_step --benchmark_format=json
//
// Counters: vs_libtorch (libtorch time / tessel time: > 1 is faster), of_fma_peak and of_fma_peak_median
// (the step's GEMM flops per second in tessel's fastest and median block over the machine's FMA peak,
// measured in the same run), best_step_seconds and median_step_seconds (tessel's step in those blocks). PyTorch from Python is
// bench/torch_train.py (bench/compare_torch runs both).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "mlp_step.hpp"
#include "race.hpp"

namespace {
using namespace mlp_step;

// The step's GEMMs: the forward's two, the weight gradients' two, and the hidden layer's input gradient
// (the first layer's input gradient is not needed).
constexpr double gemm_flops = 2.0 * batch * (2 * (in * hidden + hidden * classes) + hidden * classes);

void BM_TrainStep(benchmark::State& state) {
  const std::size_t threads = tessel::kernels::thread_pool::host().size();
  // tessel
  inputs data = make_inputs();
  auto& params = data.params;
  const auto& x = data.x;
  const auto& y = data.y;
  auto opt_state = optimizer{}.init(params);
  const auto step = tessel::jit(train_step{});
  float loss = 0;
  auto ours = [&] {  // parameters and optimizer state updated in place (donated buffers)
    auto [p, s, l] = step(tessel::donate(params), tessel::donate(opt_state), x, y);
    params = std::move(p);
    opt_state = std::move(s);
    loss = l[0];
  };

  // libtorch, the same model, data and optimizer
  torch::set_num_threads(static_cast<int>(threads));
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, classes));
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
  const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data()), {batch, in}, torch::kFloat32).clone();
  std::vector<std::int64_t> labels(batch);
  for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int64_t>(i % classes);
  const torch::Tensor ty = torch::tensor(labels, torch::kInt64);
  auto peer = [&] {
    adam.zero_grad();
    torch::Tensor l = torch::nn::functional::cross_entropy(net->forward(tx), ty);
    l.backward();
    adam.step();
  };

  const double peak_flops = gemm_flops * 20;  // a block of register-only work as long as ~20 steps
  auto peak = [&] { tessel_bench::fma_f32_loop(static_cast<std::uint64_t>(peak_flops), threads); };

  tessel_bench::race r(3);
  const int reps = tessel_bench::reps_for(tessel_bench::time_once(ours), 20e-3);
  const int peer_reps = tessel_bench::reps_for(tessel_bench::time_once(peer), 20e-3);
  tessel_bench::time_once(peak);
  for (auto _ : state) {
    state.SetIterationTime(r.run(0, ours, reps));
    r.run(1, peer, peer_reps);
    r.run_settled(2, peak, 1, peak_flops / gemm_flops);  // seconds per step's worth of flops at peak
  }
  state.counters["vs_libtorch"] = r.speedup(0, 1);
  state.counters["of_fma_peak"] = r.best(2) / r.best(0);
  state.counters["of_fma_peak_median"] = r.best(2) / r.median(0);  // the figure: a typical block
  state.counters["best_step_seconds"] = r.best(0);
  state.counters["median_step_seconds"] = r.median(0);
  state.counters["threads"] = static_cast<double>(threads);
  state.counters["loss"] = loss;
}
BENCHMARK(BM_TrainStep)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(tessel_bench::rounds);

}  // namespace

BENCHMARK_MAIN();
