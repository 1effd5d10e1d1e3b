#pragma once
// A traced program frozen into a constant: the node table, the outputs and the parameter count.

#include <array>
#include <cstddef>

#include "tessel/ir/graph.hpp"

namespace tessel::ir {

template <std::size_t N, std::size_t Outputs>
struct program {
  static constexpr std::size_t size = N;
  static constexpr std::size_t output_count = Outputs;
  std::array<node, N> nodes{};
  std::array<int, Outputs> outputs{};
  int parameter_count = 0;

  static constexpr program freeze(const graph_builder& g) {
    program p;
    for (std::size_t i = 0; i < N; ++i) p.nodes[i] = g[static_cast<int>(i)];
    for (std::size_t i = 0; i < Outputs; ++i) p.outputs[i] = g.outputs[i];
    p.parameter_count = g.parameter_count;
    return p;
  }
};

}  // namespace tessel::ir
