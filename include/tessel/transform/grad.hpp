#pragma once
// grad, value_and_grad, vjp, jvp: JAX's differentiation transforms, on traced programs.
//
//   auto loss = [](auto w, auto x) { return tessel::sum(tessel::relu(tessel::matmul(x, w))); };
//   auto dw = tessel::grad(loss)(w, x);                       // d loss / d w, like w
//   auto [l, g] = tessel::value_and_grad<0, 1>(loss)(w, x);   // value, (dw, dx)
//   auto [[l, aux], dw] = tessel::value_and_grad<0>(f, tessel::has_aux)(w, x);
//
// The transformed function is itself traceable: jit(grad(f)), grad(grad(f)) and jvp(grad(f), ...)
// compose. Called with tensors, it is jitted on the spot (include tessel/jit.hpp for that: this header
// only traces). `grad` needs a scalar floating result; the gradient with respect to an argument has the
// argument's type.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/broadcast_in_dim.hpp"
#include "tessel/prim/literal.hpp"
#include "tessel/transform/autodiff.hpp"
#include "tessel/transform/trace.hpp"

namespace tessel {

struct has_aux_t {};
inline constexpr has_aux_t has_aux{};

namespace autodiff_detail {

template <class R, bool Aux>
constexpr auto primary_of(const R& r) {
  if constexpr (Aux) return std::get<0>(r);
  else return r;
}

template <class Out>
consteval bool check_scalar_output() {
  if constexpr (!Traced<Out>) {
    raise<"tessel::grad: the function must return one tensor (with has_aux: a pair (value, aux)); fix: return the "
          "loss, or use vjp for several outputs", Out>();
    return false;
  } else if constexpr (Out::rank != 0 || !FloatingDType<typename Out::value_type>) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::grad: the function must return a floating-point scalar, but it returns ";
      append_type<Out>(m) << "; fix: reduce it to f32[] (sum or mean), or use vjp with a cotangent of that shape";
      return m;
    }>()>();
    return false;
  } else {
    return true;
  }
}

template <class Arg>
consteval bool all_leaves_floating() {
  bool ok = true;
  Arg a{};
  tree::for_each(a, [&](const auto& leaf) { ok = ok && FloatingDType<typename std::remove_cvref_t<decltype(leaf)>::value_type>; });
  return ok;
}

template <std::size_t I, class Arg>
consteval bool check_differentiable_argument() {
  if constexpr (!Traced<Arg>) {
    if constexpr (!all_leaves_floating<Arg>()) {
      raise<fit<[] {
        return message_builder{} << "tessel::grad: argument " << static_cast<std::uint64_t>(I)
                                 << " is a tree with an integer or pred leaf, which has no gradient; fix: keep integer "
                                    "data in another argument and differentiate with respect to the parameters only";
      }>()>();
    }
    return all_leaves_floating<Arg>();
  } else if constexpr (!FloatingDType<typename Arg::value_type>) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::grad: argument " << static_cast<std::uint64_t>(I) << " is ";
      append_type<Arg>(m) << ", an integer or pred type, which has no gradient; fix: differentiate with respect to "
                             "floating-point arguments only (choose them with grad<argnums...>)";
      return m;
    }>()>();
    return false;
  } else {
    return true;
  }
}

template <class T>
constexpr ir::graph_builder* graph_of(const T& first) {
  return first.graph;
}

// The argument's tree with each leaf's cotangent (zeros where the output does not depend on it);
// `cts` holds the cotangents of every differentiated leaf in order, `next` the first of this argument's.
template <class Arg>
constexpr Arg as_gradient(ir::graph_builder& g, const Arg& arg, const std::vector<int>& cts, std::size_t& next) {
  Arg out = arg;
  tree::for_each(out, [&](auto& leaf) {
    const int ct = cts[next++];
    leaf.id = ct >= 0 ? ct : prim::build::zeros_like(g, leaf.id);
  });
  return out;
}

template <class Arg>
constexpr void push_leaf_ids(const Arg& arg, std::vector<int>& ids) {
  tree::for_each(arg, [&](const auto& leaf) { ids.push_back(leaf.id); });
}

template <class T>
constexpr ir::graph_builder* first_graph(const T& x) {
  ir::graph_builder* g = nullptr;
  tree::for_each(x, [&](const auto& leaf) {
    if (g == nullptr) g = leaf.graph;
  });
  return g;
}

}  // namespace autodiff_detail

// value_and_grad<Argnums...>(f[, has_aux]): f's value and its gradient with respect to arguments
// Argnums (0 by default): one gradient, or a tuple of them when several argnums are given.
template <bool Aux, class F, int... Argnums>
struct value_and_grad_fn : detail::jit_when_concrete<value_and_grad_fn<Aux, F, Argnums...>> {
 private:
  friend detail::jit_when_concrete<value_and_grad_fn>;
  template <class F2, int... A2>
  friend struct grad_fn;

  // The differentiated arguments: Argnums, or argument 0 when none are given.
  static constexpr std::array<int, sizeof...(Argnums) == 0 ? 1 : sizeof...(Argnums)> nums = [] {
    if constexpr (sizeof...(Argnums) == 0) return std::array<int, 1>{0};
    else return std::array<int, sizeof...(Argnums)>{Argnums...};
  }();

  template <class... Args>
  constexpr auto traced(const Args&... args) const {
    using arg_tuple = std::tuple<Args...>;
    const arg_tuple all{args...};
    ir::graph_builder& g = *autodiff_detail::first_graph(std::get<0>(all));
    const auto result = F{}(args...);
    using out_type = std::remove_cvref_t<decltype(autodiff_detail::primary_of<decltype(result), Aux>(result))>;
    if constexpr (autodiff_detail::check_scalar_output<out_type>() && check_arguments<arg_tuple>(std::make_index_sequence<nums.size()>{})) {
      const out_type out = autodiff_detail::primary_of<decltype(result), Aux>(result);
      // A rule broken inside f has reported its one error and left a placeholder (id -1): nothing to
      // differentiate; each gradient stands in as its argument, so that no later step reports more.
      if (out.id < 0) {
        return std::make_tuple(result, [&]<std::size_t... K>(std::index_sequence<K...>) {
          if constexpr (sizeof...(K) == 1) return std::get<nums[0]>(all);
          else return std::tuple<std::tuple_element_t<static_cast<std::size_t>(nums[K]), arg_tuple>...>{std::get<nums[K]>(all)...};
        }(std::make_index_sequence<nums.size()>{}));
      }
      std::vector<int> wrt;
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (autodiff_detail::push_leaf_ids(std::get<nums[K]>(all), wrt), ...);
      }(std::make_index_sequence<nums.size()>{});
      const int seed = prim::build::literal(g, g[out.id].dtype, 1.0);
      const std::vector<int> cts = autodiff::reverse(g, out.id, seed, wrt);
      std::size_t next = 0;
      auto grads = [&]<std::size_t... K>(std::index_sequence<K...>) {
        if constexpr (sizeof...(K) == 1)
          return autodiff_detail::as_gradient(g, std::get<nums[0]>(all), cts, next);
        else  // braces: the gradients are made in argument order
          return std::tuple<std::tuple_element_t<static_cast<std::size_t>(nums[K]), arg_tuple>...>{
              autodiff_detail::as_gradient(g, std::get<nums[K]>(all), cts, next)...};
      }(std::make_index_sequence<nums.size()>{});
      return std::make_tuple(result, grads);
    } else {
      return std::make_tuple(result, std::get<0>(all));
    }
  }

  template <class ArgTuple, std::size_t... K>
  static consteval bool check_arguments(std::index_sequence<K...>) {
    return (autodiff_detail::check_differentiable_argument<static_cast<std::size_t>(nums[K]),
                                                           std::tuple_element_t<static_cast<std::size_t>(nums[K]), ArgTuple>>() &&
            ...);
  }
};

// grad<Argnums...>(f): only the gradient(s) of value_and_grad.
template <class F, int... Argnums>
struct grad_fn : detail::jit_when_concrete<grad_fn<F, Argnums...>> {
 private:
  friend detail::jit_when_concrete<grad_fn>;
  template <class... Args>
  constexpr auto traced(const Args&... args) const {
    return std::get<1>(value_and_grad_fn<false, F, Argnums...>{}.traced(args...));
  }
};

template <int... Argnums, class F>
constexpr auto value_and_grad(F) {
  return value_and_grad_fn<false, F, Argnums...>{};
}
template <int... Argnums, class F>
constexpr auto value_and_grad(F, has_aux_t) {
  return value_and_grad_fn<true, F, Argnums...>{};
}
template <int... Argnums, class F>
constexpr auto grad(F) {
  return grad_fn<F, Argnums...>{};
}

// Inside a traced function: (f(primals...), the tangent of f at primals in the direction tangents...).
// f returns one tensor; tangents have the primals' types.
template <class F, Traced... P, Traced... T>
constexpr auto jvp(F, std::tuple<P...> primals, std::tuple<T...> tangents) {
  static_assert(sizeof...(P) == sizeof...(T), "tessel::jvp: give one tangent per primal");
  static_assert((std::is_same_v<P, T> && ...), "tessel::jvp: each tangent must have its primal's dtype and shape");
  ir::graph_builder& g = *std::get<0>(primals).graph;
  const auto out = std::apply([](auto... p) { return F{}(p...); }, primals);
  std::vector<int> wrt, ts;
  std::apply([&](auto... p) { (wrt.push_back(p.id), ...); }, primals);
  std::apply([&](auto... t) { (ts.push_back(t.id), ...); }, tangents);
  int tangent = autodiff::forward(g, out.id, wrt, ts);
  if (tangent < 0) tangent = prim::build::zeros_like(g, out.id);
  return std::make_tuple(out, decltype(out){&g, tangent});
}

// Inside a traced function: f's value and its pullback, a function from a cotangent of the value (same
// type) to the cotangents of every argument (a tuple, one per argument).
template <class F, Traced... A>
constexpr auto vjp(F, A... args) {
  ir::graph_builder& g = *std::get<0>(std::tuple<A...>{args...}).graph;
  const auto out = F{}(args...);
  using out_type = std::remove_cvref_t<decltype(out)>;
  struct pullback {
    ir::graph_builder* graph;
    int out_id;
    std::tuple<A...> primals;
    constexpr auto operator()(out_type cotangent) const {
      std::vector<int> wrt;
      std::apply([&](auto... p) { (wrt.push_back(p.id), ...); }, primals);
      const std::vector<int> cts = autodiff::reverse(*graph, out_id, cotangent.id, wrt);
      std::size_t next = 0;
      return [&]<std::size_t... K>(std::index_sequence<K...>) {
        return std::tuple<A...>{autodiff_detail::as_gradient(*graph, std::get<K>(primals), cts, next)...};
      }(std::index_sequence_for<A...>{});
    }
  };
  return std::make_tuple(out, pullback{&g, out.id, std::tuple<A...>{args...}});
}

}  // namespace tessel
