#pragma once
// The examples' train steps as XLA runs them (tests/export/run_xla.py --steps): a step is run for a few
// steps in tessel, and its StableHLO module, its first parameters and optimizer state, every step's batch
// and learning rate, and tessel's results after every step are written for the runner, which runs the
// module as many steps under XLA, its own results carried from step to step, and compares them with
// tessel's after each.
//
// DIR/step.mlir      export_stablehlo(step, params, state, data...)
// DIR/plan.txt       dump(step, ...) of a sharded step: the collectives of tessel's plan
// DIR/carried<j>.npy the leaves of params and state before the first step (the carried arguments)
// DIR/data<k>_<j>.npy step k's other arguments (batch, learning rate)
// DIR/out<k>_<j>.npy tessel's results of step k: params, state, then the step's own outputs
// DIR/steps.json     {"steps": K, "params": parameter leaves, "carried": leaves carried (parameters, then
//                    optimizer state), "data": leaves per step (the last: the learning rate)}
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>

#include <tessel/dump.hpp>
#include <tessel/export.hpp>
#include <tessel/io/npy.hpp>

namespace tessel::export_test {

template <class Tree>
std::size_t write_leaves(const std::filesystem::path& dir, const std::string& prefix, const Tree& t, std::size_t next = 0) {
  tree::for_each(t, [&](const auto& leaf) { io::write_npy(dir / (prefix + std::to_string(next++) + ".npy"), leaf); });
  return next;
}

// Runs `steps` steps of `step` from (params, state); batch(k) gives step k's other arguments as a tuple.
template <class Step, class P, class S, class Batch>
void write_steps(const std::filesystem::path& dir, const Step& step, P params, S state, Batch batch, int steps) {
  std::filesystem::create_directories(dir);
  const std::size_t param_leaves = write_leaves(dir, "carried", params);
  const std::size_t carried = write_leaves(dir, "carried", state, param_leaves);
  std::size_t data = 0;
  for (int k = 0; k < steps; ++k) {
    const auto args = batch(k);
    if (k == 0) {
      std::apply([&](const auto&... a) { std::ofstream(dir / "step.mlir") << export_stablehlo(step, params, state, a...); }, args);
      if constexpr (dump_detail::Sharded<Step>)
        std::apply([&](const auto&... a) { std::ofstream(dir / "plan.txt") << dump(step, params, state, a...); }, args);
    }
    data = write_leaves(dir, "data" + std::to_string(k) + "_", args);
    auto results = std::apply([&](const auto&... a) { return step(params, state, a...); }, args);
    write_leaves(dir, "out" + std::to_string(k) + "_", results);
    params = std::get<0>(results);
    state = std::get<1>(results);
  }
  std::ofstream(dir / "steps.json") << "{\"steps\": " << steps << ", \"params\": " << param_leaves << ", \"carried\": " << carried
                                     << ", \"data\": " << data << "}\n";
}

}  // namespace tessel::export_test
