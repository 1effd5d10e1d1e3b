#pragma once
// The traced program: a flat, topologically ordered table of nodes, built during constant evaluation.
//
// jit calls the user's function with tracers (ir/tracer.hpp) inside a consteval function; every
// operation appends a node here. A node names its primitive by a pointer to the primitive's descriptor
// (ir/primitive.hpp), so a primitive is one self-contained file and the table needs no central list of
// op codes. Identical nodes are merged as they are added (common-subexpression elimination by value:
// a literal's value is part of its node, so `x * 0.5f + x * 0.7f` keeps two constants).

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "tessel/core/dtype.hpp"

namespace tessel::ir {

inline constexpr std::size_t max_rank = 8;
inline constexpr std::size_t max_operands = 3;
inline constexpr std::size_t max_ints = 2 * max_rank;

using tessel::dtype_code;

// The dtype table's (core/dtype.hpp) columns as the node table reads them.
template <class T>
consteval dtype_code code_of() {
  return dtype_traits<T>::code;
}
constexpr std::string_view name_of(dtype_code c) { return info_of(c).name; }
constexpr std::size_t bytes_of(dtype_code c) { return info_of(c).bytes; }
constexpr std::size_t tile_bytes(dtype_code c) { return info_of(c).tile_bytes; }
constexpr bool is_floating(dtype_code c) { return info_of(c).is_floating; }

// A run-time-valued shape for constexpr passes (the static shape<...> is its type-level twin).
struct dims {
  std::uint8_t rank = 0;
  std::array<std::size_t, max_rank> d{};

  constexpr std::size_t size() const {
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank; ++i) n *= d[i];
    return n;
  }
  constexpr std::size_t operator[](std::size_t i) const { return d[i]; }
  constexpr bool operator==(const dims&) const = default;

  template <std::size_t R>
  static constexpr dims from(const std::array<std::size_t, R>& a) {
    dims out;
    out.rank = static_cast<std::uint8_t>(R);
    for (std::size_t i = 0; i < R; ++i) out.d[i] = a[i];
    return out;
  }
};

// Static parameters of a node: axes, permutations, broadcast dims, a literal's value.
struct attributes {
  std::array<std::int64_t, max_ints> ints{};
  std::uint8_t count = 0;
  double scalar = 0;
  // A literal is its bytes, as XLA compares constants: 0.0 == -0.0 and NaN != NaN would merge two
  // different constants and keep two equal ones apart.
  constexpr bool operator==(const attributes& o) const {
    return ints == o.ints && count == o.count && std::bit_cast<std::uint64_t>(scalar) == std::bit_cast<std::uint64_t>(o.scalar);
  }

  constexpr void push(std::int64_t v) { ints[count++] = v; }
};

struct node;
class graph_builder;

// How the planner treats a primitive.
enum class prim_kind : std::uint8_t {
  parameter,    // a function argument
  literal,      // a scalar written in the program (its value is in attr.scalar)
  elementwise,  // out[i] = f(in0[i], in1[i], ...) on equal shapes; fuses into loops
  broadcast,    // broadcast_in_dim: an index map, fused into its consumers' loads
  reshape,      // same elements, new shape: no data movement
  layout,       // transpose, slice, pad, concatenate: data movement
  reduce,       // reduction over static axes
  contraction,  // dot_general, conv_general: the heavy kernels
  generator,    // iota, rng: computed from the index alone
  region_parameter,  // a value a control construct (scan, switch) feeds its body each time it runs it
  control,      // an output of a control construct: a final carry, stacked ys, a taken branch's result
};

// Evaluates an elementwise primitive on n contiguous elements. Tiles hold f32 and bf16 values as
// float (computed in f32 and rounded once when stored, as XLA's default excess precision does),
// s32 as std::int32_t, u32 as std::uint32_t, pred as bool.
using elementwise_fn = void (*)(const node& n, const void* const* in, void* out, std::size_t count);
// The same, where operands may be one value standing for all n (bit a of `splat` set: in[a] points at
// that value, a literal or a scalar spread over the shape), so that the executor fills no tile with it.
// The binary rules and select evaluate this way.
using splat_fn = void (*)(const node& n, const void* const* in, unsigned splat, void* out, std::size_t count);

// Runs a non-elementwise primitive on whole buffers: `in[i]` holds operand i (described by
// operands[i]) and `out` the result, all in storage layout (row-major; bf16 as its 16 bits).
using kernel_fn = void (*)(const node& n, const node* const* operands, const void* const* in, void* out);

// A contraction whose elementwise epilogue is fused takes its result block by block: each finished
// block, elements [first, first + count) in row-major order as f32, goes to a sink (from worker
// `thread`) instead of into storage, and the executor's sink runs the epilogue on it while it is in cache.
struct block_sink {
  void* context = nullptr;
  void (*consume)(void* context, std::size_t first, std::size_t count, const float* values, std::size_t thread) = nullptr;
};

// Kernels the executor threads as work items (convolutions, pooling windows, transposes and slices; the
// GEMM and the fused loops have grids): the primitive cuts its work into independent items for a thread count and a per-thread cache
// budget (plan_items), and runs one item on one thread with that thread's scratch from the executor's
// arena (run_item). Items run in any order, each exactly once, and allocate nothing.
struct item_plan {
  std::size_t items = 0;           // work items
  std::size_t per_item = 1;        // what one item covers, in the primitive's unit (rows, images)
  std::size_t scratch_floats = 0;  // scratch one thread's items use (64-byte aligned)
  // Items add into an f32 accumulator of the result's size (zeroed first) rather than storing it: the
  // executor deals them out in partial_shares fixed shares of consecutive items, one accumulator each, and
  // stores the accumulators' sum in share order (a filter gradient's rows). The cut of such items must not
  // depend on the thread count either, so that the sum's bits do not.
  bool sums_partials = false;
};
inline constexpr std::size_t partial_shares = 16;
// Floats rounded up to whole 64-byte lines: where each part of a thread's scratch begins.
constexpr std::size_t aligned_floats(std::size_t floats) { return (floats + 15) / 16 * 16; }
using item_plan_fn = item_plan (*)(const node& n, const node* const* operands, std::size_t threads, std::size_t cache_bytes);
// What one item is given: the node, its operands' nodes and storage, the result's storage (`out`), or
// the sink taking the result's blocks when the epilogue is fused, its thread's scratch and its share's accumulator.
struct item_args {
  const node* n = nullptr;
  const node* const* operands = nullptr;
  const void* const* in = nullptr;
  void* out = nullptr;
  const block_sink* sink = nullptr;
  float* scratch = nullptr;
  float* partial = nullptr;
  std::size_t thread = 0;
};
using item_fn = void (*)(const item_args& args, const item_plan& plan, std::size_t item);

// Where element (r, c) of a matrix lies: r * row + c * col elements from its first.
struct matrix_strides {
  std::size_t row = 0, col = 0;
};

// The GEMM a contraction amounts to, batch x [m, k] . [k, n] (flop counts, target tiling), and where the
// operands' elements lie for it when the executor multiplies them in place (dot_general): each batch
// element's stride, and A [m, k] and B [k, n] within one. An implicit GEMM run by items (a convolution)
// leaves the strides zero.
struct gemm_extent {
  std::size_t batch = 1, m = 1, n = 1, k = 1;
  std::size_t lhs_batch_stride = 0, rhs_batch_stride = 0;
  matrix_strides lhs{}, rhs{};
  bool bf16 = false;  // both operands bf16 (else both f32)
};
using extent_fn = gemm_extent (*)(const node& n, const node& lhs, const node& rhs);

// Folds n tile values into acc[0] (reducing a row), or, elementwise, acc[i] = op(acc[i], in[i]) (combining rows).
using reduce_row_fn = void (*)(const node& n, const void* in, std::size_t count, void* acc);
using combine_fn = void (*)(const node& n, const void* in, std::size_t count, void* acc);
// Computes elements [first, first + count) of a generator's result in row-major order (tile types).
using generate_fn = void (*)(const node& n, std::size_t first, std::size_t count, void* out);
// Fills count accumulators with the reduction's identity (0 for sum, the lowest value for max, ...).
using init_fn = void (*)(const node& n, void* acc, std::size_t count);

// Transform rules, evaluated while a program is traced (so they emit nodes into the same table).
// vjp: given the node and the cotangent of its result, the cotangent of each operand (-1: none, zero).
// jvp: given the tangents of the operands (-1: zero), the tangent of the result (-1: zero).
using vjp_fn = void (*)(graph_builder& g, int node, int cotangent, std::array<int, max_operands>& operand_cotangents);
using jvp_fn = int (*)(graph_builder& g, int node, const std::array<int, max_operands>& operand_tangents);
// batch (vmap): `n` is a node of the unbatched program; `operands` are its operands in the batched
// program and `axes` their batch axes (-1: unbatched; at least one is batched). Emits the batched
// node, returns its id and sets out_axis to its result's batch axis.
using batch_fn = int (*)(graph_builder& g, const node& n, const std::array<int, max_operands>& operands,
                         const std::array<int, max_operands>& axes, int& out_axis);
// sum_over_steps (a scan's backward pass): `stacked` holds `n`'s operands for every step of a loop, each
// with a new leading axis of the steps; emits one node equal to the sum over the steps of `n` applied to
// each step's operands (a contraction contracts the step axis as well: one GEMM for L rank-1 updates).
using sum_over_steps_fn = int (*)(graph_builder& g, const node& n, const std::array<int, max_operands>& stacked);

// Writes node w.current() as StableHLO (ir/stablehlo.hpp): the ops it is and its value.
class stablehlo_writer;
using lower_fn = void (*)(stablehlo_writer& w);

// Everything about one primitive. Each primitive file defines one `inline constexpr primitive`.
struct primitive {
  std::string_view name;
  prim_kind kind;
  elementwise_fn evaluate = nullptr;  // elementwise primitives: one of these two
  splat_fn evaluate_splat = nullptr;
  kernel_fn run = nullptr;            // layout, reduce, contraction and generator primitives
  item_plan_fn plan_items = nullptr;  // kernels the executor threads in items (conv, pooling, transpose, slice)
  item_fn run_item = nullptr;
  extent_fn extent = nullptr;         // contractions
  reduce_row_fn reduce_row = nullptr;  // reductions that fuse into row kernels
  combine_fn combine = nullptr;
  init_fn init = nullptr;
  generate_fn generate = nullptr;      // generators (iota)
  vjp_fn vjp = nullptr;                // reverse mode; null with differentiable = false means "no gradient"
  jvp_fn jvp = nullptr;
  batch_fn batch = nullptr;            // vmap; primitives without operands (parameters, literals, generators) need none
  sum_over_steps_fn sum_over_steps = nullptr;  // null: a scan's backward pass sums the steps' values in a carry
  bool differentiable = true;          // false: the result is piecewise constant (floor, comparisons, argmax)
  // Inside shard_map, the mesh axes the result varies along, given the union of the operands' (a
  // collective's rule: psum removes its axes, all_gather adds them). Null: that union.
  std::uint8_t (*varying)(const node& n, std::uint8_t operands) = nullptr;
  double flops_per_element = 1;    // for cost estimates in dump
  lower_fn lower = nullptr;        // export to StableHLO; null: the primitive cannot be exported
};

struct node {
  const primitive* prim = nullptr;
  dtype_code dtype = dtype_code::f32;
  dtype_code operand_dtype = dtype_code::f32;  // of operand 0 (a comparison's or a convert's input)
  dims shape{};
  std::array<int, max_operands> operands{-1, -1, -1};
  std::uint8_t arity = 0;
  // Inside shard_map: the mesh axes along which the value may differ between devices, bit a for mesh
  // axis a (JAX's varying manual axes, check_vma). 0 everywhere else.
  std::uint8_t varying = 0;
  attributes attr{};

  constexpr bool operator==(const node& o) const {
    return prim == o.prim && dtype == o.dtype && operand_dtype == o.operand_dtype && shape == o.shape && operands == o.operands && arity == o.arity &&
           varying == o.varying && attr == o.attr;
  }
  constexpr int operand(std::size_t i) const { return operands[i]; }
};

// Control flow (scan, switch) as sub-programs. A construct's bodies are traced once, into the same table,
// as regions: each region's parameters are region_parameter nodes (never merged), so the nodes that
// depend on them are the region's and run each time the construct runs the body; nodes that do not
// (values captured from outside, loop invariants) are ordinary earlier nodes, computed once. A
// construct's results are control nodes (attr: construct, output index) emitted after its bodies.
enum class construct_kind : std::uint8_t { scan, switch_ };

struct region_record {
  int construct = -1;
  std::vector<int> params;   // region_parameter nodes: scan: carries then x slices; switch: operands
  std::vector<int> results;  // what the body returns: scan: carries then ys; switch: the outputs
};

struct construct_record {
  construct_kind kind = construct_kind::scan;
  bool reverse = false;   // scan: steps run from length - 1 down to 0
  int length = 0;         // scan: steps
  int carries = 0;        // scan: leading inputs that are carries (the rest are xs); switch: 0
  int index = -1;         // switch: the s32 or pred scalar choosing the branch (clamped into range)
  int parent = -1;        // the region the construct runs in (-1: the program itself)
  int first_region = 0, region_count = 0;
  std::vector<int> inputs;   // scan: init leaves then xs leaves; switch: operands
  std::vector<int> outputs;  // control nodes, by output index (output o is results[o] of the region run)
  int residuals = -1;        // scan: the first of the outputs stacked for the backward pass (carries, residuals)
  int first_node = 0;        // the table's size when the construct began: its regions' nodes come after
};

// The mesh a shard_map body is traced over (names and sizes, mesh order), as values: collectives
// resolve their axis names against it while they are traced. Empty (rank 0) outside shard_map.
struct mesh_shape {
  std::size_t rank = 0;
  std::array<std::array<char, 24>, 8> names{};
  std::array<std::size_t, 8> sizes{};

  constexpr std::string_view name(std::size_t a) const {
    std::size_t n = 0;
    while (n < names[a].size() && names[a][n] != '\0') ++n;
    return {names[a].data(), n};
  }
  constexpr int index_of(std::string_view n) const {
    for (std::size_t a = 0; a < rank; ++a)
      if (name(a) == n) return static_cast<int>(a);
    return -1;
  }
  constexpr std::size_t devices() const {
    std::size_t d = 1;
    for (std::size_t a = 0; a < rank; ++a) d *= sizes[a];
    return d;
  }
  constexpr bool operator==(const mesh_shape&) const = default;
};

// Collects nodes during tracing; merges a node identical to an earlier one (hash-consing).
class graph_builder {
 public:
  constexpr int add(node n) {
    // An operand of id -1 is the result of a call whose rule was broken (it has raised its error): so is
    // this node, and nothing is recorded, so that no second error comes from the broken trace.
    for (std::size_t i = 0; i < n.arity; ++i)
      if (n.operands[i] < 0) return -1;
    std::uint8_t operands = 0;
    for (std::size_t i = 0; i < n.arity; ++i) operands |= nodes_[static_cast<std::size_t>(n.operands[i])].varying;
    n.varying = n.prim->varying ? n.prim->varying(n, operands) : operands;
    const std::size_t h = hash(n);
    if (table_.empty()) table_.assign(1024, -1);
    if (nodes_.size() * 2 >= table_.size()) rehash();
    std::size_t slot = h & (table_.size() - 1);
    while (table_[slot] != -1) {
      if (nodes_[static_cast<std::size_t>(table_[slot])] == n) return table_[slot];
      slot = (slot + 1) & (table_.size() - 1);
    }
    nodes_.push_back(n);
    const int id = static_cast<int>(nodes_.size() - 1);
    table_[slot] = id;
    return id;
  }
  // Parameters are never merged: two arguments of equal type are different values.
  constexpr int add_parameter(const node& n) {
    nodes_.push_back(n);
    return static_cast<int>(nodes_.size() - 1);
  }
  constexpr const node& operator[](int id) const { return nodes_[static_cast<std::size_t>(id)]; }
  constexpr std::size_t size() const { return nodes_.size(); }
  constexpr const std::vector<node>& nodes() const { return nodes_; }

  std::vector<int> outputs;
  int parameter_count = 0;

  // Control flow: constructs, their regions, and the regions being traced now (innermost last).
  std::vector<construct_record> constructs;
  std::vector<region_record> regions;
  std::vector<int> open_regions;
  constexpr int current_region() const { return open_regions.empty() ? -1 : open_regions.back(); }

  // The first transform that met a primitive without the rule it needs (reported at the user's call).
  const primitive* missing_rule = nullptr;
  const char* missing_rule_kind = "";
  constexpr void report_missing(const primitive* p, const char* kind) {
    if (missing_rule == nullptr) {
      missing_rule = p;
      missing_rule_kind = kind;
    }
  }

  // The mesh of the shard_map being traced (empty outside one).
  mesh_shape mesh{};

  // The first rule broken while tracing that only values can show (a collective's axis name not bound
  // by a shard_map, a scan carry gaining varying axes): its message, reported at the user's call.
  std::array<char, 480> error{};
  std::size_t error_size = 0;
  constexpr void report_error(std::string_view message) {
    if (error_size != 0) return;
    for (char c : message)
      if (error_size + 1 < error.size()) error[error_size++] = c;
  }

 private:
  static constexpr std::size_t hash(const node& n) {
    std::size_t h = 14695981039346656037ull;
    auto mix = [&h](std::size_t v) { h = (h ^ v) * 1099511628211ull; };
    // The primitive is left out of the hash (its address has no value in constant evaluation); equal
    // hashes compare it by address.
    mix(static_cast<std::size_t>(n.dtype));
    mix(static_cast<std::size_t>(n.operand_dtype));
    mix(n.arity);
    for (std::size_t i = 0; i < n.shape.rank; ++i) mix(n.shape.d[i]);
    for (int o : n.operands) mix(static_cast<std::size_t>(o + 1));
    for (std::size_t i = 0; i < n.attr.count; ++i) mix(static_cast<std::size_t>(n.attr.ints[i]));
    mix(std::bit_cast<std::uint64_t>(n.attr.scalar));
    return h;
  }
  constexpr void rehash() {
    std::vector<int> bigger(table_.size() * 2, -1);
    for (std::size_t id = 0; id < nodes_.size(); ++id) {
      if (nodes_[id].prim->kind == prim_kind::parameter || nodes_[id].prim->kind == prim_kind::region_parameter) continue;
      std::size_t slot = hash(nodes_[id]) & (bigger.size() - 1);
      while (bigger[slot] != -1) slot = (slot + 1) & (bigger.size() - 1);
      bigger[slot] = static_cast<int>(id);
    }
    table_ = std::move(bigger);
  }

  std::vector<node> nodes_;
  std::vector<int> table_;
};

// The one node constructor (ir::emit, ir/tracer.hpp, and every rule that emits a node call it): the
// primitive, dtype, shape, operands and attributes, and the dtype of operand 0 (by default operand 0's
// own; without operands, `dtype`). Returns the node's id (an equal node's, if one exists: hash-consing).
constexpr int make_node(graph_builder& g, const primitive& p, dtype_code dtype, const dims& shape, std::initializer_list<int> operands,
                        const attributes& a = {}, std::optional<dtype_code> operand_dtype = std::nullopt) {
  node n;
  n.prim = &p;
  n.dtype = dtype;
  n.shape = shape;
  for (int o : operands) n.operands[n.arity++] = o;
  n.operand_dtype = operand_dtype ? *operand_dtype : (n.arity ? g[n.operands[0]].dtype : dtype);
  n.attr = a;
  return g.add(n);
}

}  // namespace tessel::ir
