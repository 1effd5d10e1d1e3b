#pragma once
// The reduction family (reduce_sum, reduce_max, reduce_min): the result drops the reduced axes.
// A rule struct has `name`, `domain`, `identity<T>()` and `combine(a, b)`. Floating inputs accumulate
// in float (bf16 too, rounded once when stored), vectorised with xsimd (prim/family/reduce-inl.hpp), so sums
// are blocked in four vectors of lanes (64 ways with AVX-512) for rows of at least four vectors.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "tessel/prim/family/elementwise.hpp"

namespace tessel::prim {

// Each reduction's tile functions, which its descriptor points to: declared here, defined in
// prim/family/reduce-inl.hpp (xsimd loops) and compiled once, where TESSEL_IMPLEMENTATION is (the tessel
// library; prim/all.hpp instantiates them for each reduction), as the elementwise family's are.
template <class Rule>
void reduce_row(const ir::node& node, const void* in, std::size_t n, void* acc);
template <class Rule>
void combine(const ir::node& node, const void* in, std::size_t n, void* acc);
template <class Rule>
void init(const ir::node& node, void* acc, std::size_t n);

// Rules: sum spreads its cotangent back; max and min send it to the elements that won, split evenly
// between ties (JAX's chooser rule: location indicators divided by their count).
constexpr void sum_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = build::unreduce(g, ct, g[n.operands[0]].shape, build::reduced_axes(n));
}
constexpr int sum_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  return t[0] < 0 ? -1 : build::reduce(g, reduce_sum_p, t[0], build::reduced_axes(g[node]));
}

// Indicators of the elements equal to the result, divided by how many there are in each reduction.
constexpr int chooser_weights(ir::graph_builder& g, int node) {
  const ir::node n = g[node];
  const int x = n.operands[0];
  const auto axes = build::reduced_axes(n);
  const int hit = build::convert(g, build::compare(g, eq_p, x, build::unreduce(g, node, g[x].shape, axes)), n.dtype);
  const int count = build::reduce(g, reduce_sum_p, hit, axes);
  return build::div(g, hit, build::unreduce(g, count, g[x].shape, axes));
}
constexpr void chooser_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const int w = chooser_weights(g, node);
  out[0] = build::mul(g, w, build::unreduce(g, ct, g[n.operands[0]].shape, build::reduced_axes(n)));
}
constexpr int chooser_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  if (t[0] < 0) return -1;
  return build::reduce(g, reduce_sum_p, build::mul(g, chooser_weights(g, node), t[0]), build::reduced_axes(g[node]));
}

// StableHLO: stablehlo.reduce from the identity with the rule's combiner; bf16 accumulates in f32, as the
// kernels do, and is rounded once at the end.
template <class Rule>
void lower_reduce(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const ir::dtype_code acc = n.dtype == ir::dtype_code::bf16 ? ir::dtype_code::f32 : n.dtype;
  ir::hlo_value x = w.operand(0);
  if (acc != n.dtype) x = w.convert(x, acc, w.operand_node(0).shape);
  const double identity = acc == ir::dtype_code::f32   ? static_cast<double>(Rule::template identity<float>())
                          : acc == ir::dtype_code::s32 ? static_cast<double>(Rule::template identity<std::int32_t>())
                                                       : static_cast<double>(Rule::template identity<std::uint32_t>());
  const ir::hlo_value r = w.reduce(x, w.constant(acc, identity), acc, Rule::stablehlo, {n.attr.ints.data(), n.attr.count},
                                   ir::hlo_type(acc, n.shape));
  w.define(acc == n.dtype ? r : w.convert(r, n.dtype, n.shape));
}

template <class Rule>
consteval ir::primitive reduce_primitive(std::string_view name, bool chooser) {
  return ir::primitive{.name = name,
                       .kind = ir::prim_kind::reduce,
                       .reduce_row = &reduce_row<Rule>,
                       .combine = &combine<Rule>,
                       .init = &init<Rule>,
                       .vjp = chooser ? &chooser_vjp : &sum_vjp,
                       .jvp = chooser ? &chooser_jvp : &sum_jvp,
                       .batch = &batching::reduction,
                       .lower = &lower_reduce<Rule>};
}

// Axes must be distinct and in range; negative axes count from the end. No axes (the sum of a scalar, as
// jnp.sum of one) reduce nothing. The axes are looped over as an array: a braced list of none has no type.
template <fixed_string Op, class X, long... Axes>
consteval auto reduced_shape() {
  using S = typename X::shape_type;
  constexpr long rank = static_cast<long>(S::rank);
  constexpr bool in_range = ((Axes >= -rank && Axes < rank) && ...);
  constexpr bool distinct = [] {
    std::array<bool, S::rank + 1> seen{};
    for (long a : std::array<long, sizeof...(Axes)>{(Axes < 0 ? Axes + rank : Axes)...}) {
      if (a < 0 || a >= rank) continue;
      if (seen[static_cast<std::size_t>(a)]) return false;
      seen[static_cast<std::size_t>(a)] = true;
    }
    return true;
  }();
  if constexpr (!in_range || !distinct) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": cannot reduce ";
      append_type<X>(m) << " over axes (";
      bool first = true;
      for (long a : std::array<long, sizeof...(Axes)>{Axes...}) {
        m << (first ? "" : ",") << static_cast<std::int64_t>(a);
        first = false;
      }
      m << ") (each axis must be distinct and in -" << static_cast<std::int64_t>(rank) << ".."
        << static_cast<std::int64_t>(rank - 1) << "); fix: name each reduced axis once";
      return m;
    }>()>();
    return std::type_identity<S>{};
  } else {
    constexpr auto out = [] {
      std::array<bool, S::rank + 1> drop{};
      for (long a : std::array<long, sizeof...(Axes)>{(Axes < 0 ? Axes + rank : Axes)...}) drop[static_cast<std::size_t>(a)] = true;
      dims_t<S::rank - sizeof...(Axes)> d{};
      for (std::size_t i = 0, j = 0; i < S::rank; ++i)
        if (!drop[i]) d[j++] = S::dims[i];
      return d;
    }();
    return std::type_identity<shape_from<out>>{};
  }
}

// Emits the reduction; the node lists the reduced axes in increasing order.
template <const ir::primitive& P, class Rule, long... Axes, Traced X>
constexpr auto reduce(X x) {
  using T = typename X::value_type;
  using S = typename decltype(reduced_shape<Rule::name, X, Axes...>())::type;
  if constexpr (check_domain<Rule, X>() && S::rank + sizeof...(Axes) == X::rank) {
    constexpr long rank = static_cast<long>(X::rank);
    std::array<long, sizeof...(Axes)> axes{(Axes < 0 ? Axes + rank : Axes)...};
    std::sort(axes.begin(), axes.end());
    ir::attributes a;
    for (long ax : axes) a.push(ax);
    return ir::emit<T, S>(x.graph, P, {x.id}, a);
  } else {
    return tracer<T, S>{x.graph, x.id};
  }
}

}  // namespace tessel::prim

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/prim/family/reduce-inl.hpp"
#endif
