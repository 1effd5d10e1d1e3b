#pragma once
// argmax<Axis> (lax.argmax): the s32 index of the largest value along Axis; the result drops the axis.
// Ties give the first index; a NaN counts as the largest (so the first NaN wins), as in JAX.

#include <cstddef>
#include <cstdint>

#include "tessel/core/bfloat16.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/family/reduce.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {

template <class T>
void argmax_as(const ir::node& n, const ir::node& operand, const T* x, std::int32_t* out) {
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= operand.shape.d[i];
  for (std::size_t i = axis + 1; i < operand.shape.rank; ++i) inner *= operand.shape.d[i];
  const std::size_t len = operand.shape.d[axis];
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      const T* p = x + o * len * inner + i;
      std::size_t best = 0;
      float best_value = static_cast<float>(p[0]);
      for (std::size_t j = 1; j < len && best_value == best_value; ++j) {
        const float v = static_cast<float>(p[j * inner]);
        if (v > best_value || v != v) {
          best = j;
          best_value = v;
        }
      }
      out[o * inner + i] = static_cast<std::int32_t>(best);
    }
}

inline void run_argmax(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  auto* y = static_cast<std::int32_t*>(out);
  visit_dtype(n.operand_dtype, [&]<class T>(T) { argmax_as(n, *operands[0], static_cast<const T*>(in[0]), y); });
}

// vmap: the axis shifts past the batch axis.
constexpr int argmax_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                           const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const auto b = static_cast<std::size_t>(axes[0]);
  const auto a = static_cast<std::size_t>(n.attr.ints[0]);
  const std::size_t moved = a < b ? a : a + 1;
  ir::attributes attr;
  attr.push(static_cast<std::int64_t>(moved));
  out_axis = static_cast<int>(a < b ? b - 1 : b);
  return ir::make_node(g, *n.prim, n.dtype, batching::drop_axis(g[ops[0]].shape, moved), {ops[0]}, attr, n.operand_dtype);
}

// StableHLO: a reduction of (value, index) pairs from (-inf, 0) that keeps the larger value, a NaN, or on
// a tie the smaller index (JAX's lowering of argmax). bf16 values compare as f32.
inline void lower_argmax(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const ir::node& x = w.operand_node(0);
  const ir::dtype_code vt = ir::is_floating(x.dtype) ? ir::dtype_code::f32 : x.dtype;
  const ir::dtype_code it = ir::dtype_code::s32;
  const ir::hlo_value values = vt == x.dtype ? w.operand(0) : w.convert(w.operand(0), vt, x.shape);
  const ir::hlo_value index = w.emit("stablehlo.iota", {}, ir::hlo_properties{}.i64("iota_dimension", n.attr.ints[0]), ir::hlo_type(it, x.shape));
  const double lowest = vt == ir::dtype_code::f32 ? -std::numeric_limits<double>::infinity()
                        : vt == ir::dtype_code::s32 ? static_cast<double>(std::numeric_limits<std::int32_t>::lowest())
                                                    : 0.0;
  const std::string v = ir::hlo_type(vt, {}), i = ir::hlo_type(it, {}), p = ir::hlo_type(ir::dtype_code::pred, {});
  ir::hlo_region pick{{v, i, v, i}, [&](const std::vector<ir::hlo_value>& a) {
                        ir::hlo_value wins = w.compare(a[0], a[2], vt, "GT", p);
                        if (vt == ir::dtype_code::f32) wins = w.emit("stablehlo.or", {wins, w.compare(a[0], a[0], vt, "NE", p)}, {}, p);
                        const ir::hlo_value tie = w.emit("stablehlo.and", {w.compare(a[0], a[2], vt, "EQ", p), w.compare(a[1], a[3], it, "LT", p)}, {}, p);
                        const ir::hlo_value first = w.emit("stablehlo.or", {wins, tie}, {}, p);
                        return std::vector<ir::hlo_value>{w.emit("stablehlo.select", {wins, a[0], a[2]}, {}, v),
                                                          w.emit("stablehlo.select", {first, a[1], a[3]}, {}, i)};
                      }};
  const std::vector<ir::hlo_value> r =
      w.emit("stablehlo.reduce", {values, index, w.constant(vt, lowest), w.constant(it, 0)},
             ir::hlo_properties{}.i64s("dimensions", {n.attr.ints.data(), 1}), {ir::hlo_type(vt, n.shape), w.result_type()}, {pick});
  w.define(r[1]);
}
inline constexpr ir::primitive argmax_p{.name = "argmax", .kind = ir::prim_kind::reduce, .run = &run_argmax, .batch = &argmax_batch,
                                        .differentiable = false, .lower = &lower_argmax};
}  // namespace prim

template <long Axis, Traced X>
constexpr auto argmax(X x) {
  using S = typename decltype(prim::reduced_shape<"tessel::argmax", X, Axis>())::type;
  constexpr std::size_t axis = normalize_axis<"tessel::argmax", X, Axis>();
  ir::attributes a;
  a.push(static_cast<std::int64_t>(axis));
  return ir::emit<std::int32_t, S>(x.graph, prim::argmax_p, {x.id}, a, ir::code_of<typename X::value_type>());
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long Axis, Tensor X>
auto argmax(const X& x) {
  return eagerly([](auto x) { return argmax<Axis>(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
