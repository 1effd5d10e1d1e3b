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
#include <string_view>
#include <vector>

#include "tessel/core/dtype.hpp"

namespace tessel::ir {

inline constexpr std::size_t max_rank = 8;
inline constexpr std::size_t max_operands = 3;
inline constexpr std::size_t max_ints = 2 * max_rank;

enum class dtype_code : std::uint8_t { f32, bf16, s32, u32, pred };

template <class T>
consteval dtype_code code_of() {
  if constexpr (std::is_same_v<T, float>) return dtype_code::f32;
  else if constexpr (std::is_same_v<T, bfloat16>) return dtype_code::bf16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype_code::s32;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return dtype_code::u32;
  else return dtype_code::pred;
}

constexpr std::string_view name_of(dtype_code c) {
  constexpr std::string_view names[] = {"f32", "bf16", "s32", "u32", "pred"};
  return names[static_cast<int>(c)];
}
constexpr std::size_t bytes_of(dtype_code c) { return c == dtype_code::bf16 ? 2 : c == dtype_code::pred ? 1 : 4; }
constexpr bool is_floating(dtype_code c) { return c == dtype_code::f32 || c == dtype_code::bf16; }

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
  constexpr bool operator==(const attributes&) const = default;

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
};

// Evaluates an elementwise primitive on n contiguous elements. Tiles hold f32 and bf16 values as
// float (computed in f32 and rounded once when stored, as XLA's default excess precision does),
// s32 as std::int32_t, u32 as std::uint32_t, pred as bool.
using elementwise_fn = void (*)(const node& n, const void* const* in, void* out, std::size_t count);

// Runs a non-elementwise primitive on whole buffers: `in[i]` holds operand i (described by
// operands[i]) and `out` the result, all in storage layout (row-major; bf16 as its 16 bits).
using kernel_fn = void (*)(const node& n, const node* const* operands, const void* const* in, void* out);

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

// Everything about one primitive. Each primitive file defines one `inline constexpr primitive`.
struct primitive {
  std::string_view name;
  prim_kind kind;
  elementwise_fn evaluate = nullptr;  // elementwise primitives
  kernel_fn run = nullptr;            // layout, reduce, contraction and generator primitives
  reduce_row_fn reduce_row = nullptr;  // reductions that fuse into row kernels
  combine_fn combine = nullptr;
  init_fn init = nullptr;
  generate_fn generate = nullptr;      // generators (iota)
  vjp_fn vjp = nullptr;                // reverse mode; null with differentiable = false means "no gradient"
  jvp_fn jvp = nullptr;
  bool differentiable = true;          // false: the result is piecewise constant (floor, comparisons, argmax)
  double flops_per_element = 1;    // for cost estimates in dump
};

struct node {
  const primitive* prim = nullptr;
  dtype_code dtype = dtype_code::f32;
  dtype_code operand_dtype = dtype_code::f32;  // of operand 0 (a comparison's or a convert's input)
  dims shape{};
  std::array<int, max_operands> operands{-1, -1, -1};
  std::uint8_t arity = 0;
  attributes attr{};

  constexpr bool operator==(const node& o) const {
    return prim == o.prim && dtype == o.dtype && operand_dtype == o.operand_dtype && shape == o.shape && operands == o.operands && arity == o.arity &&
           attr == o.attr;
  }
  constexpr int operand(std::size_t i) const { return operands[i]; }
};

// Collects nodes during tracing; merges a node identical to an earlier one (hash-consing).
class graph_builder {
 public:
  constexpr int add(const node& n) {
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

  // The first transform that met a primitive without the rule it needs (reported at the user's call).
  const primitive* missing_rule = nullptr;
  const char* missing_rule_kind = "";
  constexpr void report_missing(const primitive* p, const char* kind) {
    if (missing_rule == nullptr) {
      missing_rule = p;
      missing_rule_kind = kind;
    }
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
      if (nodes_[id].prim->kind == prim_kind::parameter) continue;
      std::size_t slot = hash(nodes_[id]) & (bigger.size() - 1);
      while (bigger[slot] != -1) slot = (slot + 1) & (bigger.size() - 1);
      bigger[slot] = static_cast<int>(id);
    }
    table_ = std::move(bigger);
  }

  std::vector<node> nodes_;
  std::vector<int> table_;
};

}  // namespace tessel::ir
