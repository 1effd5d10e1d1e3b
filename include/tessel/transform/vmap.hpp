#pragma once
// vmap: JAX's vectorising map. vmap(f) applies f to every slice of its arguments along a batch axis,
// as one program over the whole batch (not a loop):
//
//   auto f = [](auto x, auto w) { return tessel::relu(tessel::matmul(x, w)); };   // x f32[K] -> f32[N]
//   auto ys = tessel::vmap(f, tessel::in_axes<0, tessel::none>)(xs, w);           // xs f32[B,K] -> f32[B,N]
//   auto gs = tessel::vmap(tessel::grad(loss), tessel::in_axes<tessel::none, 0, 0>)(w, xs, ys);  // per-example
//
// in_axes<...>: one axis per argument (or one for all), an integer (negative counts from the end) or
// `none` for an argument shared by every slice; it applies to every leaf of a tree argument (a
// std::tuple; a struct may only be shared). out_axes<...>: where the batch axis goes in each result
// (one per element of a returned tuple, or one for all); `none` only for a result that depends on no
// mapped argument. Defaults: in_axes<0>, out_axes<0>.
//
// How: f is traced into a fresh graph at the unbatched shapes; each of its nodes is then emitted into
// the caller's graph through its primitive's batching rule (ir::primitive::batch, in the primitive's
// file), which knows where each operand's batch axis is. Nodes that depend on no mapped argument are
// emitted unchanged; a scan or a cond is emitted whole, with batched bodies (transform/control_batching.hpp:
// carries batched by a fixpoint, a batched predicate turned into a select). The result is an ordinary
// program: it composes with jit, grad and vmap in any order, and is fused and planned like any other.
// Called with tensors, vmap(f) is jitted on the spot (include tessel/jit.hpp for that).

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/transform/control_batching.hpp"
#include "tessel/transform/trace.hpp"

namespace tessel {

template <long... Axes>
struct in_axes_t {
  static constexpr std::array<long, sizeof...(Axes)> values{Axes...};
};
template <long... Axes>
struct out_axes_t {
  static constexpr std::array<long, sizeof...(Axes)> values{Axes...};
};
template <long... Axes>
inline constexpr in_axes_t<Axes...> in_axes{};
template <long... Axes>
inline constexpr out_axes_t<Axes...> out_axes{};

namespace vmap_detail {

// Entry K of an axes list (a single entry applies to all).
template <class Axes, std::size_t K>
consteval long entry() {
  if constexpr (Axes::values.size() == 1) return Axes::values[0];
  else if constexpr (K < Axes::values.size()) return Axes::values[K];
  else return none;
}

// ---- types: a tree with its batch axis removed (an argument) or inserted (a result) ----------------

template <class X, long A>
struct unbatched {
  using type = X;  // a struct (shared), or any tree with A == none
};
template <class T, class S, long A>
  requires(A != none)
struct unbatched<tracer<T, S>, A> {
  using type = tracer<T, drop_axis_t<S, A, "tessel::vmap: in_axes">>;
};
template <class... X, long A>
  requires(A != none)
struct unbatched<std::tuple<X...>, A> {
  using type = std::tuple<typename unbatched<X, A>::type...>;
};

template <class X, long A, std::size_t B>
struct batched {
  using type = X;  // a struct, or any tree with A == none
};
template <class T, class S, long A, std::size_t B>
  requires(A != none)
struct batched<tracer<T, S>, A, B> {
  using type = tracer<T, insert_axis_t<S, A, B, "tessel::vmap: out_axes">>;
};
template <class... X, long A, std::size_t B>
  requires(A != none)
struct batched<std::tuple<X...>, A, B> {
  using type = std::tuple<typename batched<X, A, B>::type...>;
};

// The result type: each element of a returned tuple with its own out_axes entry (one entry: all alike).
template <class R, class Out, std::size_t B>
struct batched_result {
  using type = typename batched<R, entry<Out, 0>(), B>::type;
};
template <class... X, class Out, std::size_t B>
  requires(Out::values.size() > 1)
struct batched_result<std::tuple<X...>, Out, B> {
  using type = decltype([]<std::size_t... K>(std::index_sequence<K...>) {
    return std::tuple<typename batched<X, entry<Out, K>(), B>::type...>{};
  }(std::index_sequence_for<X...>{}));
};

// ---- the checks on in_axes, with the batch size ---------------------------------------------------

struct axes_report {
  int problem = 0;  // 0 fine; 1 axis out of range; 2 sizes differ; 3 nothing mapped; 4 mapped struct; 5 count
  std::size_t arg = 0, rank = 0, size = 0, first_arg = 0, first_size = 0;
  long axis = 0;
  std::size_t batch = 0;
};

template <class Arg>
constexpr void leaf_dims(std::vector<std::size_t>& ranks, std::vector<std::array<std::size_t, ir::max_rank>>& dims) {
  Arg a{};
  tree::for_each(a, [&](const auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    std::array<std::size_t, ir::max_rank> d{};
    for (std::size_t i = 0; i < L::rank; ++i) d[i] = L::shape_type::dims[i];
    ranks.push_back(L::rank);
    dims.push_back(d);
  });
}

template <class In, class... Args>
consteval axes_report check_in_axes() {
  axes_report r;
  if (In::values.size() != 1 && In::values.size() != sizeof...(Args)) {
    r.problem = 5;
    r.size = In::values.size();
    r.rank = sizeof...(Args);
    return r;
  }
  bool found = false;
  auto one = [&]<std::size_t K, class Arg>() {
    constexpr long axis = entry<In, K>();
    if (r.problem != 0 || axis == none) return;
    if constexpr (Struct<Arg>) {
      r.problem = 4;
      r.arg = K;
      return;
    } else {
      std::vector<std::size_t> ranks;
      std::vector<std::array<std::size_t, ir::max_rank>> dims;
      leaf_dims<Arg>(ranks, dims);
      for (std::size_t l = 0; l < ranks.size(); ++l) {
        const long rank = static_cast<long>(ranks[l]);
        if (axis < -rank || axis >= rank) {
          r.problem = 1, r.arg = K, r.axis = axis, r.rank = ranks[l];
          return;
        }
        const std::size_t size = dims[l][static_cast<std::size_t>(axis < 0 ? axis + rank : axis)];
        if (!found) {
          found = true;
          r.first_arg = K, r.first_size = size, r.batch = size;
        } else if (size != r.batch) {
          r.problem = 2, r.arg = K, r.size = size, r.axis = axis;
          return;
        }
      }
    }
  };
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (one.template operator()<K, Args>(), ...);
  }(std::index_sequence_for<Args...>{});
  if (r.problem == 0 && !found) r.problem = 3;
  return r;
}

template <axes_report R>
consteval bool report_in_axes() {
  if constexpr (R.problem != 0) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::vmap: ";
      if (R.problem == 1)
        m << "in_axes gives axis " << static_cast<std::int64_t>(R.axis) << " for argument " << static_cast<std::uint64_t>(R.arg)
          << ", which has rank " << static_cast<std::uint64_t>(R.rank) << " (valid axes are -" << static_cast<std::uint64_t>(R.rank)
          << " to " << static_cast<std::int64_t>(R.rank) - 1 << "); fix: name an axis of the argument, or none to share it";
      else if (R.problem == 2)
        m << "mapped axes have different sizes: argument " << static_cast<std::uint64_t>(R.first_arg) << " has "
          << static_cast<std::uint64_t>(R.first_size) << " along its mapped axis, argument " << static_cast<std::uint64_t>(R.arg)
          << " has " << static_cast<std::uint64_t>(R.size) << " along axis " << static_cast<std::int64_t>(R.axis)
          << "; fix: map axes of one size (the batch size), or pass none for a shared argument";
      else if (R.problem == 3)
        m << "no argument is mapped (every in_axes entry is none); fix: give the batch axis of at least one argument";
      else if (R.problem == 4)
        m << "argument " << static_cast<std::uint64_t>(R.arg)
          << " is a struct, whose members' shapes are fixed, so it cannot be mapped; fix: pass it with in_axes none, or "
             "pass the batched leaves as a std::tuple";
      else
        m << "in_axes has " << static_cast<std::uint64_t>(R.size) << " entries for " << static_cast<std::uint64_t>(R.rank)
          << " arguments; fix: give one axis per argument, or a single one for all";
      return m;
    }>()>();
  }
  return R.problem == 0;
}

// Every leaf's batch axis (normalised; -1 for a shared argument), in tree order over all arguments.
template <class In, class... Args>
constexpr std::vector<int> leaf_axes() {
  std::vector<int> out;
  auto one = [&]<std::size_t K, class Arg>() {
    constexpr long axis = entry<In, K>();
    Arg a{};
    tree::for_each(a, [&](const auto& leaf) {
      constexpr long rank = static_cast<long>(std::remove_cvref_t<decltype(leaf)>::rank);
      out.push_back(axis == none ? -1 : static_cast<int>(axis < 0 ? axis + rank : axis));
    });
  };
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (one.template operator()<K, Args>(), ...);
  }(std::index_sequence_for<Args...>{});
  return out;
}
template <class In, class... Args>
inline constexpr std::size_t leaf_total = leaf_axes<In, Args...>().size();
template <class In, class... Args>
consteval std::array<int, leaf_total<In, Args...> + 1> leaf_axes_array() {
  const std::vector<int> v = leaf_axes<In, Args...>();
  std::array<int, leaf_total<In, Args...> + 1> a{};
  for (std::size_t i = 0; i < v.size(); ++i) a[i] = v[i];
  return a;
}

// Every result leaf's out_axes entry (normalised into the batched rank; -1 for none).
template <class R, class Out>
constexpr std::vector<int> result_axes() {
  std::vector<int> out;
  auto part = [&]<long A, class X>() {
    X x{};
    tree::for_each(x, [&](const auto& leaf) {
      constexpr long rank = static_cast<long>(std::remove_cvref_t<decltype(leaf)>::rank) + 1;
      out.push_back(A == none ? -1 : static_cast<int>(A < 0 ? A + rank : A));
    });
  };
  if constexpr (is_tuple_v<R> && Out::values.size() > 1) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (part.template operator()<entry<Out, K>(), std::tuple_element_t<K, R>>(), ...);
    }(std::make_index_sequence<std::tuple_size_v<R>>{});
  } else {
    part.template operator()<entry<Out, 0>(), R>();
  }
  return out;
}

// ---- tracing f at the unbatched shapes ---------------------------------------------------------------

// Inside a shard_map body each parameter varies along the mesh axes its argument leaf does (`varying`, by
// leaf): vmap maps a batch axis and changes no mesh axis, so a gradient of f inside it still sums a
// replicated argument's cotangent over the axes the body varies along, as JAX's does.
template <class F, class In, class... Args, class Varying = detail::no_context>
constexpr auto trace_unbatched(ir::graph_builder& inner, Varying varying = {}) {
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    std::tuple<typename unbatched<Args, entry<In, K>()>::type...> p{};
    if constexpr (std::is_same_v<Varying, detail::no_context>) detail::bind_parameters(p, inner);
    else detail::bind_parameters(p, inner, varying);
    return F{}(std::get<K>(p)...);
  }(std::index_sequence_for<Args...>{});
}

// For each result leaf: does it depend on a mapped argument?
template <class F, class In, class... Args>
constexpr std::vector<char> mapped_results() {
  ir::graph_builder inner;
  const auto r = trace_unbatched<F, In, Args...>(inner);
  const std::vector<char> dep = batching_detail::analyse(inner, leaf_axes<In, Args...>()).batched;
  std::vector<char> out;
  tree::for_each(r, [&](const auto& leaf) { out.push_back(leaf.id >= 0 && dep[static_cast<std::size_t>(leaf.id)]); });
  return out;
}

template <class R, class Out>
consteval bool check_out_axes_count() {
  if constexpr (Out::values.size() > 1) {
    constexpr std::size_t parts = [] {
      if constexpr (is_tuple_v<R>) return std::tuple_size_v<R>;
      else return std::size_t{1};
    }();
    if constexpr (parts != Out::values.size()) {
      raise<fit<[] {
        return message_builder{} << "tessel::vmap: out_axes has " << static_cast<std::uint64_t>(Out::values.size())
                                 << " entries but the function returns " << static_cast<std::uint64_t>(parts)
                                 << " results; fix: give one axis per element of the returned tuple, or one for all";
      }>()>();
    }
    return parts == Out::values.size();
  }
  return true;
}

// The batched form of a struct result would need other member shapes: only a shared one may be returned.
template <class R, class Out>
consteval bool check_struct_results() {
  bool bad = false;
  auto part = [&]<long A, class X>() { bad = bad || (Struct<X> && A != none); };
  if constexpr (is_tuple_v<R> && Out::values.size() > 1) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (part.template operator()<entry<Out, K>(), std::tuple_element_t<K, R>>(), ...);
    }(std::make_index_sequence<std::tuple_size_v<R>>{});
  } else if constexpr (is_tuple_v<R>) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (part.template operator()<entry<Out, 0>(), std::tuple_element_t<K, R>>(), ...);
    }(std::make_index_sequence<std::tuple_size_v<R>>{});
  } else {
    part.template operator()<entry<Out, 0>(), R>();
  }
  return !bad;
}

template <long Bad>
consteval bool report_unmapped_result() {
  if constexpr (Bad >= 0) {
    raise<fit<[] {
      return message_builder{} << "tessel::vmap: result leaf " << static_cast<std::int64_t>(Bad)
                               << " depends on a mapped argument, but its out_axes entry is none (a batch cannot be "
                                  "returned without an axis); fix: give it an output axis (0 puts the batch first)";
    }>()>();
  }
  return Bad < 0;
}

template <class F, class In, class Out, class R, class... Args>
consteval bool check_results() {
  if constexpr (!detail::is_traced_tree<R>()) {
    raise<"tessel::vmap: the function must return a tensor, or a tree of them (a std::tuple), computed from its arguments", R>();
    return false;
  } else if constexpr (!check_out_axes_count<R, Out>()) {
    return false;
  } else if constexpr (!check_struct_results<R, Out>()) {
    raise<"tessel::vmap: the function returns a struct, whose members' shapes are fixed, so it cannot carry a batch "
          "axis; fix: return its leaves in a std::tuple (or give it out_axes none if it depends on no mapped argument)", R>();
    return false;
  } else {
    constexpr auto bad = [] {
      const std::vector<char> mapped = mapped_results<F, In, Args...>();
      const std::vector<int> axes = result_axes<R, Out>();
      for (std::size_t i = 0; i < mapped.size(); ++i)
        if (mapped[i] && axes[i] < 0) return static_cast<long>(i);
      return -1L;
    }();
    return report_unmapped_result<bad>();
  }
}

template <class T>
constexpr void collect_ids(const T& x, std::vector<int>& ids) {
  tree::for_each(x, [&](const auto& leaf) { ids.push_back(leaf.id); });
}

}  // namespace vmap_detail

template <class F, class In, class Out>
struct vmap_fn : detail::jit_when_concrete<vmap_fn<F, In, Out>> {
 private:
  friend detail::jit_when_concrete<vmap_fn>;
  template <class... Args>
  constexpr auto traced(const Args&... args) const {
    constexpr vmap_detail::axes_report report = vmap_detail::check_in_axes<In, Args...>();
    if constexpr (!vmap_detail::report_in_axes<report>()) {
      return tracer<float, shape<>>{};
    } else {
      using R = decltype(vmap_detail::trace_unbatched<F, In, Args...>(std::declval<ir::graph_builder&>()));
      if constexpr (!vmap_detail::check_results<F, In, Out, R, Args...>()) {
        // Where the result's type is known, a placeholder of it (tracers of id -1), so that the caller's
        // code using the result reports nothing more.
        if constexpr (detail::is_traced_tree<R>() && vmap_detail::check_out_axes_count<R, Out>() &&
                      vmap_detail::check_struct_results<R, Out>())
          return typename vmap_detail::batched_result<R, Out, report.batch>::type{};
        else
          return tracer<float, shape<>>{};
      } else {
        using result = typename vmap_detail::batched_result<R, Out, report.batch>::type;
        constexpr std::size_t batch = report.batch;
        ir::graph_builder* outer = nullptr;
        std::vector<int> leaves;
        ((tree::for_each(args, [&](const auto& leaf) { outer = outer ? outer : leaf.graph; }), vmap_detail::collect_ids(args, leaves)),
         ...);
        ir::graph_builder& g = *outer;
        constexpr auto axes = vmap_detail::leaf_axes_array<In, Args...>();

        ir::graph_builder inner;
        inner.mesh = g.mesh;  // collectives inside a vmapped function inside shard_map see its mesh
        const R r = vmap_detail::trace_unbatched<F, In, Args...>(inner, [&](std::size_t k) { return g[leaves[k]].varying; });
        if (inner.missing_rule != nullptr) g.report_missing(inner.missing_rule, inner.missing_rule_kind);
        if (inner.error_size != 0) g.report_error(std::string_view(inner.error.data(), inner.error_size));

        // Every node of f, in order, emitted into the caller's graph with its batch axis (-1: none);
        // scans and switches whole (transform/control_batching.hpp).
        std::vector<int> param_axes(axes.begin(), axes.end() - 1);
        batching_detail::batcher em(inner, g, batch, param_axes);
        for (std::size_t i = 0; i < inner.size(); ++i) {
          const ir::node& n = inner[static_cast<int>(i)];
          if (n.prim->kind != ir::prim_kind::parameter) continue;
          const auto p = static_cast<std::size_t>(n.attr.ints[0]);
          em.set(static_cast<int>(i), leaves[p], axes[p]);
        }
        em.emit_range(-1, 0, static_cast<int>(inner.size()));
        const std::vector<int>& id = em.id;
        const std::vector<int>& axis = em.axis;

        // Results: the batch axis moved to its out_axes entry (added by broadcasting where f ignored the batch).
        const std::vector<int> wanted = vmap_detail::result_axes<R, Out>();
        std::vector<int> ids;
        vmap_detail::collect_ids(r, ids);
        result out{};
        std::size_t next = 0;
        tree::for_each(out, [&](auto& leaf) {
          const auto k = next++;
          const auto node = static_cast<std::size_t>(ids[k]);
          int y = id[node];
          if (wanted[k] >= 0) {
            const auto want = static_cast<std::size_t>(wanted[k]);
            y = axis[node] < 0 ? prim::batching::broadcast_batch(g, y, want, batch)
                               : prim::batching::move_axis(g, y, static_cast<std::size_t>(axis[node]), want);
          }
          leaf.graph = &g;
          leaf.id = y;
        });
        return out;
      }
    }
  }
};

// vmap(f[, in_axes<...>[, out_axes<...>]]): f mapped over a batch axis of its arguments (jax.vmap).
template <class F>
constexpr auto vmap(F) {
  return vmap_fn<F, in_axes_t<0>, out_axes_t<0>>{};
}
template <class F, long... I>
constexpr auto vmap(F, in_axes_t<I...>) {
  return vmap_fn<F, in_axes_t<I...>, out_axes_t<0>>{};
}
template <class F, long... I, long... O>
constexpr auto vmap(F, in_axes_t<I...>, out_axes_t<O...>) {
  return vmap_fn<F, in_axes_t<I...>, out_axes_t<O...>>{};
}

}  // namespace tessel
