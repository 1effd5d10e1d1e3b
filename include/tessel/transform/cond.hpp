#pragma once
// cond and switch_ (jax.lax.cond, jax.lax.switch): a run-time value chooses which branch runs.
//
//   auto y = tessel::cond(x_sum > 0.0f, [](auto x) { return x * 2.0f; }, [](auto x) { return -x; }, x);
//   auto z = tessel::switch_(i, std::tuple{f0, f1, f2}, a, b);   // i: s32 scalar, clamped into [0, 2]
//
// Inside a traced function, each branch is called once with tracers for the operands (each a tensor or a
// tree of them); its nodes form a region (ir/graph.hpp) and only the chosen region runs. Branches must
// return the same type (dtypes and shapes; a compile error names the first leaf that differs). Values a
// branch reads from the enclosing function are computed outside, before the choice. The predicate of
// cond is a pred scalar (true runs true_fn); switch_'s index is an s32, u32 or pred scalar. grad and jvp
// flow through the taken branch (transform/control_vjp.hpp); the index gets none. vmap keeps the
// construct for a shared predicate and runs every branch and selects for a batched one (control_batching.hpp).

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/transform/scan.hpp"

namespace tessel {
namespace control_detail {

template <fixed_string Op, class I>
consteval bool check_index() {
  if constexpr (!Traced<I>) {
    raise<fit<[] {
      return message_builder{} << Op << ": the " << (Op.view() == std::string_view("tessel::cond") ? "predicate" : "index")
                               << " must be a traced scalar computed in the function (a comparison, an argument); fix: "
                                  "pass it as an argument of the jitted function";
    }>(), I>();
    return false;
  } else if constexpr (I::rank != 0 || !(std::is_same_v<typename I::value_type, bool> || std::is_same_v<typename I::value_type, std::int32_t> ||
                                         std::is_same_v<typename I::value_type, std::uint32_t>)) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": the " << (Op.view() == std::string_view("tessel::cond") ? "predicate" : "index") << " is ";
      append_type<I>(m) << " but must be a scalar of dtype pred, s32 or u32; fix: reduce it to a scalar (sum, any) and compare "
                           "or convert it";
      return m;
    }>()>();
    return false;
  } else {
    return true;
  }
}

template <fixed_string Op, class R0, class R>
consteval bool check_branch(std::size_t b) {
  if constexpr (std::is_same_v<R0, R>) {
    return true;
  } else if constexpr (!is_tracer_tree<R>() || !is_tracer_tree<R0>()) {
    raise<fit<[] {
      return message_builder{} << Op << ": a branch must return a tensor or a tree of them, computed in the branch; fix: "
                                        "return the branch's result (std::tuple for several)";
    }>(), R>();
    return false;
  } else {
    raise<fit<[] {
      message_builder m;
      m << Op << ": every branch must return the same dtypes and shapes, but ";
      const auto a = leaves_of<R0>(), c = leaves_of<R>();
      if (a.size() != c.size()) {
        m << "the first branch returns " << static_cast<std::uint64_t>(a.size()) << " tensors and another "
          << static_cast<std::uint64_t>(c.size());
      } else {
        for (std::size_t i = 0; i < a.size(); ++i)
          if (a[i].dtype != c[i].dtype || !(a[i].shape == c[i].shape)) {
            m << "result " << static_cast<std::uint64_t>(i) << " is ";
            append_leaf(m, a[i]) << " in the first branch and ";
            append_leaf(m, c[i]) << " in another";
            break;
          }
      }
      return m << "; fix: make the branches return one type (convert_element_type, reshape, broadcast_to)";
    }>(), R>();
    (void)b;
    return false;
  }
}

template <fixed_string Op, class I, class... F, class... Ops>
constexpr auto switch_impl(const I& index, const std::tuple<F...>& branches, const Ops&... operands) {
  using R0 = std::remove_cvref_t<decltype(std::get<0>(branches)(operands...))>;
  if constexpr (!check_index<Op, I>()) {
    return placeholder<R0>(graph_of(std::tuple<Ops...>{operands...}));
  } else if constexpr (!(check_branch<Op, R0, std::remove_cvref_t<decltype(std::declval<const F&>()(operands...))>>(0) && ...)) {
    return placeholder<R0>(index.graph);
  } else {
    ir::graph_builder& g = *index.graph;
    const int c = prim::control::new_construct(g, ir::construct_kind::switch_);
    std::vector<int> inputs;
    (push_ids(operands, inputs), ...);
    g.constructs[static_cast<std::size_t>(c)].index = index.id;
    g.constructs[static_cast<std::size_t>(c)].inputs = inputs;
    auto trace_branch = [&](const auto& f) {
      const int r = prim::control::open_region(g, c);
      std::tuple<Ops...> params{region_parameters<Ops>(g, r)...};  // braces: parameters in operand order
      const R0 result = std::apply(f, params);
      std::vector<int> results;
      push_ids(result, results);
      prim::control::close_region(g, r, results);
    };
    std::apply([&](const auto&... f) { (trace_branch(f), ...); }, branches);
    return construct_outputs<R0>(g, c);
  }
}

}  // namespace control_detail

// branches[index](operands...), with index (s32, u32 or pred scalar) clamped into [0, branch count - 1].
template <class I, class... F, class... Ops>
constexpr auto switch_(const I& index, const std::tuple<F...>& branches, const Ops&... operands) {
  static_assert(sizeof...(F) > 0, "tessel::switch_: give at least one branch");
  return control_detail::switch_impl<"tessel::switch_">(index, branches, operands...);
}

// pred ? true_fn(operands...) : false_fn(operands...), chosen at run time.
template <class P, class T, class F, class... Ops>
constexpr auto cond(const P& pred, T true_fn, F false_fn, const Ops&... operands) {
  return control_detail::switch_impl<"tessel::cond">(pred, std::tuple<F, T>{false_fn, true_fn}, operands...);
}

}  // namespace tessel
