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

#include <array>
#include <cstddef>
#include <optional>
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

// An argument handed over to a jitted call (JAX's buffer donation): the call may write results into
// its buffers instead of allocating new ones. Made by donate(x), which leaves x empty.
template <class T>
struct donated {
  T value;
};

// Gives x's buffers to the jitted call it is passed to; x is moved from (re-assign it from the results):
//   std::tie(params, state, loss) = step(tessel::donate(params), tessel::donate(state), x, y);
template <class T>
  requires(!std::is_const_v<T>)
donated<T> donate(T& x) {
  return {std::move(x)};
}

namespace detail {
template <class A>
inline constexpr bool is_donated_v = false;
template <class T>
inline constexpr bool is_donated_v<donated<T>> = true;

template <class A>
decltype(auto) undonated(A& a) {
  if constexpr (is_donated_v<A>) return (a.value);
  else return normalize_scalar(a);
}
template <class A>
using undonated_t = std::remove_cvref_t<decltype(undonated(std::declval<A&>()))>;

template <class A>
constexpr std::size_t leaves_of() {
  if constexpr (DType<A>) return 1;
  else return tree::leaf_count<tree::rebind_t<A, tracer>>();  // counted on tracers: no allocation
}

// Which result takes which donated parameter's buffer (-1: a new buffer). A result may reuse a donated
// parameter of its dtype and shape when no kernel reads the parameter after the result's kernel, or the
// result's kernel is an elementwise loop that reads the parameter at the very element it writes.
template <class Traced, std::size_t P>
constexpr std::array<int, Traced::outputs> pair_donations(const std::array<bool, P>& donated_parameter) {
  const auto& plan = Traced::plan;
  std::array<int, Traced::outputs> donor{};
  std::array<int, P> node_of{};
  std::array<bool, P> used{};
  for (auto& d : donor) d = -1;
  for (auto& n : node_of) n = -1;
  for (std::size_t i = 0; i < Traced::nodes; ++i)
    if (plan.program.nodes[i].prim->kind == ir::prim_kind::parameter)
      node_of[static_cast<std::size_t>(plan.program.nodes[i].attr.ints[0])] = static_cast<int>(i);
  for (std::size_t o = 0; o < Traced::outputs; ++o) {
    const int out = plan.program.outputs[o];
    const ir::node& n = plan.node(out);
    const int k = plan.kernel_of[static_cast<std::size_t>(out)];
    if (n.prim->kind == ir::prim_kind::parameter || k < 0 || plan.output_index[static_cast<std::size_t>(out)] != static_cast<int>(o)) continue;
    const plan::kernel& writer = plan.kernels[static_cast<std::size_t>(k)];
    for (std::size_t j = 0; j < P; ++j) {
      const int pn = node_of[j];
      if (!donated_parameter[j] || used[j] || pn < 0) continue;
      const ir::node& param = plan.node(pn);
      if (param.dtype != n.dtype || !(param.shape == n.shape) || plan.output_index[static_cast<std::size_t>(pn)] >= 0) continue;
      const int last = plan.last_reader[static_cast<std::size_t>(pn)];
      if (last < k || (last == k && writer.kind == plan::kernel_kind::loop && writer.uniform)) {
        donor[o] = static_cast<int>(j);
        used[j] = true;
        break;
      }
    }
  }
  return donor;
}

// Moves out the leaf of type L that is parameter `index` (a leaf of a donated argument).
template <class L, class... A>
L take_donated_leaf(int index, A&... args) {
  std::optional<L> taken;
  int next = 0;
  auto visit = [&](auto& a) {
    using arg = std::remove_cvref_t<decltype(a)>;
    if constexpr (is_donated_v<arg>) {
      tree::for_each(a.value, [&](auto& leaf) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(leaf)>, L>)
          if (next == index) taken.emplace(std::move(leaf));
        ++next;
      });
    } else {
      next += static_cast<int>(leaves_of<undonated_t<arg>>());
    }
  };
  (visit(args), ...);
  return std::move(*taken);
}
}  // namespace detail

template <class F>
class jitted {
 public:
  // Runs the planned program on the arguments and returns the results: new tensors, or the buffers of
  // arguments passed through donate() where that is safe.
  template <class... A>
  auto operator()(A&&... args) const {
    if constexpr ((detail::is_donated_v<std::remove_cvref_t<A>> || ...)) return call_donating(args...);
    else return call(detail::normalize_scalar(args)...);
  }

  // The frozen program and its plan for these argument types (what dump prints).
  template <class... A>
  using traced_for = detail::traced<F, std::remove_cvref_t<decltype(detail::normalize_scalar(std::declval<const A&>()))>...>;

 private:
  template <class... A>
  auto call(const A&... args) const {
    using t = detail::traced<F, A...>;
    auto result = tree::build<typename t::result>([](auto leaf) { return typename decltype(leaf)::type(uninitialized); });
    const void* parameters[t::program.parameter_count + 1];
    std::size_t next_parameter = 0;
    (detail::argument_pointers(args, parameters, next_parameter), ...);
    void* outputs[t::outputs + 1];
    std::size_t next = 0;
    detail::output_pointers(result, outputs, next);
    backend::executor<t::nodes, t::outputs>(t::plan, parameters, outputs).run();
    return result;
  }

  template <class... A>
  auto call_donating(A&... args) const {
    using t = detail::traced<F, detail::undonated_t<A>...>;
    static constexpr std::size_t parameter_count = (std::size_t{0} + ... + detail::leaves_of<detail::undonated_t<A>>());
    // [[maybe_unused]]: g++ 12 does not see the use inside the lambda below.
    [[maybe_unused]] static constexpr std::array<int, t::outputs> donor = detail::pair_donations<t>([] {
      std::array<bool, parameter_count> mask{};
      std::size_t next = 0;
      auto mark = [&]<class X>(std::type_identity<X>) {
        for (std::size_t i = 0; i < detail::leaves_of<detail::undonated_t<X>>(); ++i) mask[next++] = detail::is_donated_v<X>;
      };
      (mark(std::type_identity<A>{}), ...);
      return mask;
    }());
    const void* parameters[parameter_count + 1];
    std::size_t next_parameter = 0;
    (detail::argument_pointers(detail::undonated(args), parameters, next_parameter), ...);
    std::size_t o = 0;  // the pointers stay valid: a donated buffer moves with its tensor
    auto result = tree::build<typename t::result>([&](auto leaf) {
      using L = typename decltype(leaf)::type;
      const int d = donor[o++];
      return d >= 0 ? detail::take_donated_leaf<L>(d, args...) : L(uninitialized);
    });
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
