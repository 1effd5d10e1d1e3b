#pragma once
// checkpoint (jax.checkpoint, a.k.a. remat): trade compute for memory in reverse mode.
//
//   auto block = tessel::checkpoint([](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); },
//                                   tessel::checkpoint_policies::nothing_saveable);
//   auto loss = [block](auto x, auto w1, auto b1, ...) { ... block(h, w1, b1) ... };
//
// Values are those of f. Under grad, the forward values computed inside f are not kept for the
// backward pass: when the backward pass reaches f's result, f's nodes are computed again from f's
// arguments (and from whatever the policy saved), then differentiated. Policies (jax.checkpoint_policies):
//   nothing_saveable     recompute every node of f (the default; only f's arguments stay alive)
//   dots_saveable        keep matmul and convolution results, recompute the elementwise work
//   everything_saveable  keep everything (the same plan as without checkpoint)
// `dump` shows the effect: smaller peak arena bytes, more flops. f is captureless and returns one tensor;
// its arguments are tensors or trees of them, at most 14 leaves in all.
// In a scan body (`scan([&](auto h, auto x) { auto n = checkpoint(cell)(h, x, w); return std::tuple{n, n}; }, ...)`)
// the forward scan then stacks only what the policy keeps (the carries; the GEMM results too under
// dots_saveable) and each backward step recomputes the rest; without checkpoint it stacks the residuals
// the body's VJP reads and recomputes nothing (transform/control_vjp.hpp). Arguments made outside the
// scan (weights) are read as they are in each backward step, not copied.
//
// How: the call adds an identity node, checkpoint, naming the arguments and the policy (prim/remat.hpp);
// reverse mode recomputes through optimization_barrier nodes that depend on the incoming cotangent
// (prim/optimization_barrier.hpp), so the copies are not merged with the forward nodes and are
// planned after the backward work that precedes them (transform/sweeps.hpp, remat_pull).

#include <cstddef>
#include <type_traits>

#include "tessel/core/error.hpp"
#include "tessel/prim/remat.hpp"
#include "tessel/transform/grad.hpp"

namespace tessel {

// A policy is a type, so checkpoint(f, policy) can fix it at compile time.
template <prim::remat_policy P>
struct remat_policy_t {
  static constexpr prim::remat_policy value = P;
};
namespace checkpoint_policies {
inline constexpr remat_policy_t<prim::remat_policy::nothing_saveable> nothing_saveable{};
inline constexpr remat_policy_t<prim::remat_policy::everything_saveable> everything_saveable{};
inline constexpr remat_policy_t<prim::remat_policy::dots_saveable> dots_saveable{};
}  // namespace checkpoint_policies

template <class F, prim::remat_policy Policy>
struct checkpoint_fn : detail::jit_when_concrete<checkpoint_fn<F, Policy>> {
 private:
  friend detail::jit_when_concrete<checkpoint_fn>;
  template <class... Args>
  static consteval bool check() {
    using out_t = std::remove_cvref_t<decltype(F{}(std::declval<const Args&>()...))>;
    constexpr std::size_t leaves = tree::leaf_count<std::tuple<Args...>>();
    if constexpr (!Traced<out_t>) {
      raise<"tessel::checkpoint: the function must return one tensor; fix: checkpoint a function with one result",
            out_t>();
      return false;
    } else if constexpr (leaves > ir::max_ints - 2) {
      raise<"tessel::checkpoint: more than 14 argument tensors; fix: checkpoint smaller blocks", out_t>();
      return false;
    } else {
      return true;
    }
  }

  template <class... Args>
  constexpr auto traced(const Args&... args) const {
    const auto out = F{}(args...);
    if constexpr (check<Args...>()) {
      using out_t = std::remove_cvref_t<decltype(out)>;
      ir::graph_builder& g = *out.graph;
      ir::attributes a;
      a.push(0);
      (tree::for_each(args, [&](const auto& leaf) { a.push(leaf.id); }), ...);
      a.ints[0] = a.count - 1;
      a.push(static_cast<std::int64_t>(Policy));
      return out_t{&g, ir::make_node(g, prim::remat_p, g[out.id].dtype, g[out.id].shape, {out.id}, a)};
    } else {
      return out;
    }
  }
};

// f, rematerialised under reverse mode according to `policy` (nothing_saveable by default).
template <class F, prim::remat_policy P = prim::remat_policy::nothing_saveable>
constexpr checkpoint_fn<F, P> checkpoint(F, remat_policy_t<P> = {}) {
  return {};
}

}  // namespace tessel
