#pragma once
// scan and fori_loop (jax.lax.scan, jax.lax.fori_loop): loops that run at run time, traced once.
//
//   auto [h, hs] = tessel::scan([&](auto h, auto x) { auto n = tessel::tanh(tessel::matmul(h, w) + x);
//                                                     return std::tuple{n, n}; }, h0, xs);
//
// Inside a traced function (jit, grad), f(carry, x) -> (new carry, y) is called once, with tracers for a
// carry and for one slice x of xs (xs: a tensor or a tree of them, all with the same leading length L);
// its nodes form a region of the program (ir/graph.hpp) that the executor runs L times, so a 1000-step
// scan is one body in the program. Values f reads from the enclosing function (weights) are computed
// once, outside the loop. The result is (final carry, ys stacked on a new leading axis of length L).
// The carry is a tracer or a tree of them and the body must return a carry of exactly its dtypes and
// shapes (a compile error names the first leaf that differs). Without xs, give the length:
// scan<L>(f, init) calls f(carry, std::tuple<>{}). options: reverse runs the steps from L - 1 down to 0
// (ys are still stored at their step's index, as in JAX); unroll is accepted for JAX's signature and has
// no effect here (the body is one sub-plan run per step). grad through scan is a reverse scan and jvp
// a scan over (value, tangent) pairs (transform/control_vjp.hpp); vmap of a scan is not written yet (a
// compile error says so). Structs of ys come back as the same struct over a family of stacked tracers.

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/core/error.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/control.hpp"
#include "tessel/prim/literal.hpp"
#include "tessel/transform/autodiff.hpp"

namespace tessel {

struct scan_options {
  bool reverse = false;
  int unroll = 1;  // accepted, no effect (see above)
};

namespace control_detail {

template <std::size_t L, class S>
struct prepend;
template <std::size_t L, std::size_t... D>
struct prepend<L, shape<D...>> {
  using type = shape<L, D...>;
};
template <class S>
struct drop_leading {
  using type = shape<>;
};
template <std::size_t L, std::size_t... D>
struct drop_leading<shape<L, D...>> {
  using type = shape<D...>;
};

template <std::size_t L, template <class, class> class From>
struct stack_family {
  template <class T, class S>
  using type = tracer<T, typename prepend<L, typename From<T, S>::shape_type>::type>;
};
template <template <class, class> class From>
struct slice_family {
  template <class T, class S>
  using type = tracer<T, typename drop_leading<typename From<T, S>::shape_type>::type>;
};

// The tree of a y stacked L times, and of one slice of an x.
template <std::size_t L, class Y>
struct stacked {
  using type = Y;
};
template <std::size_t L, class T, class S>
struct stacked<L, tracer<T, S>> {
  using type = tracer<T, typename prepend<L, S>::type>;
};
template <std::size_t L, class... Y>
struct stacked<L, std::tuple<Y...>> {
  using type = std::tuple<typename stacked<L, Y>::type...>;
};
template <std::size_t L, template <template <class, class> class> class P, template <class, class> class From>
struct stacked<L, P<From>> {
  using type = P<stack_family<L, From>::template type>;
};
template <class X>
struct sliced {
  using type = X;
};
template <class T, class S>
struct sliced<tracer<T, S>> {
  using type = tracer<T, typename drop_leading<S>::type>;
};
template <class... X>
struct sliced<std::tuple<X...>> {
  using type = std::tuple<typename sliced<X>::type...>;
};
template <template <template <class, class> class> class P, template <class, class> class From>
struct sliced<P<From>> {
  using type = P<slice_family<From>::template type>;
};

// What a tree's leaves are, for messages: dtype and dims, in tree order.
struct leaf_info {
  ir::dtype_code dtype{};
  ir::dims shape{};
};
template <class X>
constexpr std::vector<leaf_info> leaves_of() {
  std::vector<leaf_info> out;
  X x{};
  tree::for_each(x, [&](const auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    out.push_back(leaf_info{ir::code_of<typename L::value_type>(), ir::dims_of<typename L::shape_type>()});
  });
  return out;
}
constexpr message_builder& append_leaf(message_builder& m, const leaf_info& l) {
  m << ir::name_of(l.dtype) << '[';
  for (std::size_t i = 0; i < l.shape.rank; ++i) {
    if (i) m << ',';
    m << static_cast<std::uint64_t>(l.shape.d[i]);
  }
  return m << ']';
}

template <class X>
consteval bool is_tracer_tree() {
  if constexpr (Traced<X>) return true;
  else if constexpr (is_tuple_v<X>) return []<class... P>(std::type_identity<std::tuple<P...>>) {
    return (is_tracer_tree<P>() && ...);
  }(std::type_identity<X>{});
  else if constexpr (Struct<X>) {
    bool ok = true;
    X x{};
    tree::for_each(x, [&](const auto& leaf) { ok = ok && Traced<std::remove_cvref_t<decltype(leaf)>>; });
    return ok;
  } else return false;
}

// The common leading length of xs' leaves; 0 if a leaf is a scalar, -1 if they differ.
template <class X>
consteval long leading_length() {
  long length = -2;
  for (const leaf_info& l : leaves_of<X>()) {
    const long here = l.shape.rank == 0 ? 0 : static_cast<long>(l.shape.d[0]);
    if (length == -2) length = here;
    else if (length != here) return -1;
  }
  return length;
}

template <class C, class NewC>
consteval bool check_carry() {
  if constexpr (std::is_same_v<C, NewC>) {
    return true;
  } else if constexpr (!is_tracer_tree<NewC>()) {
    raise<"tessel::scan: the body must return (new carry, y) where the new carry is a tree of the same tensors as the "
          "carry; fix: return std::tuple{carry, y}", NewC>();
    return false;
  } else {
    raise<fit<[] {
      message_builder m;
      m << "tessel::scan: the carry must keep its dtypes and shapes across the body, but ";
      const auto a = leaves_of<C>(), b = leaves_of<NewC>();
      if (a.size() != b.size()) {
        m << "the body returns " << static_cast<std::uint64_t>(b.size()) << " carry leaves for "
          << static_cast<std::uint64_t>(a.size());
      } else {
        for (std::size_t i = 0; i < a.size(); ++i)
          if (a[i].dtype != b[i].dtype || !(a[i].shape == b[i].shape)) {
            m << "carry leaf " << static_cast<std::uint64_t>(i) << " goes in as ";
            append_leaf(m, a[i]) << " and comes out as ";
            append_leaf(m, b[i]);
            break;
          }
      }
      return m << "; fix: return a new carry of the same type (convert_element_type, reshape or broadcast it)";
    }>()>();
    return false;
  }
}

template <class R>
inline constexpr bool is_pair_v = false;
template <class A, class B>
inline constexpr bool is_pair_v<std::tuple<A, B>> = true;
template <class A, class B>
inline constexpr bool is_pair_v<std::pair<A, B>> = true;

template <class X>
constexpr ir::graph_builder* graph_of(const X& x) {
  ir::graph_builder* g = nullptr;
  tree::for_each(x, [&](const auto& leaf) {
    if (g == nullptr) g = leaf.graph;
  });
  return g;
}

// A tree of X's type whose leaves are new region parameters of region r.
template <class X>
constexpr X region_parameters(ir::graph_builder& g, int r) {
  X x{};
  tree::for_each(x, [&](auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    leaf.graph = &g;
    leaf.id = prim::control::region_parameter(g, r, ir::code_of<typename L::value_type>(), ir::dims_of<typename L::shape_type>());
  });
  return x;
}

// A tree of X's type whose leaves are the construct's next outputs.
template <class X>
constexpr X construct_outputs(ir::graph_builder& g, int c) {
  X x{};
  tree::for_each(x, [&](auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    leaf.graph = &g;
    leaf.id = prim::control::output(g, c, ir::code_of<typename L::value_type>(), ir::dims_of<typename L::shape_type>());
  });
  return x;
}

// What a construct returns after a compile error was raised: leaves naming node 0, so that nothing after
// the message fails on an index out of range.
template <class X>
constexpr X placeholder(ir::graph_builder* g) {
  X x{};
  tree::for_each(x, [&](auto& leaf) {
    leaf.graph = g;
    leaf.id = 0;
  });
  return x;
}

template <class X>
constexpr void push_ids(const X& x, std::vector<int>& ids) {
  tree::for_each(x, [&](const auto& leaf) { ids.push_back(leaf.id); });
}

template <std::size_t L, class F, class C, class X>
constexpr auto scan_impl(F& f, const C& init, const X& xs, ir::graph_builder* graph, scan_options o) {
  using XS = typename sliced<X>::type;
  using R = std::remove_cvref_t<decltype(f(std::declval<const C&>(), std::declval<const XS&>()))>;
  if constexpr (!is_pair_v<R>) {
    raise<"tessel::scan: the body must return a pair (new carry, y); fix: return std::tuple{carry, y} (y may be "
          "std::tuple<>{})", R>();
    return placeholder<std::tuple<C, std::tuple<>>>(graph);
  } else {
    using NewC = std::remove_cvref_t<std::tuple_element_t<0, R>>;
    using Y = std::remove_cvref_t<std::tuple_element_t<1, R>>;
    using YS = typename stacked<L, Y>::type;
    if constexpr (!check_carry<C, NewC>()) {
      return placeholder<std::tuple<C, YS>>(graph);
    } else if constexpr (!is_tracer_tree<Y>()) {
      raise<"tessel::scan: the body's y must be a tensor computed in the body, or a tree of them (std::tuple<>{} for "
            "none)", Y>();
      return placeholder<std::tuple<C, YS>>(graph);
    } else {
      ir::graph_builder& g = *graph;
      const int c = prim::control::new_construct(g, ir::construct_kind::scan);
      {
        ir::construct_record& cr = g.constructs[static_cast<std::size_t>(c)];
        cr.length = static_cast<int>(L);
        cr.reverse = o.reverse;
        cr.carries = static_cast<int>(tree::leaf_count<C>());
      }
      std::vector<int> inputs;
      push_ids(init, inputs);
      push_ids(xs, inputs);
      g.constructs[static_cast<std::size_t>(c)].inputs = inputs;
      const int r = prim::control::open_region(g, c);
      const C carry = region_parameters<C>(g, r);
      const XS x = region_parameters<XS>(g, r);
      const R result = f(carry, x);
      std::vector<int> results;
      push_ids(std::get<0>(result), results);
      push_ids(std::get<1>(result), results);
      prim::control::close_region(g, r, results);
      const C final_carry = construct_outputs<C>(g, c);
      const YS ys = construct_outputs<YS>(g, c);
      return std::tuple<C, YS>{final_carry, ys};
    }
  }
}

template <class C>
consteval bool check_init() {
  if constexpr (!is_tracer_tree<C>() || tree::leaf_count<C>() == 0) {
    raise<"tessel::scan: the carry must be a traced tensor or a tree of them, inside a traced function (jit, grad); "
          "fix: call scan from the function you jit, on its arguments or values computed from them", C>();
    return false;
  } else {
    return true;
  }
}

}  // namespace control_detail

// (final carry, stacked ys) of f run over the leading axis of xs.
template <class F, class C, class X>
constexpr auto scan(F f, const C& init, const X& xs, scan_options o = {}) {
  constexpr long L = control_detail::leading_length<X>();
  if constexpr (!control_detail::check_init<C>()) {
    return std::tuple<C, std::tuple<>>{};
  } else if constexpr (!control_detail::is_tracer_tree<X>() || L <= 0) {
    raise<"tessel::scan: xs must be traced tensors (or a tree of them) that all have the same leading length, at least "
          "1; fix: stack the sequence on axis 0, or use scan<length>(f, init) without xs", X>();
    return std::tuple<C, std::tuple<>>{};
  } else {
    return control_detail::scan_impl<static_cast<std::size_t>(L)>(f, init, xs, control_detail::graph_of(init), o);
  }
}

// A scan without xs: f(carry, std::tuple<>{}) runs Length times.
template <std::size_t Length, class F, class C>
constexpr auto scan(F f, const C& init, scan_options o = {}) {
  if constexpr (!control_detail::check_init<C>()) {
    return std::tuple<C, std::tuple<>>{};
  } else {
    return control_detail::scan_impl<Length>(f, init, std::tuple<>{}, control_detail::graph_of(init), o);
  }
}

// jax.lax.fori_loop with static bounds: body(i, value) -> value for i = Lower .. Upper - 1, i an s32 scalar.
// A scan over the carry (i, value); gradients flow through value.
template <std::int32_t Lower, std::int32_t Upper, class F, class V>
constexpr V fori_loop(F body, const V& init) {
  static_assert(Upper >= Lower, "tessel::fori_loop: Upper must not be less than Lower");
  if constexpr (!control_detail::check_init<V>()) {
    return init;
  } else {
    ir::graph_builder* g = control_detail::graph_of(init);
    const auto start = prim::literal<std::int32_t>(g, Lower);
    using I = tracer<std::int32_t, shape<>>;
    auto step = [&body](const std::tuple<I, V>& carry, const std::tuple<>&) {
      const I i = std::get<0>(carry);
      const I one{i.graph, prim::build::literal(*i.graph, ir::dtype_code::s32, 1.0)};
      const I next{i.graph, prim::build::add(*i.graph, i.id, one.id)};
      const V v = body(i, std::get<1>(carry));
      return std::tuple{std::tuple<I, V>{next, v}, std::tuple<>{}};
    };
    const auto out = control_detail::scan_impl<static_cast<std::size_t>(Upper - Lower)>(step, std::tuple<I, V>{start, init}, std::tuple<>{}, g,
                                                                                        scan_options{});
    return std::get<1>(std::get<0>(out));
  }
}

}  // namespace tessel
