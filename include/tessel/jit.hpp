#pragma once
// jit: trace a generic lambda into a program (transform/trace.hpp), plan it (plan/plan.hpp), and run the
// plan on the host (run/executor.hpp).
//
//   auto f = [](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); };
//   auto y = tessel::jit(f)(x, w, b);   // tensors in, tensors out; one fused kernel
//
// Each distinct list of argument types is traced and planned once, at compile time; nothing is traced at
// run time. dump(f, args...) (tessel/dump.hpp) prints the plan.

#include <array>
#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessel/plan/plan.hpp"
#include "tessel/run/executor.hpp"
#include "tessel/transform/trace.hpp"

namespace tessel {
namespace detail {

// A traced program and its plan: what one call of a jitted function (or one device of a shard_map) runs.
template <class Context, class F, class... Args>
struct planned_in : traced_in<Context, F, Args...> {
  static constexpr plan::plan<traced_in<Context, F, Args...>::nodes, traced_in<Context, F, Args...>::outputs> plan =
      traced_in<Context, F, Args...>::ok ? plan::make_plan(traced_in<Context, F, Args...>::program)
                                         : plan::plan<traced_in<Context, F, Args...>::nodes, traced_in<Context, F, Args...>::outputs>{};
};
template <class F, class... Args>
using planned = planned_in<no_context, F, Args...>;

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

// Whether every member of row kernel k that reads node id is elementwise or a reduction over rows: those
// read id only in the rows that the same pass then stores (run_rows), so k may write its result over id.
template <class Plan>
constexpr bool reads_only_its_rows(const Plan& plan, const plan::kernel& k, int id) {
  for (int m = 0; m < k.member_count; ++m) {
    const ir::node& member = plan.node(plan.members[static_cast<std::size_t>(k.first_member + m)]);
    for (std::size_t a = 0; a < member.arity; ++a)
      if (member.operand(a) == id && member.prim->kind != ir::prim_kind::elementwise && member.prim->kind != ir::prim_kind::reduce)
        return false;
  }
  return true;
}

// Whether contraction kernel k reads node id only in its epilogue, elementwise at the element it writes
// (k uniform): each block then reads id only where it writes, and the product never reads it (nor a view
// of it), so k may write its result over id (Adam's update fused into its gradient's product).
template <class Plan>
constexpr bool epilogue_reads_in_place(const Plan& plan, const plan::kernel& k, int id) {
  if (!k.uniform) return false;
  for (int m = 0; m < k.member_count; ++m) {
    const int member_id = plan.members[static_cast<std::size_t>(k.first_member + m)];
    const ir::node& member = plan.node(member_id);
    for (std::size_t a = 0; a < member.arity; ++a) {
      int read = member.operand(a);
      if (member_id == k.dot)
        while (plan.alias_of[static_cast<std::size_t>(read)] >= 0) read = plan.alias_of[static_cast<std::size_t>(read)];
      if (read == id && (member_id == k.dot || member.prim->kind != ir::prim_kind::elementwise)) return false;
    }
  }
  return true;
}

// Which result takes which donated parameter's buffer (-1: a new buffer). A result may reuse a donated
// parameter of its dtype and shape when no kernel reads the parameter after the result's kernel, or the
// result's kernel is an elementwise loop that reads the parameter at the very element it writes, a
// product whose epilogue alone reads it so, or a row kernel (softmax) that reads it only in the rows it
// writes.
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
      const bool in_place = (writer.kind == plan::kernel_kind::loop && writer.uniform) ||
                            (writer.kind == plan::kernel_kind::contraction && epilogue_reads_in_place(plan, writer, pn)) ||
                            (writer.kind == plan::kernel_kind::row && param.shape == writer.row_shape &&
                             reads_only_its_rows(plan, writer, pn));
      if (last < k || (last == k && in_place)) {
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
  using traced_for = detail::planned<F, std::remove_cvref_t<decltype(detail::normalize_scalar(std::declval<const A&>()))>...>;

 private:
  template <class G, class... A>
  friend auto eagerly(G, const A&...);

  template <class... A>
  static auto call(const A&... args) {
    using t = detail::planned<F, A...>;
    auto result = tree::build<typename t::result>([](auto leaf) { return typename decltype(leaf)::type(uninitialized); });
    const void* parameters[t::program.parameter_count + 1];
    std::size_t next_parameter = 0;
    (detail::argument_pointers(args, parameters, next_parameter), ...);
    void* outputs[t::outputs + 1];
    std::size_t next = 0;
    detail::output_pointers(result, outputs, next);
    run::execute(plan::static_view<t::plan>(), parameters, outputs);
    return result;
  }

  template <class... A>
  auto call_donating(A&... args) const {
    using t = detail::planned<F, detail::undonated_t<A>...>;
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
    run::execute(plan::static_view<t::plan>(), parameters, outputs);
    return result;
  }
};

// Compiles f for each list of argument types it is called with (JAX's jax.jit).
template <class F>
constexpr jitted<F> jit(F) {
  return {};
}

namespace detail {
template <class X>
inline constexpr bool is_pred_tensor_v = false;
template <class S>
inline constexpr bool is_pred_tensor_v<tensor<bool, S>> = true;

// The dtype a scalar argument of an eager call takes: the first tensor argument's that is not pred; with
// none, the scalar keeps its own (f32 for a double, s32 for an int, as jit takes them).
template <class Scalar, class A, class... Rest>
constexpr auto eager_scalar_dtype() {
  if constexpr (Tensor<A> && !is_pred_tensor_v<A>) return std::type_identity<typename A::value_type>{};
  else if constexpr (sizeof...(Rest) > 0) return eager_scalar_dtype<Scalar, Rest...>();
  else return std::type_identity<std::remove_cvref_t<decltype(normalize_scalar(std::declval<const Scalar&>()))>>{};
}

template <class T, class A>
decltype(auto) eager_argument(const A& a) {
  if constexpr (Tensor<A>) {
    return (a);
  } else {
    tensor<T, shape<>> t(uninitialized);
    t[0] = static_cast<T>(a);
    return t;
  }
}
}  // namespace detail

template <class F, class... A>
auto eagerly(F, const A&... args) {  // F is empty: jit calls F{}
  return jitted<F>::call(detail::eager_argument<typename decltype(detail::eager_scalar_dtype<A, A...>())::type>(args)...);
}

}  // namespace tessel
