#pragma once
// jit with shardings, the tracing half (JAX's jit(f, in_shardings=..., out_shardings=...); SHARDING.md §3):
// f is written over global arrays, and the partitioner decides at compile time where each value lives on
// the mesh and which collectives move it. f is traced once at the global shapes into a graph of its own;
// then every node is emitted again into a shard_map body at the block shapes one device holds, by the
// partitioner (transform/partitioner.hpp: layouts and the rules per primitive; the running half is
// tessel/shard_map.hpp). Arguments and results may be trees (a parameter struct): one PartitionSpec holds
// for every leaf, or a spec tree gives each element of a tuple its own, as in shard_map.

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessel/core/mesh.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/transform/partitioner.hpp"
#include "tessel/transform/shard_map.hpp"
#include "tessel/transform/trace.hpp"

namespace tessel {
namespace partition_detail {

// ---- the body shard_map runs ----------------------------------------------------------------------------

// A traced argument's global type: its blocks' dimensions multiplied back (every leaf of a tree alike).
template <class M, class Spec>
struct global_tracers {
  template <class T, class S>
  using type = tracer<T, sharding::global_shape_t<M, Spec, S>>;
};
// A struct comes back over the tracer family (the one a plain jit passes), so that f may combine structs
// that arrived under different specs (tree::map over parameters and a split optimizer state).
template <class M, class Spec, class X>
struct global_arg {
  using rebound = tree::rebind_t<X, global_tracers<M, Spec>::template type>;
  using type = std::conditional_t<std::is_same_v<tree::leaf_types_t<rebound>, tree::leaf_types_t<tree::over_family_t<X, tracer>>>,
                                  tree::over_family_t<X, tracer>, rebound>;
};
template <class M, class... S, class... X>
  requires(sizeof...(S) == sizeof...(X))
struct global_arg<M, specs<S...>, std::tuple<X...>> {
  using type = std::tuple<typename global_arg<M, S, X>::type...>;
};

// A result leaf's block type under an out_sharding.
template <class M, class Spec>
struct block_tracers {
  template <class T, class S>
  using type = tracer<T, sharding::local_shape_t<M, Spec, S>>;
};
template <class M, class Spec, class X>
struct local_result {
  using type = tree::rebind_t<X, block_tracers<M, Spec>::template type>;
};
template <class M, class... S, class... X>
  requires(sizeof...(S) == sizeof...(X))
struct local_result<M, specs<S...>, std::tuple<X...>> {
  using type = std::tuple<typename local_result<M, S, X>::type...>;
};
template <class M, class OutSpecs, class R>
struct local_results {
  using type = typename local_result<M, shard_detail::spec_at_t<0, OutSpecs>, R>::type;
};
template <class M, class OutSpecs, class... X>
  requires(shard_detail::spec_count<OutSpecs>::value > 1)
struct local_results<M, OutSpecs, std::tuple<X...>> {
  using type = decltype([]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple<typename local_result<M, shard_detail::spec_at_t<I, OutSpecs>, X>::type...>{};
  }(std::index_sequence_for<X...>{}));
};

template <class M, class... LeafSpec>
constexpr auto layouts_of(std::tuple<LeafSpec...>) {
  return std::array<layout, sizeof...(LeafSpec) + 1>{layout_of<M, LeafSpec>()...};
}
// Every argument leaf's layout, in tree order (a spec tree gives each element its own).
template <class M, class InSpecs, class... L>
constexpr auto leaf_layouts() {
  std::array<layout, (std::size_t{0} + ... + shard_detail::leaf_count<L>()) + 1> out{};
  std::size_t next = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((void)[&]<class... LeafSpec>(std::tuple<LeafSpec...>) { ((out[next++] = layout_of<M, LeafSpec>()), ...); }(
         shard_detail::leaf_specs_t<shard_detail::spec_at_t<I, InSpecs>, L>{}),
     ...);
  }(std::index_sequence_for<L...>{});
  return out;
}

// f traced at the global shapes, into its own graph: leaf k of the arguments is parameter k.
template <class F, class... G>
constexpr auto trace_global(ir::graph_builder& g) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    std::tuple<G...> p{};
    detail::bind_parameters(p, g);
    return F{}(std::get<I>(p)...);
  }(std::index_sequence_for<G...>{});
}

template <class M, class InSpecs, class OutSpecs, class F>
struct partitioned;

// The names jit's messages use.
struct jit_names {
  static constexpr fixed_string function = "tessel::jit (with shardings)";
  static constexpr fixed_string in = "in_shardings";
  static constexpr fixed_string out = "out_shardings";
  static constexpr bool struct_spec_trees = true;
};

// f over trees, called with their leaves one by one and returning its result's leaves as a std::tuple: jit
// with shardings hands shard_map one argument per leaf, each with its own spec, so that the members of a
// struct may be laid out differently (a struct of blocks is over one family). Trees are f's global
// argument types (over the tracer family); f sees them as a plain jit would.
template <class F, class... Trees>
struct over_leaves {
  template <class... L>
  constexpr auto operator()(L... leaves) const {
    ir::graph_builder* g = nullptr;
    ((g = leaves.graph), ...);
    const std::array<int, sizeof...(L) + 1> in{leaves.id..., 0};
    std::size_t k = 0;
    auto rebuild = [&]<class T>(std::type_identity<T>) {
      return tree::build<T>([&]<class Leaf>(std::type_identity<Leaf>) {
        Leaf t{};
        t.graph = g;
        t.id = in[k++];
        return t;
      });
    };
    std::tuple<Trees...> trees{rebuild(std::type_identity<Trees>{})...};  // braces: built in order
    const auto r = std::apply(F{}, std::move(trees));
    using out = tree::leaf_types_t<decltype(r)>;
    std::array<int, std::tuple_size_v<out> + 1> ids{};
    k = 0;
    tree::for_each(r, [&](const auto& x) { ids[k++] = x.id; });
    out o{};
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((std::get<K>(o).graph = g, std::get<K>(o).id = ids[K]), ...);
    }(std::make_index_sequence<std::tuple_size_v<out>>{});
    return o;
  }
};

// An out_sharding checked against f's global result (a tensor, or every leaf of a tree).
template <class M, std::size_t I, class Spec, class X>
consteval bool check_out_sharding() {
  if constexpr (shard_detail::is_spec_tree_v<Spec>) {
    return shard_detail::require_valid_spec_tree<jit_names, false, I, M, Spec, tree::rebind_t<X, tensor>>();
  } else if constexpr (!is_partition_spec_v<Spec>) {
    raise<"tessel::jit (with shardings): an out_shardings entry is not a PartitionSpec; fix: write tessel::P<...>", Spec>();
    return false;
  } else if constexpr (Traced<X>) {
    return sharding::require_valid_spec<jit_names::function, jit_names::out, I, M, Spec, tensor_type<typename X::value_type, typename X::shape_type>>();
  } else {
    return shard_detail::require_valid_leaf_specs<jit_names, false, I, M, Spec, tree::rebind_t<X, tensor>>();
  }
}
template <class M, class OutSpecs, class R>
consteval bool check_out_shardings() {
  if constexpr (!shard_detail::check_out_count<jit_names, OutSpecs, R>()) return false;
  else if constexpr (shard_detail::spec_count<OutSpecs>::value == 1) return check_out_sharding<M, 0, shard_detail::spec_at_t<0, OutSpecs>, R>();
  else
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (check_out_sharding<M, I, shard_detail::spec_at_t<I, OutSpecs>, std::tuple_element_t<I, R>>() && ...);
    }(std::make_index_sequence<shard_detail::spec_count<OutSpecs>::value>{});
}

// What shard_map traces per device: f partitioned. Its arguments are the device's blocks.
template <class M, class InSpecs, class OutSpecs, class F>
struct partitioned {
  // f's result type at the global shapes (declared only).
  template <class... L, std::size_t... I>
  static auto result_of(std::index_sequence<I...>)
      -> decltype(F{}(std::declval<typename global_arg<M, shard_detail::spec_at_t<I, InSpecs>, L>::type>()...));

  template <class... L>
  constexpr auto operator()(L... blocks) const {
    using R = decltype(result_of<L...>(std::index_sequence_for<L...>{}));
    using result = typename local_results<M, OutSpecs, R>::type;
    if constexpr (!check_out_shardings<M, OutSpecs, R>()) {
      return result{};
    } else {
      ir::graph_builder* found = nullptr;
      (tree::for_each(blocks, [&](const auto& leaf) { found = found ? found : leaf.graph; }), ...);
      ir::graph_builder& g = *found;
      ir::graph_builder global;
      const R r = [&]<std::size_t... I>(std::index_sequence<I...>) {
        return trace_global<F, typename global_arg<M, shard_detail::spec_at_t<I, InSpecs>, L>::type...>(global);
      }(std::index_sequence_for<L...>{});
      if (global.missing_rule != nullptr) g.report_missing(global.missing_rule, global.missing_rule_kind);
      if (global.error_size != 0) g.report_error(std::string_view(global.error.data(), global.error_size));

      // Leaf k of the blocks is parameter k of f's graph, laid out as its argument's in_sharding says.
      partitioner p(global, g);
      constexpr auto in = leaf_layouts<M, InSpecs, L...>();
      int leaf = 0;
      (tree::for_each(blocks, [&](const auto& b) {
         p.bind(leaf, b.id, in[static_cast<std::size_t>(leaf)]);
         ++leaf;
       }),
       ...);

      std::vector<int> ids;
      tree::for_each(r, [&](const auto& x) { ids.push_back(x.id); });
      p.run(ids);

      constexpr auto out = layouts_of<M>(shard_detail::out_leaf_specs_t<OutSpecs, R>{});
      result o{};
      std::size_t k = 0;
      tree::for_each(o, [&](auto& x) {
        x.graph = &g;
        x.id = p.result(ids[k], out[k]);
        ++k;
      });
      return o;
    }
  }
};

}  // namespace partition_detail

template <class M, class InSpecs, class OutSpecs, class F>
struct shard_detail::api_names<partition_detail::partitioned<M, InSpecs, OutSpecs, F>> : partition_detail::jit_names {};

// in_shardings<...> and out_shardings<...>: one PartitionSpec per argument, per returned tuple element
// (or one for all results).
template <class... Specs>
inline constexpr specs<Specs...> in_shardings{};
template <class... Specs>
inline constexpr specs<Specs...> out_shardings{};

}  // namespace tessel
