#pragma once
// A traced program frozen into a constant: the node table, the outputs and the parameter count, and the
// control-flow constructs (scan, switch) with their regions (see ir/graph.hpp), flattened into arrays.

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "tessel/core/fingerprint.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/ir/graph.hpp"

namespace tessel::ir {

// The arrays a frozen program keeps its control flow in. A trace that needs more is refused with
// capacity_error's message (transform/trace.hpp reports it), before freeze is reached.
inline constexpr std::size_t max_constructs = 64;
inline constexpr std::size_t max_regions = 128;
// Every input, parameter, result and output of a region is a node (a scan's inputs pair with its parameters
// and its results with its outputs), so this holds any program of N nodes without many-way switches.
constexpr std::size_t region_int_capacity(std::size_t nodes) { return std::min<std::size_t>(2 * nodes + 32, 4096); }

constexpr std::size_t region_ints_needed(const graph_builder& g) {
  std::size_t n = 0;
  for (const construct_record& c : g.constructs) n += c.inputs.size() + c.outputs.size();
  for (const region_record& r : g.regions) n += r.params.size() + r.results.size();
  return n;
}

// Empty when the traced program fits a frozen one; otherwise the sentence that says what does not.
constexpr message_builder capacity_error(const graph_builder& g) {
  message_builder m;
  if (g.constructs.size() > max_constructs || g.regions.size() > max_regions) {
    m << "tessel::jit: the program has " << g.constructs.size() << " control-flow constructs (scan, cond, switch, "
      << "fori_loop, including those transforms add) with " << g.regions.size() << " regions; one program holds at most "
      << max_constructs << " and " << max_regions << "; fix: jit the parts separately, or fold repeated loops into one scan";
  } else if (region_ints_needed(g) > region_int_capacity(g.size())) {
    m << "tessel::jit: the program's control flow passes " << region_ints_needed(g) << " values through its regions; "
      << "a program of " << g.size() << " nodes holds at most " << region_int_capacity(g.size())
      << "; fix: pass fewer values into each scan or switch (a tuple of leaves is one value each), or jit the parts separately";
  }
  return m;
}

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

template <std::size_t N, std::size_t Outputs>
struct program {
  static constexpr std::size_t size = N;
  static constexpr std::size_t output_count = Outputs;
  std::array<node, N> nodes{};
  std::array<int, Outputs> outputs{};
  int parameter_count = 0;
  int construct_count = 0, region_count = 0;
  std::array<frozen_construct, max_constructs> constructs{};
  std::array<frozen_region, max_regions> regions{};
  std::array<int, ir::region_int_capacity(N)> region_ints{};

  constexpr int region_int(int at) const { return region_ints[static_cast<std::size_t>(at)]; }
  constexpr const frozen_construct& construct(int c) const { return constructs[static_cast<std::size_t>(c)]; }
  constexpr const frozen_region& region(int r) const { return regions[static_cast<std::size_t>(r)]; }

  static constexpr program freeze(const graph_builder& g) {
    program p;
    for (std::size_t i = 0; i < N; ++i) p.nodes[i] = g[static_cast<int>(i)];
    for (std::size_t i = 0; i < Outputs; ++i) p.outputs[i] = g.outputs[i];
    p.parameter_count = g.parameter_count;
    // capacity_error(g) is empty here: traced_in checked it before freezing
    std::size_t next = 0;
    auto put = [&](const std::vector<int>& list, int& begin, int& count) {
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

// A program of any size seen through pointers: what is compiled once (the executor, the StableHLO writer)
// reads. Valid while the program it views lives (jit's programs are static constants).
struct program_view {
  const node* nodes = nullptr;
  std::size_t size = 0;
  const int* outputs = nullptr;
  std::size_t output_count = 0;
  int parameter_count = 0;
  int construct_count = 0, region_count = 0;
  const frozen_construct* constructs = nullptr;
  const frozen_region* regions = nullptr;
  const int* region_ints = nullptr;

  const node& operator[](int id) const { return nodes[static_cast<std::size_t>(id)]; }
  const frozen_construct& construct(int c) const { return constructs[static_cast<std::size_t>(c)]; }
  const frozen_region& region(int r) const { return regions[static_cast<std::size_t>(r)]; }
  int region_int(int at) const { return region_ints[static_cast<std::size_t>(at)]; }
};

// Adds a program to `f`: every node's primitive name, dtypes, shape, operands, varying axes and attributes,
// the outputs and the control flow. Two programs that differ in anything they compute differ here (but for
// a 2^-64 chance).
inline void add_program(fingerprint& f, const program_view& p) {
  for (std::size_t i = 0; i < p.size; ++i) {
    const node& n = p.nodes[i];
    f.add(n.prim->name);
    f.add(static_cast<std::uint64_t>(n.dtype) | static_cast<std::uint64_t>(n.operand_dtype) << 8 | std::uint64_t{n.arity} << 16 |
          std::uint64_t{n.varying} << 24 | std::uint64_t{n.shape.rank} << 32 | std::uint64_t{n.attr.count} << 40);
    for (std::size_t d = 0; d < n.shape.rank; ++d) f.add(n.shape.d[d]);
    for (std::size_t o = 0; o < n.arity; ++o) f.add(static_cast<std::uint64_t>(n.operands[o]));
    for (std::int64_t v : n.attr.ints) f.add(static_cast<std::uint64_t>(v));
    f.add(std::bit_cast<std::uint64_t>(n.attr.scalar));
  }
  for (std::size_t o = 0; o < p.output_count; ++o) f.add(static_cast<std::uint64_t>(p.outputs[o]));
  f.add(static_cast<std::uint64_t>(p.parameter_count));
  int ints = 0;  // how many of region_ints the constructs and regions use
  for (int c = 0; c < p.construct_count; ++c) {
    const frozen_construct& k = p.construct(c);
    for (int v : {static_cast<int>(k.kind), static_cast<int>(k.reverse), k.length, k.carries, k.index, k.parent, k.first_region,
                  k.region_count, k.inputs, k.input_count, k.outputs, k.output_count})
      f.add(static_cast<std::uint64_t>(v));
    ints = std::max({ints, k.inputs + k.input_count, k.outputs + k.output_count});
  }
  for (int r = 0; r < p.region_count; ++r) {
    const frozen_region& g = p.region(r);
    for (int v : {g.construct, g.params, g.param_count, g.results, g.result_count}) f.add(static_cast<std::uint64_t>(v));
    ints = std::max({ints, g.params + g.param_count, g.results + g.result_count});
  }
  for (int i = 0; i < ints; ++i) f.add(static_cast<std::uint64_t>(p.region_int(i)));
}

template <std::size_t N, std::size_t O>
constexpr program_view view_of(const program<N, O>& p) {
  return {.nodes = p.nodes.data(), .size = N, .outputs = p.outputs.data(), .output_count = O, .parameter_count = p.parameter_count,
          .construct_count = p.construct_count, .region_count = p.region_count, .constructs = p.constructs.data(),
          .regions = p.regions.data(), .region_ints = p.region_ints.data()};
}

}  // namespace tessel::ir
