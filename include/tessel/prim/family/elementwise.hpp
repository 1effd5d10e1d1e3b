#pragma once
// The elementwise family: what every unary and binary elementwise primitive shares, so that each one
// (prim/exp.hpp, prim/add.hpp, ...) is a rule struct and two lines.
//
// A rule struct has:
//   static constexpr fixed_string name;           "tessel::exp" (used in error messages)
//   static constexpr accepts domain;              which dtypes it takes
//   static auto apply(auto x[, auto y]);          the math, on float, int and (optionally) xsimd batches;
//                                                 math functions through prim/family/simd_math.hpp
//   template <class T> using result = ...;        (optional) the output dtype; the input dtype by default
//   static constexpr std::string_view stablehlo;  the StableHLO op it is ("stablehlo.exponential"), or
//   comparison ("EQ": stablehlo.compare), or static void lower(ir::stablehlo_writer&) where the op
//   depends on the dtype
// Floating tiles (f32 and bf16) are evaluated in float: scalar, with xsimd when apply takes a batch, or
// with Highway when the primitive has an entry, by its name, in the Highway kernel table
// (kernels/hwy_math-inl.hpp; map_unary_f32, prim/family/elementwise-inl.hpp).

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tessel/kernels/hwy_math.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
// Defined in prim/broadcast_in_dim.hpp and prim/literal.hpp, which include this file; every primitive's
// header brings them in (its last line includes prim/all.hpp).
template <class Out, Traced X>
constexpr auto broadcast_to(X x);
namespace prim {
template <class T>
constexpr tracer<T, shape<>> literal(ir::graph_builder* g, double value);
}
}  // namespace tessel

namespace tessel::prim {

enum class accepts { floating, numeric, integer, any };  // numeric: no pred; integer: s32, u32, pred

template <class Rule, class T>
constexpr bool rule_accepts() {
  if constexpr (Rule::domain == accepts::floating) return FloatingDType<T>;
  else if constexpr (Rule::domain == accepts::numeric) return !std::is_same_v<T, bool>;
  else if constexpr (Rule::domain == accepts::integer) return !FloatingDType<T>;
  else return true;
}

template <class Rule, class T>
struct result_of {
  using type = T;
};
template <class Rule, class T>
  requires requires { typename Rule::template result<T>; }
struct result_of<Rule, T> {
  using type = typename Rule::template result<T>;
};
template <class Rule, class T>
using result_t = typename result_of<Rule, T>::type;

// ---- run time: tiles ---------------------------------------------------------------------------

// Each rule's tile functions, which its descriptor points to. A translation unit sees only these
// declarations: the definitions (prim/family/elementwise-inl.hpp, with xsimd and the math they call) are
// compiled once, in the translation unit that defines TESSEL_IMPLEMENTATION (the tessel library,
// src/tessel.cpp), for every rule that prim/all.hpp lists. Every other translation unit would otherwise
// instantiate five dtypes' xsimd loops for each of the 30 rules, used or not, and parse xsimd to do it.
template <class Rule>
void evaluate_unary(const ir::node& node, const void* const* in, void* out, std::size_t n);
template <class Rule>
void evaluate_binary(const ir::node& node, const void* const* in, unsigned splat, void* out, std::size_t n);

// ---- differentiation: a rule gives its local derivatives; the family derives VJP and JVP ----------

// A local derivative d(result)/d(operand): zero, one, minus one, or the value of a node.
struct partial {
  enum kind_t { zero, one, minus_one, node } kind = zero;
  int id = -1;
};
constexpr partial of_node(int id) { return {partial::node, id}; }

// v * partial, without emitting multiplications by constants.
constexpr int times(ir::graph_builder& g, partial p, int v) {
  if (v < 0) return -1;
  switch (p.kind) {
    case partial::zero: return -1;
    case partial::one: return v;
    case partial::minus_one: return build::neg(g, v);
    default: return build::mul(g, v, p.id);
  }
}

// Rules state `static constexpr partial derivative(g, node)` (unary) or `partials(g, node)` (binary).
template <class Rule>
concept HasDerivative = requires(ir::graph_builder& g) { Rule::derivative(g, 0); };
template <class Rule>
concept HasPartials = requires(ir::graph_builder& g) { Rule::partials(g, 0); };

template <class Rule>
constexpr void unary_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  out[0] = times(g, Rule::derivative(g, node), ct);
}
template <class Rule>
constexpr int unary_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  return t[0] < 0 ? -1 : times(g, Rule::derivative(g, node), t[0]);
}
template <class Rule>
constexpr void binary_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const std::array<partial, 2> p = Rule::partials(g, node);
  out[0] = times(g, p[0], ct);
  out[1] = times(g, p[1], ct);
}
template <class Rule>
constexpr int binary_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  if (t[0] < 0 && t[1] < 0) return -1;
  const std::array<partial, 2> p = Rule::partials(g, node);
  return build::add(g, times(g, p[0], t[0]), times(g, p[1], t[1]));
}

// ---- export: the StableHLO op a rule is ---------------------------------------------------------

template <class Rule>
void lower_elementwise(ir::stablehlo_writer& w) {
  if constexpr (requires { Rule::comparison; })
    w.define(w.compare(w.operand(0), w.operand(1), w.operand_node(0).dtype, Rule::comparison, w.result_type()));
  else
    w.lower_as(Rule::stablehlo);
}
template <class Rule>
consteval ir::lower_fn lowering_of() {
  if constexpr (requires { &Rule::lower; }) return &Rule::lower;
  else if constexpr (requires { Rule::stablehlo; } || requires { Rule::comparison; }) return &lower_elementwise<Rule>;
  else return nullptr;
}

template <class Rule>
consteval ir::primitive unary_primitive(std::string_view name, double flops = 1) {
  ir::primitive p{.name = name, .kind = ir::prim_kind::elementwise, .evaluate = &evaluate_unary<Rule>, .flops_per_element = flops,
                  .lower = lowering_of<Rule>()};
  p.batch = &batching::elementwise;
  if constexpr (HasDerivative<Rule>) {
    p.vjp = &unary_vjp<Rule>;
    p.jvp = &unary_jvp<Rule>;
  } else {
    p.differentiable = false;  // piecewise constant: zero gradient, as JAX's floor and sign
  }
  return p;
}
template <class Rule>
consteval ir::primitive binary_primitive(std::string_view name, double flops = 1) {
  ir::primitive p{.name = name, .kind = ir::prim_kind::elementwise, .evaluate_splat = &evaluate_binary<Rule>, .flops_per_element = flops,
                  .lower = lowering_of<Rule>()};
  p.batch = &batching::elementwise;
  if constexpr (HasPartials<Rule>) {
    p.vjp = &binary_vjp<Rule>;
    p.jvp = &binary_jvp<Rule>;
  } else {
    p.differentiable = false;  // comparisons
  }
  return p;
}

// ---- trace time: shape and dtype rules -----------------------------------------------------------

template <class Rule, class X>
consteval bool check_domain() {
  using T = typename X::value_type;
  constexpr bool ok = rule_accepts<Rule, T>();
  if constexpr (!ok) {
    raise<fit<[] {
      message_builder m;
      m << Rule::name << ": ";
      append_type<X>(m) << " has dtype " << dtype_name<T>() << ", but the operation takes "
                        << (Rule::domain == accepts::floating  ? "f32 or bf16"
                            : Rule::domain == accepts::numeric ? "f32, bf16, s32 or u32"
                                                               : "s32, u32 or pred")
                        << "; fix: convert_element_type the operand first";
      return m;
    }>()>();
  }
  return ok;
}

template <const ir::primitive& P, class Rule, Traced X>
constexpr auto unary(X x) {
  using T = typename X::value_type;
  using R = result_t<Rule, T>;
  if constexpr (check_domain<Rule, X>()) {
    return ir::emit<R, typename X::shape_type>(x.graph, P, {x.id}, {}, ir::code_of<T>());
  } else {
    return tracer<R, typename X::shape_type>{x.graph, x.id};
  }
}

// A scalar operand becomes a literal of the tensor operand's dtype (JAX's weak typing).
template <class T, class X>
constexpr auto as_tracer(ir::graph_builder* g, X x) {
  if constexpr (Traced<X>) {
    return x;
  } else {
    return literal<T>(g, static_cast<double>(x));  // literal<T> rounds it to T
  }
}

template <const ir::primitive& P, class Rule, class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto binary(A a, B b) {
  using first = std::conditional_t<Traced<A>, A, B>;
  using T = typename first::value_type;
  ir::graph_builder* g;
  if constexpr (Traced<A>) g = a.graph;
  else g = b.graph;
  using R = result_t<Rule, T>;
  if constexpr (Tensor<A> || Tensor<B>) {
    reject_concrete<Rule::name, std::conditional_t<Tensor<A>, A, B>>();
    return tracer<R, typename first::shape_type>{g, -1};
  } else {
    auto ta = as_tracer<T>(g, a);
    auto tb = as_tracer<T>(g, b);
    using TA = decltype(ta);
    using TB = decltype(tb);
    if constexpr (require_same_dtype<Rule::name, TA, TB>() && check_domain<Rule, TA>() && broadcasts<Rule::name, TA, TB>()) {
      using S = broadcast_shapes_t<TA, TB, Rule::name>;
      auto ba = broadcast_to<S>(ta);
      auto bb = broadcast_to<S>(tb);
      return ir::emit<R, S>(g, P, {ba.id, bb.id}, {}, ir::code_of<T>());
    } else {
      return tracer<R, typename first::shape_type>{g, -1};
    }
  }
}

}  // namespace tessel::prim

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/prim/family/elementwise-inl.hpp"
#endif
