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
// (ys are still stored at their step's index, as in JAX); unroll = U (at least 1; less is reported at
// the jit call that traces the scan) traces U copies of the body into the loop body, so
// each loop iteration runs U steps: the planner fuses across them and the executor's per-iteration cost
// is paid L / U times; the L % U remaining steps are traced after the loop, outside it, and U >= L
// unrolls the whole scan (no loop). Results are bit-identical to unroll 1 (the same steps in the same
// order, reverse included); the program grows with U (scan_unrolled below), and so does compile time:
// 1000 steps of a small cell fully unrolled exceed g++'s default -fconstexpr-ops-limit. grad through scan is a
// reverse scan and jvp a scan over (value, tangent) pairs (transform/control_vjp.hpp); vmap batches
// the scan whole (transform/control_batching.hpp). Structs of ys come back as the same struct over a
// family of stacked tracers.

#include <array>
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
  int unroll = 1;  // steps of the body per loop iteration, at least 1 (see above)
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

// ---- unroll: U steps of the body per loop iteration (value level, so U may come from the options) ----


// A tree of X's type whose leaves are the given node ids, in tree order.
template <class X>
constexpr X with_ids(ir::graph_builder& g, const std::vector<int>& ids, std::size_t first = 0) {
  X x{};
  std::size_t i = first;
  tree::for_each(x, [&](auto& leaf) {
    leaf.graph = &g;
    leaf.id = ids[i++];
  });
  return x;
}

// n copies of v (a sized std::vector constructor is not constant-evaluable on clang with libstdc++).
constexpr std::vector<int> filled(std::size_t n, int v) {
  std::vector<int> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(v);
  return out;
}

// count rows of x from row `begin` (its leading axis).
constexpr int rows_of(ir::graph_builder& g, int x, std::size_t begin, std::size_t count) {
  const ir::dims s = g[x].shape;
  prim::build::offsets start{}, stride{};
  stride.fill(1);
  start[0] = static_cast<std::int64_t>(begin);
  ir::dims out = s;
  out.d[0] = count;
  return prim::build::slice(g, x, start, stride, out);
}

// x with a new axis of length 1 at `axis`.
constexpr int insert_unit_axis(ir::graph_builder& g, int x, std::size_t axis) {
  const ir::dims s = g[x].shape;
  ir::dims out;
  out.rank = static_cast<std::uint8_t>(s.rank + 1);
  for (std::size_t i = 0, k = 0; i < out.rank; ++i) out.d[i] = i == axis ? 1 : s.d[k++];
  return prim::build::reshape(g, x, out);
}

// parts joined along `axis`, in order (concatenations of two or three, nested log-deep).
constexpr int join(ir::graph_builder& g, std::vector<int> parts, std::size_t axis) {
  while (parts.size() > 1) {
    std::vector<int> next;
    for (std::size_t i = 0; i < parts.size();) {
      const std::size_t n = parts.size() - i >= 3 ? 3 : parts.size() - i;
      if (n == 1) {
        next.push_back(parts[i]);
      } else {
        std::array<int, ir::max_operands> a{};
        for (std::size_t k = 0; k < n; ++k) a[k] = parts[i + k];
        next.push_back(prim::build::concatenate(g, a, n, axis));
      }
      i += n;
    }
    parts = next;
  }
  return parts[0];
}

// Steps [begin, end) of the scan traced inline (no loop), in step order (descending when reverse); the
// carry is threaded through and, for each y leaf, the ys come back joined in index order.
template <class F, class C, class XS, class Y>
constexpr C inline_steps(F& f, C carry, const std::vector<int>& xs, ir::graph_builder& g, std::size_t begin, std::size_t end,
                         bool reverse, std::vector<int>& ys) {
  const std::size_t nx = xs.size(), ny = tree::leaf_count<Y>();
  std::vector<std::vector<int>> pieces;
  for (std::size_t l = 0; l < ny; ++l) pieces.push_back(filled(end - begin, -1));
  for (std::size_t k = 0; k < end - begin; ++k) {
    const std::size_t i = reverse ? end - 1 - k : begin + k;
    std::vector<int> x_ids;
    for (std::size_t l = 0; l < nx; ++l)
      x_ids.push_back(prim::build::reshape(g, rows_of(g, xs[l], i, 1), prim::control::unstacked(g[xs[l]].shape)));
    const auto result = f(std::as_const(carry), with_ids<XS>(g, x_ids));
    carry = std::get<0>(result);
    std::vector<int> y_ids;
    push_ids(std::get<1>(result), y_ids);
    for (std::size_t l = 0; l < ny; ++l) pieces[l][i - begin] = insert_unit_axis(g, y_ids[l], 0);
  }
  ys.clear();
  for (std::size_t l = 0; l < ny; ++l) ys.push_back(join(g, pieces[l], 0));
  return carry;
}

// scan with o.unroll = U > 1 (as JAX lowers it): with Q = L / U loop iterations and R = L % U, a scan of
// length Q whose body is U copies of f (steps qU .. qU + U - 1, descending when reverse), then the R
// remaining steps traced inline (forward: steps QU .. L - 1 after the loop; reverse: steps R - 1 .. 0
// after the loop over R .. L - 1). Each xs leaf [L, ...] is split once, before the loop, into U leaves
// [Q, ...] (leaf j holds steps qU + j), and each y leaf comes back as U leaves [Q, ...] interleaved into
// [QU, ...] after it; so the loop body holds only the U copies of f, and the program is an ordinary scan
// construct (grad, jvp and vmap see nothing new). U >= L: every step inline, no loop.
template <std::size_t L, class F, class C, class X, class XS, class Y, class YS>
constexpr std::tuple<C, YS> scan_unrolled(F& f, const C& init, const X& xs, ir::graph_builder& g, scan_options o) {
  const std::size_t U = static_cast<std::size_t>(o.unroll) >= L ? L : static_cast<std::size_t>(o.unroll);
  const std::size_t Q = U == L ? 0 : L / U, R = L - Q * U;
  const std::size_t loop_begin = o.reverse ? R : 0;                    // the loop's steps: [loop_begin, loop_begin + QU)
  const std::size_t rest_begin = o.reverse ? 0 : Q * U, rest_end = rest_begin + R;
  std::vector<int> x_ids;
  push_ids(xs, x_ids);
  const std::size_t nx = x_ids.size(), nc = tree::leaf_count<C>();
  const std::vector<leaf_info> y_leaves = leaves_of<Y>();
  const std::size_t ny = y_leaves.size();
  C carry = init;
  std::vector<int> loop_ys = filled(ny, -1);
  if (Q > 0) {
    std::vector<int> inputs;
    push_ids(init, inputs);
    for (std::size_t j = 0; j < U; ++j)
      for (std::size_t l = 0; l < nx; ++l) {  // leaf l, steps loop_begin + qU + j: a strided slice of rows
        const ir::dims s = g[x_ids[l]].shape;
        prim::build::offsets start{}, stride{};
        stride.fill(1);
        start[0] = static_cast<std::int64_t>(loop_begin + j);
        stride[0] = static_cast<std::int64_t>(U);
        ir::dims out = s;
        out.d[0] = Q;
        inputs.push_back(prim::build::slice(g, x_ids[l], start, stride, out));
      }
    const int c = prim::control::new_construct(g, ir::construct_kind::scan);
    {
      ir::construct_record& cr = g.constructs[static_cast<std::size_t>(c)];
      cr.length = static_cast<int>(Q);
      cr.reverse = o.reverse;
      cr.carries = static_cast<int>(nc);
      cr.inputs = inputs;
    }
    const int r = prim::control::open_region(g, c);
    C body_carry = region_parameters<C>(g, r);
    std::vector<int> params;
    for (std::size_t j = 0; j < U; ++j) push_ids(region_parameters<XS>(g, r), params);
    std::vector<int> slot_ys = filled(U * ny, -1);
    for (std::size_t k = 0; k < U; ++k) {
      const std::size_t j = o.reverse ? U - 1 - k : k;
      const auto result = f(std::as_const(body_carry), with_ids<XS>(g, params, j * nx));
      body_carry = std::get<0>(result);
      std::vector<int> y_ids;
      push_ids(std::get<1>(result), y_ids);
      for (std::size_t l = 0; l < ny; ++l) slot_ys[j * ny + l] = y_ids[l];
    }
    std::vector<int> results;
    push_ids(body_carry, results);
    results.insert(results.end(), slot_ys.begin(), slot_ys.end());
    prim::control::close_region(g, r, results);
    carry = construct_outputs<C>(g, c);
    std::vector<std::vector<int>> outs;
    for (std::size_t l = 0; l < ny; ++l) outs.push_back({});
    for (std::size_t j = 0; j < U; ++j)
      for (std::size_t l = 0; l < ny; ++l)
        outs[l].push_back(prim::control::output(g, c, y_leaves[l].dtype, prim::control::stacked(Q, y_leaves[l].shape)));
    for (std::size_t l = 0; l < ny; ++l) {  // [Q, ...] x U -> [Q, U, ...] -> [QU, ...]
      for (int& id : outs[l]) id = insert_unit_axis(g, id, 1);
      loop_ys[l] = prim::build::reshape(g, join(g, outs[l], 1), prim::control::stacked(Q * U, y_leaves[l].shape));
    }
  }
  std::vector<int> rest_ys = filled(ny, -1);
  if (R > 0) carry = inline_steps<F, C, XS, Y>(f, carry, x_ids, g, rest_begin, rest_end, o.reverse, rest_ys);
  std::vector<int> ys = filled(ny, -1);
  for (std::size_t l = 0; l < ny; ++l) {
    if (Q == 0) ys[l] = rest_ys[l];
    else if (R == 0) ys[l] = loop_ys[l];
    else ys[l] = o.reverse ? join(g, {rest_ys[l], loop_ys[l]}, 0) : join(g, {loop_ys[l], rest_ys[l]}, 0);
  }
  return std::tuple<C, YS>{carry, with_ids<YS>(g, ys)};
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
      if (o.unroll < 1) {  // a value: reported by the jit that traces this, and the scan traced with unroll 1
        graph->report_error((message_builder{} << "tessel::scan: unroll is " << static_cast<std::int64_t>(o.unroll)
                                               << "; it must be at least 1 (the steps of the body in one loop "
                                                  "iteration); fix: pass unroll = 1 for one step per iteration")
                                .view());
        o.unroll = 1;
      }
      if (o.unroll > 1 && L > 1) return scan_unrolled<L, F, C, X, XS, Y, YS>(f, init, xs, *graph, o);
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
