#pragma once
// select (lax.select, jnp.where): pred ? on_true : on_false elementwise, with NumPy broadcasting of all
// three operands. pred must be pred (bool); the branches share a dtype (a scalar branch takes the other's).

#include <cstdint>

#include <algorithm>
#include <array>

#include "tessel/prim/family/elementwise.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {

// The kernel: declared here and defined only where TESSEL_IMPLEMENTATION is (the tessel library), so it
// is compiled once, with the library's flags, and not in each program at its own (as the elementwise
// rules' tile functions are). Any operand may be one value (ir::splat_fn): relu's gradient selects
// between the cotangent and a literal 0, a masked softmax between the scores and a literal -inf.
void evaluate_select(const ir::node& node, const void* const* in, unsigned splat, void* out, std::size_t n);

#ifdef TESSEL_IMPLEMENTATION
// The predicate read as bytes (0 or 1), not as bool: g++ 12 vectorizes the byte compare, not the bool
// test (scalar, 44% of the Fashion-MNIST CNN's relu-gradient kernel).
template <bool SplatA, bool SplatB, class V>
void select_tiles(const unsigned char* p, const V* a, const V* b, V* y, std::size_t n) {
  const V one_a = SplatA ? a[0] : V{}, one_b = SplatB ? b[0] : V{};
  for (std::size_t i = 0; i < n; ++i) y[i] = p[i] != 0 ? (SplatA ? one_a : a[i]) : (SplatB ? one_b : b[i]);
}

template <class T>
void select_as(const void* const* in, unsigned splat, void* out, std::size_t n) {
  using V = tile_t<T>;
  const auto* p = static_cast<const unsigned char*>(in[0]);
  const V* a = static_cast<const V*>(in[1]);
  const V* b = static_cast<const V*>(in[2]);
  V* y = static_cast<V*>(out);
  if (splat & 1u) {  // one predicate: the branch it takes, whole
    const bool take_a = p[0] != 0;
    const V* from = take_a ? a : b;
    if (splat & (take_a ? 2u : 4u)) std::fill_n(y, n, from[0]);
    else std::copy_n(from, n, y);
    return;
  }
  switch (splat >> 1 & 3u) {
    case 0: select_tiles<false, false>(p, a, b, y, n); break;
    case 1: select_tiles<true, false>(p, a, b, y, n); break;
    case 2: select_tiles<false, true>(p, a, b, y, n); break;
    default: select_tiles<true, true>(p, a, b, y, n);
  }
}

void evaluate_select(const ir::node& node, const void* const* in, unsigned splat, void* out, std::size_t n) {
  visit_dtype(node.dtype, [&]<class T>(T) { select_as<tile_t<T>>(in, splat, out, n); });
}
#endif  // TESSEL_IMPLEMENTATION

// The cotangent flows to the branch each element took; the predicate gets none.
constexpr void select_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const int zero = build::zeros_like(g, ct);
  out[1] = build::select(g, n.operands[0], ct, zero);
  out[2] = build::select(g, n.operands[0], zero, ct);
}
constexpr int select_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  if (t[1] < 0 && t[2] < 0) return -1;
  const ir::node n = g[node];
  const int a = t[1] >= 0 ? t[1] : build::zeros_like(g, node);
  const int b = t[2] >= 0 ? t[2] : build::zeros_like(g, node);
  return build::select(g, n.operands[0], a, b);
}

inline void lower_select(ir::stablehlo_writer& w) { w.lower_as("stablehlo.select"); }
inline constexpr ir::primitive select_p{.name = "select", .kind = ir::prim_kind::elementwise, .evaluate_splat = &evaluate_select,
                                        .vjp = &select_vjp, .jvp = &select_jvp, .batch = &batching::elementwise, .lower = &lower_select};

template <class P>
consteval bool check_predicate() {
  constexpr bool ok = std::is_same_v<typename P::value_type, bool>;
  if constexpr (!ok) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::select: the predicate ";
      append_type<P>(m) << " must have dtype pred; fix: compare it (x > 0) or convert_element_type<bool>";
      return m;
    }>()>();
  }
  return ok;
}
}  // namespace prim

template <Traced P, class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto select(P pred, A on_true, B on_false) {
  using first = std::conditional_t<Traced<A>, A, B>;
  using T = typename first::value_type;
  auto a = prim::as_tracer<T>(pred.graph, on_true);
  auto b = prim::as_tracer<T>(pred.graph, on_false);
  using TA = decltype(a);
  using TB = decltype(b);
  if constexpr (prim::check_predicate<P>() && require_same_dtype<"tessel::select", TA, TB>() &&
                broadcasts<"tessel::select", P, TA>() && broadcasts<"tessel::select", broadcast_shapes_t<P, TA>, TB>()) {
    using S = broadcast_shapes_t<broadcast_shapes_t<P, TA, "tessel::select">, TB, "tessel::select">;
    auto bp = broadcast_to<S>(pred);
    auto ba = broadcast_to<S>(a);
    auto bb = broadcast_to<S>(b);
    return ir::emit<T, S>(pred.graph, prim::select_p, {bp.id, ba.id, bb.id}, {}, ir::dtype_code::pred);
  } else {
    return tracer<T, typename first::shape_type>{pred.graph, -1};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor P, class A, class B>
  requires(Eager<P, A, B>)
auto select(const P& pred, const A& on_true, const B& on_false) {
  return eagerly([](auto pred, auto on_true, auto on_false) { return select(pred, on_true, on_false); }, pred, on_true, on_false);
}

// jnp.where's name for the same operation.
template <Traced P, class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto where(P pred, A on_true, B on_false) {
  return select(pred, on_true, on_false);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor P, class A, class B>
  requires(Eager<P, A, B>)
auto where(const P& pred, const A& on_true, const B& on_false) {
  return eagerly([](auto pred, auto on_true, auto on_false) { return where(pred, on_true, on_false); }, pred, on_true, on_false);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
