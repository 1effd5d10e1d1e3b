#pragma once
// shard_map, the tracing half (JAX's jax.shard_map; SHARDING.md §1): the function is traced once, at the
// block shapes one device holds (each argument's dimensions divided by the mesh axes its in_spec splits them
// over), with the mesh bound so that collectives can name its axes. Every traced value carries the mesh axes
// along which it may differ between devices (JAX's check_vma): an argument those its spec names, a collective
// removes (psum) or adds (all_gather) its axes, everything else the union of its operands'. An out_spec that
// leaves out an axis the result may vary along is a compile error: the devices' blocks could differ, and
// which one would the result be? The running half is tessel/shard_map.hpp.

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "tessel/core/mesh.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/transform/trace.hpp"

namespace tessel {
namespace shard_detail {

template <class X>
struct spec_list {
  using type = specs<X>;
};
template <class... S>
struct spec_list<specs<S...>> {
  using type = specs<S...>;
};

template <class Specs>
struct spec_count;
template <class... S>
struct spec_count<specs<S...>> : std::integral_constant<std::size_t, sizeof...(S)> {};

template <std::size_t I, class Specs>
struct spec_at;
template <std::size_t I, class... S>
struct spec_at<I, specs<S...>> {
  using type = std::tuple_element_t<I, std::tuple<S...>>;
};
template <std::size_t I, class Specs>
using spec_at_t = typename spec_at<I, Specs>::type;

// A tensor family whose leaves are the blocks one device holds of Spec's layout over M (JAX's prefix
// specs: one PartitionSpec stands for every leaf of a tree), and its inverse, the global arrays of blocks.
template <class M, class Spec>
struct block_family {
  template <class T, class S>
  using type = tensor<T, sharding::local_shape_t<M, Spec, S>>;
};
template <class M, class Spec, template <class, class> class Blocks>
struct global_family {
  template <class T, class S>
  using type = tensor<T, sharding::global_shape_t<M, Spec, typename Blocks<T, S>::shape_type>>;
};

// A spec tree: specs<S...> as the entry for a std::tuple argument gives each element its own spec (JAX's
// spec trees: (P(), P('data'), P('data')) for an optax state (count, mu, nu)); entries nest. jit with
// shardings also takes one for a struct, an entry per member in declaration order (shard_map cannot: it
// hands f a struct whose members are blocks of one family).
template <class Spec>
inline constexpr bool is_spec_tree_v = false;
template <class... S>
inline constexpr bool is_spec_tree_v<specs<S...>> = true;

// What a device receives for an argument: a tensor's block; a tree with every leaf its block (the tree
// itself when its spec is P<>); a scalar whole (its spec is P<>); a tuple under a spec tree, each element
// as its own spec says.
template <class M, class Spec, class A>
struct local_arg {
  using type = std::conditional_t<Spec::rank == 0 || DType<A>, A, tree::rebind_t<A, block_family<M, Spec>::template type>>;
};
template <class M, class Spec, class T, class S>
struct local_arg<M, Spec, tensor<T, S>> {
  using type = tensor<T, sharding::local_shape_t<M, Spec, S>>;
};
template <class M, class... S, class... X>
  requires(sizeof...(S) == sizeof...(X))
struct local_arg<M, specs<S...>, std::tuple<X...>> {
  using type = std::tuple<typename local_arg<M, S, X>::type...>;
};

template <class A>
constexpr std::size_t leaf_count() {
  if constexpr (DType<A>) return 1;
  else return tree::leaf_count<tree::rebind_t<A, tracer>>();
}

// Every leaf's PartitionSpec, in tree order (a std::tuple of P types): Spec itself for each leaf, or, under
// a spec tree, each element's own.
template <class Spec, class A>
struct leaf_specs {
  using type = decltype([]<std::size_t... L>(std::index_sequence<L...>) {
    return std::tuple<std::conditional_t<L == L, Spec, void>...>{};
  }(std::make_index_sequence<leaf_count<A>()>{}));
};
template <class... S, class... X>
  requires(sizeof...(S) == sizeof...(X))
struct leaf_specs<specs<S...>, std::tuple<X...>> {
  using type = decltype(std::tuple_cat(typename leaf_specs<S, X>::type{}...));
};
template <class... S, class A>
  requires(!Leaf<A> && Struct<A>)
struct leaf_specs<specs<S...>, A> : leaf_specs<specs<S...>, tree::member_types_t<A>> {};
template <class Spec, class A>
using leaf_specs_t = typename leaf_specs<Spec, std::remove_cvref_t<A>>::type;

template <class M>
constexpr ir::mesh_shape mesh_of() {
  ir::mesh_shape m;
  m.rank = M::rank;
  for (std::size_t a = 0; a < M::rank; ++a) {
    for (std::size_t i = 0; i < M::names[a].view().size(); ++i) m.names[a][i] = M::names[a].text[i];
    m.sizes[a] = M::sizes[a];
  }
  return m;
}

// The tracing context of a shard_map body: its mesh, and each argument leaf's varying axes.
template <class M, class InSpecs, class... Args>
struct context {
  static constexpr void prepare(ir::graph_builder& g) { g.mesh = mesh_of<M>(); }
  static constexpr auto masks = [] {
    std::array<std::uint8_t, (std::size_t{0} + ... + leaf_count<Args>()) + 1> m{};
    std::size_t next = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((void)[&]<class... LeafSpec>(std::tuple<LeafSpec...>) { ((m[next++] = sharding::axes_mask<M, LeafSpec>()), ...); }(
           leaf_specs_t<spec_at_t<I, InSpecs>, Args>{}),
       ...);
    }(std::index_sequence_for<Args...>{});
    return m;
  }();
  static constexpr std::uint8_t varying(std::size_t leaf) { return masks[leaf]; }
};

// The names a call's messages use: shard_map's, or jit's with shardings (whose body, transform/partition.hpp,
// specializes this).
template <class Body>
struct api_names {
  static constexpr fixed_string function = "tessel::shard_map";
  static constexpr fixed_string in = "in_specs";
  static constexpr fixed_string out = "out_specs";
  static constexpr bool struct_spec_trees = false;  // a spec tree may be given for a struct (one entry per member)
};

// A PartitionSpec given for a whole tree holds for each of its leaves (JAX's prefix specs): each leaf is
// checked as an argument (In) or result would be, and the message names the leaf.
template <class Names, bool In, std::size_t Index, class M, class Spec, class Tree, std::size_t Leaf, class X, bool Prefix = true>
consteval bool require_valid_leaf_spec() {
  if constexpr (sharding::check_v<M, Spec, X>.problem == sharding::spec_problem::none) {
    return true;
  } else {
    raise<fit<[] {
      message_builder m;
      constexpr auto name = tree::leaf_name<Tree>(Leaf);
      m << Names::function << ": ";
      if constexpr (In) m << Names::in;
      else m << Names::out;
      m << "[" << static_cast<std::uint64_t>(Index) << "] ";
      if constexpr (Prefix) {
        Spec::append(m << "is ") << ", which holds for every leaf of " << (In ? "args[" : "results[") << static_cast<std::uint64_t>(Index)
                                 << "] (a tree), and leaf " << static_cast<std::uint64_t>(Leaf) << " ('" << name.view() << "') is of type ";
      } else {
        m << "gives leaf " << static_cast<std::uint64_t>(Leaf) << " ('" << name.view() << "') of " << (In ? "args[" : "results[")
          << static_cast<std::uint64_t>(Index) << "] the spec ";
        Spec::append(m) << ", and it is of type ";
      }
      append_type<X>(m) << " on a ";
      M::append(m) << ": ";
      return sharding::append_spec_problem<M, Spec, X>(m);
    }>(), X>();
    return false;
  }
}
template <class Names, bool In, std::size_t Index, class M, class Spec, class Tree>
consteval bool require_valid_leaf_specs() {
  using leaves = tree::leaf_types_t<Tree>;
  return []<std::size_t... L>(std::index_sequence<L...>) {
    return (require_valid_leaf_spec<Names, In, Index, M, Spec, Tree, L, std::tuple_element_t<L, leaves>>() && ...);
  }(std::make_index_sequence<std::tuple_size_v<leaves>>{});
}

// A spec tree for args[Index]: a std::tuple of as many elements as it has entries (with Structs, a struct of
// as many members), nested trees alike, each leaf valid for its own spec.
template <class Spec, class A, bool Structs = false>
consteval bool spec_tree_fits() {
  if constexpr (!is_spec_tree_v<Spec>) {
    return is_partition_spec_v<Spec>;
  } else if constexpr (Structs && !Leaf<A> && Struct<A>) {
    return spec_tree_fits<Spec, tree::member_types_t<A>, true>();
  } else if constexpr (!is_tuple_v<A>) {
    return false;
  } else if constexpr (spec_count<Spec>::value != std::tuple_size_v<A>) {
    return false;
  } else {
    return []<std::size_t... J>(std::index_sequence<J...>) {
      return (spec_tree_fits<spec_at_t<J, Spec>, std::tuple_element_t<J, A>, Structs>() && ...);
    }(std::make_index_sequence<std::tuple_size_v<A>>{});
  }
}
template <class Names, bool In, std::size_t Index, class M, class Spec, class A>
consteval bool require_valid_spec_tree() {
  if constexpr (!Names::struct_spec_trees && !spec_tree_fits<Spec, A>() && spec_tree_fits<Spec, A, true>()) {  // it fits a struct
    raise<fit<[] {
      message_builder m;
      m << Names::function << ": ";
      if constexpr (In) m << Names::in;
      else m << Names::out;
      return m << "[" << static_cast<std::uint64_t>(Index) << "] gives a struct in " << (In ? "args[" : "results[")
               << static_cast<std::uint64_t>(Index)
               << "] a tree of specs (specs<...>), one per member, but f sees a struct whose members are all blocks of one "
                  "PartitionSpec; fix: one PartitionSpec for the whole struct, the members as separate arguments, or "
                  "tessel::jit<M>(f, in_shardings<...>, out_shardings<...>), which takes one spec per member (f over global arrays)";
    }>(), Spec, A>();
    return false;
  } else if constexpr (!spec_tree_fits<Spec, A, Names::struct_spec_trees>()) {
    raise<fit<[] {
      message_builder m;
      m << Names::function << ": ";
      if constexpr (In) m << Names::in;
      else m << Names::out;
      m << "[" << static_cast<std::uint64_t>(Index) << "] is a tree of specs (specs<...>), which does not match "
        << (In ? "args[" : "results[") << static_cast<std::uint64_t>(Index) << "]: a spec tree gives a std::tuple one entry per element";
      if constexpr (Names::struct_spec_trees) m << " and a struct one per member, in declaration order";
      return m << " (a PartitionSpec, or a nested tree for a nested tuple); fix: give one entry per element, or one "
                  "PartitionSpec for the whole "
               << (In ? "argument" : "result");
    }>(), Spec, A>();
    return false;
  } else {
    using leaves = tree::leaf_types_t<A>;
    using specs_of = leaf_specs_t<Spec, A>;
    return []<std::size_t... L>(std::index_sequence<L...>) {
      return (require_valid_leaf_spec<Names, In, Index, M, std::tuple_element_t<L, specs_of>, A, L, std::tuple_element_t<L, leaves>, false>() && ...);
    }(std::make_index_sequence<std::tuple_size_v<leaves>>{});
  }
}

// The arguments' specs: one per argument, each valid for its argument (for each leaf of a tree; a scalar
// takes P<> only).
template <class Names, class M, class InSpecs, class... Args>
consteval bool check_arguments() {
  if constexpr (spec_count<InSpecs>::value != sizeof...(Args)) {
    raise<fit<[] {
      return message_builder{} << Names::function << ": " << Names::in << " has " << static_cast<std::uint64_t>(spec_count<InSpecs>::value)
                               << " entries but the function is called with " << static_cast<std::uint64_t>(sizeof...(Args))
                               << " arguments; fix: give one PartitionSpec per argument (P<> for a replicated one)";
    }>(), InSpecs>();
    return false;
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return ([&] {
        using A = std::tuple_element_t<I, std::tuple<Args...>>;
        using Spec = spec_at_t<I, InSpecs>;
        if constexpr (!is_partition_spec_v<Spec> && !is_spec_tree_v<Spec>) {
          raise<fit<[] {
            return message_builder{} << Names::function << ": an " << Names::in << " entry is not a PartitionSpec; fix: write tessel::P<...>";
          }>(), Spec>();
          return false;
        } else if constexpr (is_spec_tree_v<Spec>) {
          return require_valid_spec_tree<Names, true, I, M, Spec, A>();
        } else if constexpr (is_tensor_v<A>) {
          return sharding::require_valid_spec<Names::function, Names::in, I, M, Spec, A>();
        } else if constexpr (Spec::rank == 0) {
          return true;
        } else if constexpr (DType<A>) {
          raise<fit<[] {
            return message_builder{} << Names::function << ": args[" << static_cast<std::uint64_t>(I)
                                     << "] is a scalar, which has no dimension to split: its " << Names::in << " entry must be P<>; "
                                        "fix: write P<> for it, or pass a tensor";
          }>(), A>();
          return false;
        } else {
          return require_valid_leaf_specs<Names, true, I, M, Spec, A>();
        }
      }() && ...);
    }(std::index_sequence_for<Args...>{});
  }
}

// Which out_spec covers each result leaf: one per element of a returned tuple, or one for everything.
template <class OutSpecs, class R>
constexpr auto out_spec_of_leaf() {
  std::array<std::size_t, tree::leaf_count<R>() + 1> which{};
  if constexpr (is_tuple_v<R>) {
    if constexpr (spec_count<OutSpecs>::value == std::tuple_size_v<R> && spec_count<OutSpecs>::value > 1) {
      std::size_t next = 0;
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((void)[&] {
          for (std::size_t l = 0; l < tree::leaf_count<std::tuple_element_t<I, R>>(); ++l) which[next++] = I;
        }(), ...);
      }(std::make_index_sequence<std::tuple_size_v<R>>{});
    }
  }
  return which;
}

template <class OutSpecs, class R>
inline constexpr auto out_spec_of_leaf_v = out_spec_of_leaf<OutSpecs, R>();

// Every result leaf's own PartitionSpec (a std::tuple of P types): out_specs' entries, each for every leaf
// of its result or, as a spec tree, per element.
template <class OutSpecs, class R>
struct out_leaf_specs {
  using type = leaf_specs_t<spec_at_t<0, OutSpecs>, R>;
};
template <class OutSpecs, class... X>
  requires(spec_count<OutSpecs>::value > 1)
struct out_leaf_specs<OutSpecs, std::tuple<X...>> {
  using type = decltype([]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple_cat(leaf_specs_t<spec_at_t<I, OutSpecs>, X>{}...);
  }(std::index_sequence_for<X...>{}));
};
template <class OutSpecs, class R>
using out_leaf_specs_t = typename out_leaf_specs<OutSpecs, R>::type;

// The global arrays of a tree of blocks laid out by Spec (a spec tree: each element by its own).
template <class M, class Spec, class X>
struct global_tracer_tree {
  using type = tree::rebind_t<X, global_family<M, Spec, tracer>::template type>;
};
template <class M, class... S, class... X>
  requires(sizeof...(S) == sizeof...(X))
struct global_tracer_tree<M, specs<S...>, std::tuple<X...>> {
  using type = std::tuple<typename global_tracer_tree<M, S, X>::type...>;
};

template <class Names, class OutSpecs, class R>
consteval bool check_out_count() {
  constexpr std::size_t n = spec_count<OutSpecs>::value;
  if constexpr (n == 1) return true;
  else if constexpr (is_tuple_v<R>) {
    if constexpr (std::tuple_size_v<R> == n) return true;
    else {
      raise<fit<[] {
        return message_builder{} << Names::function << ": " << Names::out << " has " << static_cast<std::uint64_t>(n) << " entries but the function returns "
                                 << static_cast<std::uint64_t>(std::tuple_size_v<R>) << " results; fix: one PartitionSpec per returned element, or one for all";
      }>(), R>();
      return false;
    }
  } else {
    raise<fit<[] {
      return message_builder{} << Names::function << ": " << Names::out << " has " << static_cast<std::uint64_t>(n)
                               << " entries but the function returns one value; fix: give one PartitionSpec";
    }>(), R>();
    return false;
  }
}

// An out_spec must name every mesh axis its result may vary along.
template <class M, class OutSpecs, std::size_t Leaf, std::size_t Spec, class Sp, std::uint8_t Varying>
consteval bool check_replication() {
  constexpr std::uint8_t named = sharding::axes_mask<M, Sp>();
  constexpr auto extra = static_cast<std::uint8_t>(Varying & ~named);
  if constexpr (extra != 0) {
    raise<fit<[] {
      message_builder m;
      auto list = [&m](std::uint8_t bits) {
        bool first = true;
        for (std::size_t a = 0; a < M::rank; ++a)
          if (bits & (1u << a)) {
            m << (first ? "" : ", ") << M::names[a].view();
            first = false;
          }
      };
      m << "tessel::shard_map: out_specs[" << static_cast<std::uint64_t>(Spec) << "] is ";
      Sp::append(m) << ", which says result leaf " << static_cast<std::uint64_t>(Leaf) << " is the same on every device along {";
      list(extra);
      m << "}, but it may vary along {";
      list(Varying);
      m << "} (on a ";
      M::append(m) << "); fix: psum (or pmean, all_gather) it over {";
      list(extra);
      m << "}, or name those axes in the out_spec to concatenate the devices' blocks";
      return m;
    }>(), Sp>();
    return false;
  }
  return true;
}

// The out_specs' own validity (rank, names) for the results they cover.
template <class M, std::size_t I, class Spec, class X>
consteval bool check_out_spec() {
  using names = api_names<void>;
  if constexpr (is_spec_tree_v<Spec>) {
    if constexpr (!spec_tree_fits<Spec, X>()) return require_valid_spec_tree<names, false, I, M, Spec, X>();
    else return require_valid_spec_tree<names, false, I, M, Spec, tree::rebind_t<typename global_tracer_tree<M, Spec, X>::type, tensor>>();
  } else if constexpr (!is_partition_spec_v<Spec>) {
    raise<"tessel::shard_map: an out_specs entry is not a PartitionSpec; fix: write tessel::P<...>", Spec>();
    return false;
  } else if constexpr (Traced<X>) {
    using global = tensor_type<typename X::value_type, sharding::global_shape_t<M, Spec, typename X::shape_type>>;
    return sharding::require_valid_spec<names::function, names::out, I, M, Spec, global>();
  } else if constexpr (Spec::rank == 0) {
    return true;
  } else {
    using global = tree::rebind_t<X, global_family<M, Spec, tracer>::template type>;
    return require_valid_leaf_specs<names, false, I, M, Spec, global>();
  }
}
template <class M, class OutSpecs, class R>
consteval bool check_out_specs() {
  if constexpr (!check_out_count<api_names<void>, OutSpecs, R>()) return false;
  else if constexpr (spec_count<OutSpecs>::value == 1) return check_out_spec<M, 0, spec_at_t<0, OutSpecs>, R>();
  else
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (check_out_spec<M, I, spec_at_t<I, OutSpecs>, std::tuple_element_t<I, R>>() && ...);
    }(std::make_index_sequence<spec_count<OutSpecs>::value>{});
}

}  // namespace shard_detail

// Declared here, defined in tessel/shard_map.hpp (which runs the devices).
template <class M, class InSpecs, class OutSpecs, class F>
class sharded;

}  // namespace tessel
