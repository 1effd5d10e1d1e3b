#pragma once
// convert_element_type<U> (lax.convert_element_type, jnp's astype): elementwise dtype conversion.
// To bf16: round to nearest even (rounded here, even inside a fused loop, because the user asked for it).
// Float to integer: truncation toward zero, NaN -> 0, out-of-range values saturate (XLA's semantics).
// To pred: x != 0. From pred: 0 or 1. s32 <-> u32: the same bits, modulo 2^32.

#include <cmath>
#include <cstdint>
#include <limits>

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {

// The kernel: declared here and defined only where TESSEL_IMPLEMENTATION is (the tessel library), so it
// is compiled once, with the library's flags.
void evaluate_convert(const ir::node& node, const void* const* in, void* out, std::size_t n);

#ifdef TESSEL_IMPLEMENTATION
template <class From, class To>
tile_t<To> convert_value(tile_t<From> x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != tile_t<From>(0);
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    return static_cast<float>(bfloat16(static_cast<float>(x)));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<tile_t<From>>) {
    if (x != x) return 0;
    if (x <= static_cast<float>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (x >= static_cast<float>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<tile_t<To>>(x);
  }
}

template <class From, class To>
void convert_tile(const void* in, void* out, std::size_t n) {
  auto* y = static_cast<tile_t<To>*>(out);
  if constexpr (std::is_same_v<From, bool>) {  // pred read as its bytes, which g++ vectorizes (bool it does not)
    const auto* x = static_cast<const unsigned char*>(in);
    for (std::size_t i = 0; i < n; ++i) y[i] = convert_value<From, To>(x[i] != 0);
  } else {
    const auto* x = static_cast<const tile_t<From>*>(in);
    for (std::size_t i = 0; i < n; ++i) y[i] = convert_value<From, To>(x[i]);
  }
}

template <class From>
void convert_from(ir::dtype_code to, const void* in, void* out, std::size_t n) {
  visit_dtype(to, [&]<class To>(To) { convert_tile<From, To>(in, out, n); });
}

void evaluate_convert(const ir::node& node, const void* const* in, void* out, std::size_t n) {
  visit_dtype(node.operand_dtype, [&]<class From>(From) { convert_from<From>(node.dtype, in[0], out, n); });
}
#endif  // TESSEL_IMPLEMENTATION

// Between floating dtypes the cotangent converts back; to or from integers there is no gradient.
constexpr void convert_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  if (ir::is_floating(n.dtype) && ir::is_floating(n.operand_dtype)) out[0] = build::convert(g, ct, n.operand_dtype);
}
constexpr int convert_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  if (t[0] < 0 || !ir::is_floating(n.dtype) || !ir::is_floating(n.operand_dtype)) return -1;
  return build::convert(g, t[0], n.dtype);
}

// XLA's convert has the semantics above (truncation, NaN to 0, saturation; x != 0 to pred).
inline void lower_convert_element_type(ir::stablehlo_writer& w) { w.lower_as("stablehlo.convert"); }
inline constexpr ir::primitive convert_element_type_p{.name = "convert_element_type",
                                                      .kind = ir::prim_kind::elementwise,
                                                      .evaluate = &evaluate_convert,
                                                      .vjp = &convert_vjp,
                                                      .jvp = &convert_jvp,
                                                      .batch = &batching::elementwise, .lower = &lower_convert_element_type};
}  // namespace prim

template <class U, Traced X>
constexpr auto convert_element_type(X x) {
  require_dtype<U, "tessel::convert_element_type">();
  using T = typename X::value_type;
  if constexpr (std::is_same_v<T, U> || !DType<U>) {
    return tracer<U, typename X::shape_type>{x.graph, x.id};
  } else {
    return ir::emit<U, typename X::shape_type>(x.graph, prim::convert_element_type_p, {x.id}, {}, ir::code_of<T>());
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class U, Tensor X>
auto convert_element_type(const X& x) {
  return eagerly([](auto x) { return convert_element_type<U>(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
