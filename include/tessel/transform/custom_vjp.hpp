#pragma once
// custom_vjp (jax.custom_vjp): a function with a reverse-mode rule given by its author.
//
//   constexpr auto f   = [](auto x) { return tessel::log(1.0f + tessel::exp(x)); };
//   constexpr auto fwd = [](auto x) { auto e = tessel::exp(x); return std::make_tuple(tessel::log(1.0f + e), e); };
//   constexpr auto bwd = [](auto e, auto ct) { return std::make_tuple(ct * e / (1.0f + e)); };
//   constexpr auto softplus = tessel::custom_vjp(f, fwd, bwd);
//   tessel::grad([](auto x) { return tessel::sum(softplus(x)); })(x);   // uses bwd
//
// fwd(args...) returns (value, residuals): residuals is a tensor or a tree of them (a std::tuple, or a
// struct), possibly empty (std::tuple<>). bwd(residuals, cotangent) returns one cotangent per argument,
// in a std::tuple (a single cotangent may be returned bare when there is one argument), each of its
// argument's type. f's value is what the call returns; its nodes are not differentiated in reverse
// mode (forward mode, jvp, differentiates f itself, where JAX refuses). All three are captureless.
//
// Traced, the call is f's nodes plus one identity node, custom_vjp_call, whose attributes name the
// arguments and the residuals and whose primitive (one per rule) holds bwd; reverse mode
// (transform/sweeps.hpp) calls it for the arguments' cotangents. At most 15 argument and residual
// leaves in all (the node's attributes hold them).

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "tessel/core/error.hpp"
#include "tessel/prim/family/identity.hpp"
#include "tessel/prim/remat.hpp"  // call_batch
#include "tessel/transform/grad.hpp"

namespace tessel {
namespace custom_vjp_detail {

template <class X>
constexpr auto as_tuple(const X& x) {
  if constexpr (is_tuple_v<X>) return x;
  else return std::make_tuple(x);
}

template <class Tree>
consteval std::size_t leaves() {
  std::size_t n = 0;
  Tree t{};
  tree::for_each(t, [&](const auto&) { ++n; });
  return n;
}

// The reverse rule: cotangents of the arguments from bwd(residuals, ct). Asked for argument leaf
// io[0], it answers in io[0] (autodiff::pull's protocol for calls).
template <class Bwd, class Out, class Res, class... Args>
constexpr void rule(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& io) {
  const ir::node n = g[node];
  const auto args = static_cast<std::size_t>(n.attr.ints[0]);
  Res residuals{};
  std::size_t next = 1 + args;
  tree::for_each(residuals, [&](auto& leaf) {
    leaf.graph = &g;
    leaf.id = static_cast<int>(n.attr.ints[next++]);
  });
  const auto cts = as_tuple(Bwd{}(residuals, Out{&g, ct}));
  const int want = io[0];
  int seen = 0;
  io[0] = -1;
  tree::for_each(cts, [&](const auto& leaf) {
    if (seen++ == want) io[0] = leaf.id;
  });
}

template <class Rule>
inline constexpr ir::primitive call_p{.name = "custom_vjp_call",
                                      .kind = ir::prim_kind::elementwise,
                                      .evaluate = &prim::identity::evaluate,
                                      .vjp = Rule::vjp,
                                      .jvp = &prim::identity::jvp,
                                      .batch = &prim::call_batch,
                                      .flops_per_element = 0,
                                      .lower = &prim::identity::lower};

template <class Bwd, class Out, class Res, class... Args>
struct rule_of {
  static constexpr ir::vjp_fn vjp = &rule<Bwd, Out, Res, Args...>;
};

template <class Out, class Res, class Cts, class... Args>
consteval bool check() {
  if constexpr (!Traced<Out>) {
    raise<"tessel::custom_vjp: the function must return one tensor; fix: return a single tensor (wrap several "
          "outputs in separate custom_vjp functions)", Out>();
    return false;
  } else if constexpr (!std::is_same_v<Cts, std::tuple<Args...>>) {
    raise<"tessel::custom_vjp: bwd(residuals, cotangent) must return a std::tuple with one cotangent per argument, "
          "each of its argument's type (dtype, shape, tree); fix: return std::make_tuple(d_arg0, d_arg1, ...)", Cts>();
    return false;
  } else if constexpr (leaves<std::tuple<Args...>>() + leaves<Res>() > ir::max_ints - 1) {
    raise<"tessel::custom_vjp: more than 15 argument and residual tensors in all; fix: save fewer residuals (recompute "
          "cheap ones in bwd) or split the function", Res>();
    return false;
  } else {
    return true;
  }
}

}  // namespace custom_vjp_detail

template <class F, class Fwd, class Bwd>
struct custom_vjp_fn : detail::jit_when_concrete<custom_vjp_fn<F, Fwd, Bwd>> {
 private:
  friend detail::jit_when_concrete<custom_vjp_fn>;
  template <class... Args>
  constexpr auto traced(const Args&... args) const {
    using out_t = std::remove_cvref_t<decltype(F{}(args...))>;
    using res_t = std::remove_cvref_t<decltype(std::get<1>(Fwd{}(args...)))>;
    using cts_t = std::remove_cvref_t<decltype(custom_vjp_detail::as_tuple(Bwd{}(std::declval<res_t>(), std::declval<out_t>())))>;
    const out_t out = F{}(args...);
    if constexpr (custom_vjp_detail::check<out_t, res_t, cts_t, Args...>()) {
      ir::graph_builder& g = *out.graph;
      const res_t residuals = std::get<1>(Fwd{}(args...));
      ir::attributes a;
      a.push(0);
      (tree::for_each(args, [&](const auto& leaf) { a.push(leaf.id); }), ...);
      a.ints[0] = a.count - 1;
      tree::for_each(residuals, [&](const auto& leaf) { a.push(leaf.id); });
      using rule = custom_vjp_detail::rule_of<Bwd, out_t, res_t, Args...>;
      return out_t{&g, ir::make_node(g, custom_vjp_detail::call_p<rule>, g[out.id].dtype, g[out.id].shape, {out.id}, a)};
    } else {
      return out;
    }
  }
};

// f with the reverse-mode rule (fwd, bwd); see the top of this file.
template <class F, class Fwd, class Bwd>
constexpr custom_vjp_fn<F, Fwd, Bwd> custom_vjp(F, Fwd, Bwd) {
  return {};
}

}  // namespace tessel
