#pragma once
// psum (lax.psum): the sum over the devices of the named mesh axes of the surrounding shard_map; every
// device of a group gets the same sum, so the result no longer varies along those axes. pmean is psum
// divided by the axes' size (as JAX's).
//
//   psum<"data">(x)                 // over one axis
//   psum<mesh_axes<"data", "model">>(x)  // over several
//
// A sum in a fixed order (member 0 + member 1 + ... for every element, whichever device adds it), so results
// are bit-identical from run to run. Transpose: pvary (JAX's check_vma rule: the cotangent of an invariant
// result is handed to every device unchanged); JVP: psum of the tangent; batching: per batch element.
// α-β cost (ring all-reduce): 2(N-1)α + 2(N-1)/N · bytes · β.

#include <array>
#include <type_traits>

#include "tessel/core/error.hpp"
#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/collective.hpp"

namespace tessel {
namespace prim {

constexpr void psum_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = collective::remake(g, pvary_p, n, ct, g[n.operands[0]].shape, n.attr);
}
constexpr int psum_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : collective::remake(g, psum_p, n, t[0], n.shape, n.attr);
}

inline constexpr ir::primitive psum_p{.name = "psum",
                                      .kind = ir::prim_kind::layout,
                                      .run = &collective::run_all_reduce<collective::reduction::sum>,
                                      .vjp = &psum_vjp,
                                      .jvp = &psum_jvp,
                                      .batch = &collective::batch_in_place,
                                      .varying = &collective::invariant_along,
                                      .flops_per_element = 1, .lower = &collective::lower_all_reduce<collective::reduction::sum>};

namespace collective {
template <fixed_string Op, class X>
consteval bool require_numeric() {
  if constexpr (std::is_same_v<typename X::value_type, bool>) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": the operand is ";
      append_type<X>(m) << "; a reduction over devices takes f32, bf16, s32 or u32; fix: convert the operand first (astype<int32>)";
      return m;
    }>(), X>();
    return false;
  }
  return true;
}

// A reduction over the named axes, emitted: psum_p, reduce_max's pmax_p, pmin_p.
template <class X>
constexpr X all_reduce(const ir::primitive& p, std::string_view op, const spec_entry& names, X x, std::size_t* size = nullptr) {
  ir::attributes a;
  const std::size_t n = bind(*x.graph, op, names, a);
  if (size) *size = n;
  return X{x.graph, ir::make_node(*x.graph, p, x.graph->operator[](x.id).dtype, x.graph->operator[](x.id).shape, {x.id}, a)};
}
}  // namespace collective
}  // namespace prim

template <spec_entry Axes, Traced X>
constexpr X psum(X x) {
  if constexpr (!prim::collective::require_numeric<"tessel::psum", X>()) return x;
  else return prim::collective::all_reduce(prim::psum_p, "tessel::psum", Axes, x);
}

// psum(x) / N, N the product of the axes' sizes (floating point only, as the division is).
template <spec_entry Axes, Traced X>
constexpr X pmean(X x) {
  using T = typename X::value_type;
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, bfloat16>) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::pmean: the operand is ";
      append_type<X>(m) << "; a mean over devices is floating point; fix: convert the operand to f32 first, or use psum";
      return m;
    }>(), X>();
    return x;
  } else {
    std::size_t n = 1;
    const X sum = prim::collective::all_reduce(prim::psum_p, "tessel::pmean", Axes, x, &n);
    ir::graph_builder& g = *x.graph;
    return X{x.graph, prim::build::div(g, sum.id, prim::build::scalar_like(g, sum.id, static_cast<double>(n)))};
  }
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
