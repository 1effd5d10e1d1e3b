#pragma once
// jit: trace a generic lambda into a program, plan it, and run the plan on the host.
//
//   auto f = [](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); };
//   auto y = tessel::jit(f)(x, w, b);   // tensors in, tensors out; one fused kernel
//
// Tracing happens in constant evaluation: the lambda is called with tracers, and every operation
// appends a node to a table. So the function must not capture run-time values (pass them as arguments:
// a float argument becomes an f32[] parameter) and literals in its body are compile-time constants.
// Arguments are tensors or scalars; results are a tensor or a std::tuple of tensors. Each distinct list
// of argument types is traced and planned once, at compile time; nothing is traced at run time.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessel/backend/executor.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/ir/program.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/lax.hpp"  // every primitive a traced program or a derivative rule may emit
#include "tessel/plan/plan.hpp"
#include "tessel/prim/parameter.hpp"

namespace tessel {
namespace detail {

// What a traced function receives for an argument: tensors become tracers, structs and tuples of
// tensors become the same trees of tracers (core/tree.hpp), scalars become rank-0 tracers.
template <class A>
struct traced_arg {
  static constexpr bool supported = false;
  using type = tracer<float, shape<>>;
};
template <class T, class S>
struct traced_arg<tensor<T, S>> {
  static constexpr bool supported = true;
  using type = tracer<T, S>;
};
template <class X>
  requires DType<X>
struct traced_arg<X> {
  static constexpr bool supported = true;
  using type = tracer<X, shape<>>;
};
template <class X>
  requires(Struct<X> || is_tuple_v<X>)
struct traced_arg<X> {
  static constexpr bool supported = true;
  using type = tree::rebind_t<X, tracer>;
};

// What jit returns for a traced result: the same tree with tensors for tracers.
template <class R>
consteval bool is_traced_tree() {
  if constexpr (Traced<R>) return true;
  else if constexpr (Struct<R>) return std::is_same_v<tree::rebind_t<tree::rebind_t<R, tensor>, tracer>, R>;
  else if constexpr (is_tuple_v<R>) return []<class... P>(std::type_identity<std::tuple<P...>>) {
    return (is_traced_tree<P>() && ...);
  }(std::type_identity<R>{});
  else return false;
}

template <class R>
struct traced_result {
  static constexpr bool supported = is_traced_tree<R>();
  static constexpr std::size_t count = [] {
    if constexpr (supported) return tree::leaf_count<R>();
    else return std::size_t{0};
  }();
  using type = tree::rebind_t<R, tensor>;
};

template <class F, class... Args>
consteval bool check_traceable() {
  if constexpr (!std::is_empty_v<F> || !std::is_default_constructible_v<F>) {
    raise<"tessel::jit: the function captures state; traced functions are compiled once and cannot see "
          "run-time values; fix: pass captured tensors and scalars as arguments (a float becomes an f32[] argument)", F>();
    return false;
  } else if constexpr (!(traced_arg<Args>::supported && ...)) {
    raise<"tessel::jit: an argument is neither a tessel::tensor, a tree of them (a BOOST_HANA_DEFINE_STRUCT struct or "
          "a std::tuple), nor a scalar of a tessel dtype; fix: pass tensors, trees of tensors, or "
          "float/int32/uint32/bool/bfloat16 scalars", F>();
    return false;
  } else {
    return true;
  }
}

// Every leaf of every argument becomes a parameter node, numbered in tree order.
template <class F, class... Args, std::size_t... I>
constexpr auto call_with_parameters(ir::graph_builder& g, std::index_sequence<I...>) {
  using params = std::tuple<typename traced_arg<Args>::type...>;
  params p{};
  int next = 0;
  tree::for_each(p, [&](auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    leaf = prim::parameter<typename L::value_type, typename L::shape_type>(&g, next++);
  });
  g.parameter_count = next;
  if constexpr (std::is_empty_v<F> && std::is_default_constructible_v<F>) return F{}(std::get<I>(p)...);
  else return tracer<float, shape<>>{};  // not traceable: check_traceable has said why
}

template <class R>
constexpr void record_outputs(ir::graph_builder& g, const R& result) {
  tree::for_each(result, [&](const auto& leaf) { g.outputs.push_back(leaf.id); });
}

// What tracing found besides the nodes: their number and the first primitive missing a rule.
struct trace_summary {
  std::size_t nodes = 0;
  bool missing_rule = false;
  fixed_string<48> primitive{};
  fixed_string<8> rule{};
};

template <class F, class... Args>
struct traced {
  static_assert(check_traceable<F, Args...>(), "tessel::jit: see the message above");
  using raw_result = decltype(call_with_parameters<F, Args...>(std::declval<ir::graph_builder&>(),
                                                              std::index_sequence_for<Args...>{}));

  static constexpr bool result_ok = [] {
    if constexpr (!traced_result<raw_result>::supported)
      raise<"tessel::jit: the function must return a tensor, or a tree of them (struct or std::tuple), computed from "
            "its arguments", F>();
    return traced_result<raw_result>::supported;
  }();

  static consteval trace_summary summarize() {
    ir::graph_builder g;
    record_outputs(g, call_with_parameters<F, Args...>(g, std::index_sequence_for<Args...>{}));
    trace_summary t;
    t.nodes = g.size();
    if (g.missing_rule != nullptr) {
      t.missing_rule = true;
      for (std::size_t i = 0; i < g.missing_rule->name.size() && i + 1 < 48; ++i) t.primitive.text[i] = g.missing_rule->name[i];
      for (std::size_t i = 0; g.missing_rule_kind[i] != '\0' && i + 1 < 8; ++i) t.rule.text[i] = g.missing_rule_kind[i];
    }
    return t;
  }
  static constexpr trace_summary summary = summarize();
  static_assert([] {
    if constexpr (summary.missing_rule) {
      raise<fit<[] {
        return message_builder{} << "tessel: a transform needs the " << summary.rule << " rule of primitive "
                                 << summary.primitive << ", which it does not have; fix: give the primitive that rule "
                                                         "in its file, or wrap the call in stop_gradient";
      }>()>();
    }
    return true;
  }());

  static constexpr std::size_t nodes = summary.nodes;
  static constexpr std::size_t outputs = traced_result<raw_result>::count;

  static consteval ir::program<nodes, outputs> freeze() {
    ir::graph_builder g;
    record_outputs(g, call_with_parameters<F, Args...>(g, std::index_sequence_for<Args...>{}));
    return ir::program<nodes, outputs>::freeze(g);
  }

  static constexpr ir::program<nodes, outputs> program = freeze();
  static constexpr plan::plan<nodes, outputs> plan = plan::make_plan(program);
  using result = typename traced_result<raw_result>::type;
};

// The data of every leaf of an argument, in tree order (a scalar is its own datum).
template <class A>
void argument_pointers(const A& a, const void** out, std::size_t& next) {
  if constexpr (DType<A>) out[next++] = &a;
  else tree::for_each(a, [&](const auto& leaf) { out[next++] = leaf.data(); });
}

// A double argument is taken as f32 and an int as s32 (JAX's x32 defaults); tensors pass through.
template <class X>
decltype(auto) normalize_scalar(const X& x) {
  if constexpr (std::is_same_v<X, double>) return static_cast<float>(x);
  else if constexpr (std::is_same_v<X, int>) return static_cast<std::int32_t>(x);
  else return (x);
}

// Points out[next...] at the result tensors, in tree order (the order record_outputs used).
template <class Result>
void output_pointers(Result& r, void** out, std::size_t& next) {
  tree::for_each(r, [&](auto& leaf) { out[next++] = leaf.data(); });
}

}  // namespace detail

template <class F>
class jitted {
 public:
  // Runs the planned program on the arguments and returns fresh result tensors.
  template <class... A>
  auto operator()(const A&... args) const {
    return call(detail::normalize_scalar(args)...);
  }

  // The frozen program and its plan for these argument types (what dump prints).
  template <class... A>
  using traced_for = detail::traced<F, std::remove_cvref_t<decltype(detail::normalize_scalar(std::declval<const A&>()))>...>;

 private:
  template <class... A>
  auto call(const A&... args) const {
    using t = detail::traced<F, A...>;
    typename t::result result;
    const void* parameters[t::program.parameter_count + 1];
    std::size_t next_parameter = 0;
    (detail::argument_pointers(args, parameters, next_parameter), ...);
    void* outputs[t::outputs + 1];
    std::size_t next = 0;
    detail::output_pointers(result, outputs, next);
    backend::executor<t::nodes, t::outputs>(t::plan, parameters, outputs).run();
    return result;
  }
};

// Compiles f for each list of argument types it is called with (JAX's jax.jit).
template <class F>
constexpr jitted<F> jit(F) {
  return {};
}

}  // namespace tessel
