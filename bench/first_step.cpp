// Time to the first step, tessel's side: bench/run_all times the compile of this file (the step's unit:
// tracing, differentiation and planning all happen in the compiler) and this program's first call of
// the MLP step of bench/mlp_step.hpp, which it prints as JSON. JAX's side (trace, compile and first call
// of the same step) is bench/peers.py's jax_first_step.
#include <chrono>
#include <cstdio>
#include <utility>

#include "mlp_step.hpp"

int main() {
  using namespace mlp_step;
  inputs data = make_inputs();
  auto opt_state = optimizer{}.init(data.params);
  const auto start = std::chrono::steady_clock::now();
  const auto step = tessel::jit(train_step{});
  auto [params, state, loss] = step(tessel::donate(data.params), tessel::donate(opt_state), data.x, data.y);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"first_call_seconds\": %.6f, \"loss\": %.6f}\n", seconds, static_cast<double>(loss[0]));
  return 0;
}
