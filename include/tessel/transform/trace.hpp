#pragma once
// Tracing: a generic lambda called in constant evaluation with tracers, its operations recorded as a frozen
// program (ir/program.hpp). jit (tessel/jit.hpp) plans and runs what this traces; the transforms trace
// their functions with it too.
//
// The function must not capture run-time values (pass them as arguments: a float argument becomes an f32[]
// parameter) and literals in its body are compile-time constants. Arguments are tensors, trees of them, or
// scalars; results are a tensor or a tree of tensors.

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/ir/program.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/all.hpp"  // every primitive a traced program or a derivative rule may emit
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
  requires(Struct<X> || is_tuple_v<X> || is_array_v<X>)
struct traced_arg<X> {
  static constexpr bool supported = true;
  using type = tree::rebind_t<X, tracer>;
};

// What jit returns for a traced result: the same tree with tensors for tracers.
template <class R>
consteval bool is_traced_tree() {
  if constexpr (Traced<R>) return true;
  else if constexpr (Struct<R>) return boost::hana::unpack(boost::hana::accessors<R>(), [](auto... member) {
    return (is_traced_tree<std::remove_cvref_t<decltype(boost::hana::second(member)(std::declval<R&>()))>>() && ...);
  });
  else if constexpr (is_array_v<R>) return is_traced_tree<typename R::value_type>();
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
          "a std::tuple or std::array), nor a scalar of a tessel dtype; fix: pass tensors, trees of tensors, or "
          "float/int32/uint32/bool/bfloat16 scalars", F>();
    return false;
  } else {
    return true;
  }
}

// Where a function is traced: on its own (jit, no_context), or as a shard_map body (transform/shard_map.hpp),
// whose context gives the graph its mesh and each argument leaf the mesh axes it varies along.
struct no_context {
  static constexpr void prepare(ir::graph_builder&) {}
  static constexpr std::uint8_t varying(std::size_t) { return 0; }
};

// Leaf k of the tree p (its arguments, in tree order) becomes parameter k of g, varying along the mesh
// axes varying(k) gives (none outside a shard_map body).
template <class Params, class Varying>
constexpr void bind_parameters(Params& p, ir::graph_builder& g, Varying varying) {
  int next = 0;
  tree::for_each(p, [&](auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    const int index = next++;
    leaf = prim::parameter<typename L::value_type, typename L::shape_type>(&g, index, varying(static_cast<std::size_t>(index)));
  });
  g.parameter_count = next;
}
template <class Params>
constexpr void bind_parameters(Params& p, ir::graph_builder& g) {
  bind_parameters(p, g, [](std::size_t) { return std::uint8_t{0}; });
}

// Every leaf of every argument becomes a parameter node, numbered in tree order.
template <class Context, class F, class... Args, std::size_t... I>
constexpr auto call_with_parameters(ir::graph_builder& g, std::index_sequence<I...>) {
  using params = std::tuple<typename traced_arg<Args>::type...>;
  Context::prepare(g);
  params p{};
  bind_parameters(p, g, [](std::size_t leaf) { return Context::varying(leaf); });
  if constexpr (std::is_empty_v<F> && std::is_default_constructible_v<F>) return F{}(std::get<I>(p)...);
  else return tracer<float, shape<>>{};  // not traceable: check_traceable has said why
}

template <class R>
constexpr void record_outputs(ir::graph_builder& g, const R& result) {
  tree::for_each(result, [&](const auto& leaf) { g.outputs.push_back(leaf.id); });
}

// What tracing found besides the nodes: their number, whether a call's rule was broken (it raised its
// error while the function was traced, and its result, id -1, reached an output), the first primitive
// missing a rule, the first rule broken that only values show (ir::graph_builder::report_error), and the
// outputs' varying mesh axes.
template <std::size_t Outputs>
struct trace_summary {
  std::size_t nodes = 0;
  bool broken = false;
  bool missing_rule = false;
  fixed_string<48> primitive{};
  fixed_string<8> rule{};
  fixed_string<480> error{};
  std::array<std::uint8_t, Outputs + 1> varying{};
};

template <class Context, class F, class... Args>
struct traced_in {
  // Every check below reports its own error; after one, nothing further is evaluated (no planner on a
  // broken trace), so that a mistake gives one error.
  static constexpr bool traceable = check_traceable<F, Args...>();
  using raw_result = decltype(call_with_parameters<Context, F, Args...>(std::declval<ir::graph_builder&>(),
                                                                       std::index_sequence_for<Args...>{}));
  static constexpr std::size_t outputs = traced_result<raw_result>::count;

  static constexpr bool result_ok = [] {
    if constexpr (!traced_result<raw_result>::supported)
      raise<"tessel::jit: the function must return a tensor, or a tree of them (struct or std::tuple), computed from "
            "its arguments", F>();
    return traced_result<raw_result>::supported;
  }();

  static consteval trace_summary<outputs> summarize() {
    trace_summary<outputs> t;
    if constexpr (!traceable || !result_ok) {
      t.broken = true;  // check_traceable or result_ok has said why
    } else {
      ir::graph_builder g;
      record_outputs(g, call_with_parameters<Context, F, Args...>(g, std::index_sequence_for<Args...>{}));
      t.nodes = g.size();
      for (std::size_t i = 0; i < g.error_size; ++i) t.error.text[i] = g.error[i];
      for (std::size_t o = 0; o < g.outputs.size() && o < outputs; ++o) {
        if (g.outputs[o] < 0) t.broken = true;
        else t.varying[o] = g[g.outputs[o]].varying;
      }
      if (t.error.text[0] == '\0') {
        const message_builder full = ir::capacity_error(g);
        for (std::size_t i = 0; i < full.size() && i + 1 < t.error.capacity; ++i) t.error.text[i] = full.view()[i];
      }
      if (g.missing_rule != nullptr) {
        t.missing_rule = true;
        for (std::size_t i = 0; i < g.missing_rule->name.size() && i + 1 < 48; ++i) t.primitive.text[i] = g.missing_rule->name[i];
        for (std::size_t i = 0; g.missing_rule_kind[i] != '\0' && i + 1 < 8; ++i) t.rule.text[i] = g.missing_rule_kind[i];
      }
    }
    return t;
  }
  static constexpr trace_summary<outputs> summary = summarize();
  static_assert([] {
    if constexpr (summary.broken) {
      // reported where the rule was broken: no second error
    } else if constexpr (summary.error.text[0] != '\0') {
      raise<fit<[] { return message_builder{} << summary.error; }>()>();
    } else if constexpr (summary.missing_rule) {
      raise<fit<[] {
        const bool batching = summary.rule.text[0] == 'b';
        return message_builder{} << "tessel: a transform needs the " << summary.rule << " rule of primitive "
                                 << summary.primitive << ", which it does not have; fix: give the primitive that rule "
                                 << (batching ? "in its file (prim/family/batching.hpp has the shared ones), or call it outside vmap"
                                              : "in its file, or wrap the call in stop_gradient");
      }>()>();
    }
    return true;
  }());

  static constexpr std::size_t nodes = summary.nodes;
  // The trace is whole: it may be frozen, planned and run.
  static constexpr bool ok = !summary.broken && summary.error.text[0] == '\0' && !summary.missing_rule;

  // A consteval call is evaluated even in the branch a condition does not take, hence if constexpr.
  static consteval ir::program<nodes, outputs> freeze() {
    if constexpr (!ok) {
      return {};
    } else {
      ir::graph_builder g;
      record_outputs(g, call_with_parameters<Context, F, Args...>(g, std::index_sequence_for<Args...>{}));
      return ir::program<nodes, outputs>::freeze(g);
    }
  }

  static constexpr ir::program<nodes, outputs> program = freeze();
  using result = typename traced_result<raw_result>::type;
};

template <class F, class... Args>
using traced = traced_in<no_context, F, Args...>;

}  // namespace detail

// Declared here so that transforms called with tensors can run themselves through jit (tessel/jit.hpp,
// which tessel/tessel.hpp includes, defines both); tracing itself needs neither.
template <class F>
class jitted;
template <class F>
constexpr jitted<F> jit(F);

namespace detail {
// The call of every transform's function object (grad, value_and_grad, vmap, custom_vjp, checkpoint,
// accumulate_gradients): with tracers, inside a traced function, it traces (Transform::traced, which
// befriends this); with tensors it runs itself through jit, as JAX's transforms do outside jit.
template <class Transform>
struct jit_when_concrete {
  template <class... Args>
  constexpr auto operator()(const Args&... args) const {
    const Transform& self = static_cast<const Transform&>(*this);
    if constexpr ((is_traced_tree<Args>() && ...)) return self.traced(args...);
    else return jit(self)(args...);
  }
};
}  // namespace detail

}  // namespace tessel

