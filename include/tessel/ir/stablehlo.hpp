#pragma once
// A program as StableHLO, the text XLA compiles for a TPU, a GPU or a CPU: the writer that each
// primitive's lowering rule (primitive::lower) writes its node into, and the module of a whole program,
// its control constructs as stablehlo.while (scan) and stablehlo.case (switch). Ops are written in
// MLIR's generic form ("stablehlo.add"(%a, %b) : (...) -> ...), the one form every op shares.
// Declared here; defined in ir/stablehlo-inl.hpp, compiled once in the tessel library.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/ir/program.hpp"

namespace tessel::ir {

// One value of the module: its SSA name and its type ("%7", "tensor<4x3xf32>").
struct hlo_value {
  std::string name, type;
};

// tensor<4x3xf32>: the type of a tensor of dtype c and shape s.
std::string hlo_type(dtype_code c, const dims& s);

// An op's properties, MLIR's `<{name = value, ...}>`, in the order added.
class hlo_properties {
 public:
  hlo_properties& add(std::string_view name, std::string_view value);
  hlo_properties& i64(std::string_view name, std::int64_t v);                    // name = 3 : i64
  hlo_properties& i64s(std::string_view name, std::span<const std::int64_t> v);  // name = array<i64: 1, 2>
  // A window's padding, (low, high) per axis: name = dense<[[lo0, hi0], ...]> : tensor<Nx2xi64>.
  hlo_properties& padding(std::string_view name, std::span<const std::int64_t> lo, std::span<const std::int64_t> hi);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A region of an op (a reduction's combiner, a loop's body): the types of its block's arguments, and the
// body, which writes its ops and returns the values the region returns.
struct hlo_region {
  std::vector<std::string> arguments;
  std::function<std::vector<hlo_value>(const std::vector<hlo_value>& arguments)> body;
};

// Writes the ops of one module. A lowering rule sees the node being lowered (current) and its operands'
// values, writes ops and defines the node's value.
class stablehlo_writer {
 public:
  explicit stablehlo_writer(const program_view& p);

  const node& current() const { return p_[current_]; }
  const node& operand_node(std::size_t i) const { return p_[current().operands[i]]; }
  const hlo_value& operand(std::size_t i) const { return value(current().operands[i]); }
  std::string result_type() const { return hlo_type(current().dtype, current().shape); }

  // Writes one op: `%r = "op"(operands) <{properties}> ({regions}) : (operand types) -> (types)`, and
  // returns its results.
  std::vector<hlo_value> emit(std::string_view op, const std::vector<hlo_value>& operands, const hlo_properties& p,
                              const std::vector<std::string>& types, const std::vector<hlo_region>& regions = {});
  hlo_value emit(std::string_view op, const std::vector<hlo_value>& operands, const hlo_properties& p, const std::string& type);
  // The node's value is v (written above, or an operand's: an identity).
  void define(hlo_value v);
  // The common case: the node is one op of its operands, of the node's type.
  void lower_as(std::string_view op, const hlo_properties& p = {});

  // A constant of dtype c, a scalar spread over shape s (exact: floats are written by their bits).
  hlo_value constant(dtype_code c, double value, const dims& s = {});
  hlo_value convert(const hlo_value& v, dtype_code to, const dims& s);
  hlo_value broadcast(const hlo_value& scalar, dtype_code c, const dims& s);
  // stablehlo.reduce of x over `axes` from init, combining two scalars of dtype c by `combiner`.
  hlo_value reduce(const hlo_value& x, const hlo_value& init, dtype_code c, std::string_view combiner,
                   std::span<const std::int64_t> axes, const std::string& type);
  // stablehlo.compare of a and b (of dtype c) in `direction` (EQ, LT, ...), of type `type` (i1 elements).
  hlo_value compare(const hlo_value& a, const hlo_value& b, dtype_code c, std::string_view direction, const std::string& type);

  // For the module writer: the value of node id, and which node is being lowered.
  const hlo_value& value(int id) const { return values_[static_cast<std::size_t>(id)]; }
  void set_value(int id, hlo_value v) { values_[static_cast<std::size_t>(id)] = std::move(v); }
  void lower(int id);
  std::string take_text() { return std::move(text_); }
  // Inside a shard_map's body: its mesh (devices numbered row-major), which the collectives' lowerings read,
  // and a fresh channel id for each collective.
  mesh_shape mesh{};
  int next_channel() { return ++channel_; }
  // The device's place (s32) among the devices that differ from it only along `axes` (mesh axis indices,
  // the first major), from stablehlo.partition_id: devices are numbered row-major over the mesh.
  hlo_value place_along(std::span<const std::size_t> axes);
  void line(std::string_view text);
  int depth = 2;  // indentation, in steps of two spaces

 private:
  std::string fresh();

  const program_view& p_;
  int current_ = -1;
  int next_name_ = 0;
  int channel_ = 0;
  std::vector<hlo_value> values_;
  std::string text_;
};

// Where a shard_map's program runs: the mesh, and each argument leaf's and result's global shape and
// sharding (Shardy's dimension list, [{"data"}, {}]). The module's @main takes and returns the global
// arrays and runs the program on each device's blocks as an sdy.manual_computation over every mesh axis. A
// parameter after the argument leaves, with a source leaf in its attributes ([index, source]: a replicated
// update computed in blocks, transform/update_sharding.hpp), is the device's block of that leaf along
// dimension 0 over the mesh axes it varies along.
struct mesh_placement {
  mesh_shape mesh{};
  std::vector<dims> argument_shapes, result_shapes;
  std::vector<std::string> argument_shardings, result_shardings;
};

// The module of program p: `func.func public @main` of its parameters and results; with a placement, of
// their global arrays, p being the program of one device.
std::string write_stablehlo(const program_view& p, std::string_view module_name, const mesh_placement* placement = nullptr);

}  // namespace tessel::ir

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/ir/stablehlo-inl.hpp"
#endif
