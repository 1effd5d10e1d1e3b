#pragma once
// A traced program frozen into a constant: the node table, the outputs and the parameter count, and the
// control-flow constructs (scan, switch) with their regions (see ir/graph.hpp), flattened into arrays.

#include <algorithm>
#include <array>
#include <cstddef>

#include "tessel/ir/graph.hpp"

namespace tessel::ir {

inline constexpr std::size_t max_constructs = 16;
inline constexpr std::size_t max_regions = 32;

// Lists are ranges of program::region_ints.
struct frozen_region {
  int construct = -1;
  int params = 0, param_count = 0;
  int results = 0, result_count = 0;
};

struct frozen_construct {
  construct_kind kind = construct_kind::scan;
  bool reverse = false;
  int length = 0, carries = 0, index = -1, parent = -1;
  int first_region = 0, region_count = 0;
  int inputs = 0, input_count = 0;
  int outputs = 0, output_count = 0;
};

// Reached only when a program has more constructs, regions or region entries than a program holds: the
// compiler names this function in its error.
inline void too_many_control_flow_constructs_for_one_program() {}

template <std::size_t N, std::size_t Outputs>
struct program {
  static constexpr std::size_t size = N;
  static constexpr std::size_t output_count = Outputs;
  // Every input, parameter, result and output of a region is a node (a scan's inputs pair with its
  // parameters and its results with its outputs), so this holds any program without many-way switches.
  static constexpr std::size_t region_int_capacity = std::min<std::size_t>(2 * N + 32, 2048);
  std::array<node, N> nodes{};
  std::array<int, Outputs> outputs{};
  int parameter_count = 0;
  int construct_count = 0, region_count = 0;
  std::array<frozen_construct, max_constructs> constructs{};
  std::array<frozen_region, max_regions> regions{};
  std::array<int, region_int_capacity> region_ints{};

  constexpr int region_int(int at) const { return region_ints[static_cast<std::size_t>(at)]; }
  constexpr const frozen_construct& construct(int c) const { return constructs[static_cast<std::size_t>(c)]; }
  constexpr const frozen_region& region(int r) const { return regions[static_cast<std::size_t>(r)]; }

  static constexpr program freeze(const graph_builder& g) {
    program p;
    for (std::size_t i = 0; i < N; ++i) p.nodes[i] = g[static_cast<int>(i)];
    for (std::size_t i = 0; i < Outputs; ++i) p.outputs[i] = g.outputs[i];
    p.parameter_count = g.parameter_count;
    if (g.constructs.size() > max_constructs || g.regions.size() > max_regions) too_many_control_flow_constructs_for_one_program();
    std::size_t next = 0;
    auto put = [&](const std::vector<int>& list, int& begin, int& count) {
      if (next + list.size() > region_int_capacity) too_many_control_flow_constructs_for_one_program();
      begin = static_cast<int>(next);
      count = static_cast<int>(list.size());
      for (int v : list) p.region_ints[next++] = v;
    };
    p.construct_count = static_cast<int>(g.constructs.size());
    p.region_count = static_cast<int>(g.regions.size());
    for (std::size_t c = 0; c < g.constructs.size(); ++c) {
      const construct_record& in = g.constructs[c];
      frozen_construct& out = p.constructs[c];
      out.kind = in.kind;
      out.reverse = in.reverse;
      out.length = in.length;
      out.carries = in.carries;
      out.index = in.index;
      out.parent = in.parent;
      out.first_region = in.first_region;
      out.region_count = in.region_count;
      put(in.inputs, out.inputs, out.input_count);
      put(in.outputs, out.outputs, out.output_count);
    }
    for (std::size_t r = 0; r < g.regions.size(); ++r) {
      p.regions[r].construct = g.regions[r].construct;
      put(g.regions[r].params, p.regions[r].params, p.regions[r].param_count);
      put(g.regions[r].results, p.regions[r].results, p.regions[r].result_count);
    }
    return p;
  }
};

}  // namespace tessel::ir
