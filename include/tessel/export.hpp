#pragma once
// export_stablehlo(f, args...): the program jit traces from f for arguments of these types, as a
// StableHLO module (ir/stablehlo.hpp) that XLA compiles and runs on a TPU, a GPU or a CPU. The shapes
// and dtypes were checked when f was traced, at compile time; the module is written at run time from that
// constant program, the argument values are not used. A primitive without a StableHLO lowering
// (primitive::lower) is a compile error that names it.
//
//   std::string module = tessel::export_stablehlo(f, x, w, b);   // func.func public @main(x, w, b)
//
// Each lowering keeps tessel's semantics where XLA's default would differ: bf16 reductions and products
// accumulate in f32 and round once, as the kernels do, and products ask for HIGHEST precision (f32 on a
// TPU too, as tessel computes them).

#include <string>
#include <type_traits>

#include "tessel/ir/stablehlo.hpp"
#include "tessel/jit.hpp"
#include "tessel/shard_map.hpp"

namespace tessel {
namespace export_detail {

// The name of the first primitive of the traced program that has no lowering (empty: every one has).
template <class Traced>
consteval fixed_string<48> first_unexportable() {
  fixed_string<48> name{};
  for (const ir::node& n : Traced::program.nodes) {
    const ir::prim_kind k = n.prim->kind;
    const bool bound = k == ir::prim_kind::parameter || k == ir::prim_kind::region_parameter || k == ir::prim_kind::control;
    if (n.prim->lower != nullptr || bound) continue;
    for (std::size_t i = 0; i < n.prim->name.size() && i + 1 < 48; ++i) name.text[i] = n.prim->name[i];
    break;
  }
  return name;
}

template <class Traced>
inline constexpr fixed_string<48> unexportable = first_unexportable<Traced>();

template <class Traced>
consteval bool check_exportable() {
  if constexpr (!Traced::ok) {
    return false;  // the trace has reported its own error
  } else if constexpr (unexportable<Traced>.text[0] != '\0') {
    raise<fit<[] {
      return message_builder{} << "tessel::export_stablehlo: the program uses primitive " << unexportable<Traced>
                               << ", which has no StableHLO lowering; fix: compute it from primitives that export, or give it a "
                                  "lowering in its file (primitive::lower)";
    }>()>();
    return false;
  } else {
    return true;
  }
}

template <class F, class... A>
using traced_for = detail::traced<F, std::remove_cvref_t<decltype(detail::normalize_scalar(std::declval<const A&>()))>...>;

// Shardy's dimension list of a rank-`rank` value laid out by Spec: [{"data"}, {}].
template <class Spec>
std::string sdy_dimensions(std::size_t rank) {
  std::string s = "[";
  for (std::size_t d = 0; d < rank; ++d) {
    s += d ? ", {" : "{";
    if constexpr (is_partition_spec_v<Spec>)
      if (d < Spec::rank)
        for (std::size_t i = 0; i < Spec::entries[d].count; ++i) s += (i ? ", \"" : "\"") + std::string(Spec::entries[d].names[i].view()) + "\"";
    s += "}";
  }
  return s + "]";
}
// The global shape of a block of shape `local` laid out by Spec on mesh M.
template <class M, class Spec>
ir::dims global_dims(ir::dims local) {
  if constexpr (is_partition_spec_v<Spec>)
    for (std::size_t d = 0; d < Spec::rank && d < local.rank; ++d)
      for (std::size_t i = 0; i < Spec::entries[d].count; ++i) local.d[d] *= M::sizes[static_cast<std::size_t>(M::index_of(Spec::entries[d].names[i]))];
  return local;
}

// The placement of shard_map S's per-device program (Runs: the program that runs, its replicated updates
// computed in blocks where they can be, shard_map.hpp) on its mesh, from the leaves' specs. A result
// computed in blocks along dimension 0 (Runs::split) is laid out so: its blocks are the global array's.
template <class S, class M, class Runs, class... A>
ir::mesh_placement placement_of() {
  ir::mesh_placement pl;
  pl.mesh = shard_detail::mesh_of<M>();
  const auto& p = Runs::program;
  using in_leaves = decltype([]<std::size_t... I>(std::index_sequence<I...>) {  // a scalar argument is a leaf of shape []
    return std::tuple_cat(shard_detail::leaf_specs_t<shard_detail::spec_at_t<I, typename S::in_specs>,
                                                     std::conditional_t<DType<A>, tensor<A, shape<>>, A>>{}...);
  }(std::index_sequence_for<A...>{}));
  using out_leaves = shard_detail::out_leaf_specs_t<typename S::out_specs, typename Runs::raw_result>;
  // The arguments' leaves; a parameter after them is a device's block of one of them (update_sharding's).
  constexpr std::size_t leaves = std::tuple_size_v<in_leaves>;
  pl.argument_shapes.resize(leaves);
  pl.argument_shardings.resize(leaves);
  for (const ir::node& n : p.nodes) {
    if (n.prim->kind != ir::prim_kind::parameter || static_cast<std::size_t>(n.attr.ints[0]) >= leaves) continue;
    const auto k = static_cast<std::size_t>(n.attr.ints[0]);
    [&]<class... Spec>(std::type_identity<std::tuple<Spec...>>) {
      std::size_t leaf = 0;
      ((leaf++ == k ? (pl.argument_shapes[k] = global_dims<M, Spec>(n.shape), pl.argument_shardings[k] = sdy_dimensions<Spec>(n.shape.rank), 0) : 0), ...);
    }(std::type_identity<in_leaves>{});
  }
  [&]<class... Spec>(std::type_identity<std::tuple<Spec...>>) {
    std::size_t o = 0;
    auto place = [&]<class Sp>(std::type_identity<Sp>) {
      const ir::dims local = p.nodes[static_cast<std::size_t>(p.outputs[o])].shape;
      if (const std::uint8_t axes = Runs::split[o]; axes != 0) {  // blocks along dimension 0 over `axes`, mesh order
        ir::dims global = local;
        std::string dims = "[{";
        for (std::size_t a = 0, named = 0; a < M::rank; ++a)
          if (axes & (1u << a)) {
            global.d[0] *= M::sizes[a];
            dims += (named++ ? ", \"" : "\"") + std::string(M::names[a].view()) + "\"";
          }
        dims += "}";
        for (std::size_t d = 1; d < local.rank; ++d) dims += ", {}";
        pl.result_shapes.push_back(global);
        pl.result_shardings.push_back(dims + "]");
      } else {
        pl.result_shapes.push_back(global_dims<M, Sp>(local));
        pl.result_shardings.push_back(sdy_dimensions<Sp>(local.rank));
      }
      ++o;
    };
    (place(std::type_identity<Spec>{}), ...);
  }(std::type_identity<out_leaves>{});
  return pl;
}
}  // namespace export_detail

// The StableHLO module of jit(f) on arguments of these types: `func.func public @main`, one argument per
// leaf of the arguments and one result per leaf of f's result, in tree order (as jit passes them).
template <class F, class... A>
std::string export_stablehlo(F, const A&...) {
  using traced = export_detail::traced_for<F, A...>;
  if constexpr (export_detail::check_exportable<traced>()) return ir::write_stablehlo(ir::view_of(traced::program), "tessel");
  else return {};
}

// The same for a jitted function (jit(f)): f's module.
template <class F, class... A>
std::string export_stablehlo(const jitted<F>&, const A&... args) {
  return export_stablehlo(F{}, args...);
}

namespace export_detail {
template <class S, class M, class... A>
std::string sharded_module() {
  using runs = typename S::template traced_for<A...>;
  if constexpr (check_exportable<typename runs::traced>()) {
    const ir::mesh_placement pl = placement_of<S, M, runs, std::remove_cvref_t<decltype(detail::normalize_scalar(std::declval<const A&>()))>...>();
    return ir::write_stablehlo(ir::view_of(runs::program), "tessel", &pl);
  } else {
    return {};
  }
}
}  // namespace export_detail

// A shard_map on a mesh: @main takes and returns the global arrays, laid out as the specs say
// (sdy.sharding), and runs the per-device program tessel traced, with its collectives, as an
// sdy.manual_computation over every mesh axis (JAX's lowering of shard_map), on `mhlo.num_partitions`
// devices numbered row-major over the mesh.
template <class M, class I, class O, class F, class... A>
std::string export_stablehlo(const sharded<M, I, O, F>&, const A&...) {
  return export_detail::sharded_module<sharded<M, I, O, F>, M, A...>();
}
// jit with shardings: the global program as tessel partitioned it (transform/partition.hpp), with the
// collectives of tessel's plan, exported as the shard_map over the arguments' leaves that runs it.
template <class M, class I, class O, class F, class... A>
std::string export_stablehlo(const sharded_jit<M, I, O, F>&, const A&...) {
  using flat = typename sharded_jit<M, I, O, F>::template flat_call<typename sharded_jit<M, I, O, F>::template arg_t<A>...>;
  return []<class... L>(std::type_identity<std::tuple<L...>>) {
    return export_detail::sharded_module<typename flat::type, M, L...>();
  }(std::type_identity<typename flat::leaves>{});
}

}  // namespace tessel
