#pragma once
// Trees of tensors (JAX's pytrees): a leaf is a tensor (or, while tracing, a tracer); a node is a
// struct reflected with Boost.Hana, a std::tuple, or a std::array (a stack of identical layers: one
// element type, so its cost at compile time does not grow with its length; prefer it to a long tuple). Parameter sets, gradients and optimizer states
// are trees, so jit, grad, tree_map and checkpoints see their leaves in one order (members in
// declaration order, depth first) and by name ("layer1.w").
//
// A struct used as a tree is a template over the tensor family, so that tracing can rebind it:
//
//   template <template <class, class> class T = tessel::tensor>
//   struct mlp {
//     BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, tessel::shape<784, 256>>, w1), (T<float, tessel::shape<256>>, b1));
//   };
//   mlp<> params;                            // tensors
//   tessel::tree::rebind_t<mlp<>, tessel::tracer>   // mlp<tracer>: what a traced function receives

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/hana/accessors.hpp>
#include <boost/hana/define_struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/unpack.hpp>

#include "tessel/core/fixed_string.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/tracer.hpp"

namespace tessel {

template <class X>
concept Struct = boost::hana::Struct<std::remove_cvref_t<X>>::value;

template <class X>
concept Leaf = Tensor<X> || Traced<X>;

template <class X>
inline constexpr bool is_tuple_v = false;
template <class... X>
inline constexpr bool is_tuple_v<std::tuple<X...>> = true;

template <class X>
inline constexpr bool is_array_v = false;
template <class X, std::size_t N>
inline constexpr bool is_array_v<std::array<X, N>> = true;

namespace tree {

// The same tree with every leaf's family replaced: mlp<tensor> -> mlp<tracer>, tensor<T,S> -> tracer<T,S>.
template <class X, template <class, class> class To>
struct rebind {
  using type = X;
};
template <class T, class S, template <class, class> class To>
struct rebind<tensor<T, S>, To> {
  using type = To<T, S>;
};
template <class T, class S, template <class, class> class To>
struct rebind<tracer<T, S>, To> {
  using type = To<T, S>;
};
// A struct over the tensor or tracer family becomes the same struct over To. A struct over another
// family (scan's ys: members stacked along a new axis) keeps each member's dtype and shape.
template <template <class, class> class From, template <class, class> class To>
struct leafwise {
  template <class T, class S>
  using type = To<typename From<T, S>::value_type, typename From<T, S>::shape_type>;
};
template <template <template <class, class> class> class P, template <class, class> class From, template <class, class> class To>
struct rebind<P<From>, To> {
  using type = P<leafwise<From, To>::template type>;
};
template <template <template <class, class> class> class P, template <class, class> class To>
struct rebind<P<tensor>, To> {
  using type = P<To>;
};
template <template <template <class, class> class> class P, template <class, class> class To>
struct rebind<P<tracer>, To> {
  using type = P<To>;
};
template <class... X, template <class, class> class To>
struct rebind<std::tuple<X...>, To> {
  using type = std::tuple<typename rebind<X, To>::type...>;
};
template <class X, std::size_t N, template <class, class> class To>
struct rebind<std::array<X, N>, To> {
  using type = std::array<typename rebind<X, To>::type, N>;
};

// The same struct over the family To, whatever family it is over now (mlp<F> -> mlp<To>); any other tree is
// its own. Where a struct of blocks is put together again, this is the struct the caller knows.
template <class X, template <class, class> class To>
struct over_family {
  using type = X;
};
template <template <template <class, class> class> class P, template <class, class> class F, template <class, class> class To>
struct over_family<P<F>, To> {
  using type = P<To>;
};
template <class X, template <class, class> class To>
using over_family_t = typename over_family<X, To>::type;
template <class X, template <class, class> class To>
using rebind_t = typename rebind<std::remove_cvref_t<X>, To>::type;

// Calls f(leaf) on every leaf, depth first in declaration order.
template <class X, class F>
constexpr void for_each(X&& x, F&& f) {
  using plain = std::remove_cvref_t<X>;
  if constexpr (Leaf<plain>) {
    f(x);
  } else if constexpr (is_tuple_v<plain>) {
    // An index fold, not std::apply: apply's noexcept test instantiates the whole fold once more, and
    // that cost grows with the square of the leaf count (128-leaf parameter tuples).
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (tree::for_each(std::get<I>(x), f), ...);
    }(std::make_index_sequence<std::tuple_size_v<plain>>{});
  } else if constexpr (is_array_v<plain>) {
    for (auto& part : x) tree::for_each(part, f);
  } else {
    static_assert(Struct<plain>, "tessel::tree: a tree is a tensor, a std::tuple or std::array of trees, or a struct "
                                 "declared with BOOST_HANA_DEFINE_STRUCT whose members are trees");
    boost::hana::for_each(boost::hana::accessors<plain>(), [&](auto pair) { tree::for_each(boost::hana::second(pair)(x), f); });
  }
}

// Calls f(name, leaf) with dotted names from the members ("layer1.w"); tuple parts are named by index.
template <class X, class F>
void for_each_named(X&& x, F&& f, const std::string& prefix = "") {
  using plain = std::remove_cvref_t<X>;
  auto join = [&](std::string_view part) { return prefix.empty() ? std::string(part) : prefix + "." + std::string(part); };
  if constexpr (Leaf<plain>) {
    f(prefix, x);
  } else if constexpr (is_tuple_v<plain>) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (tree::for_each_named(std::get<I>(x), f, join(std::to_string(I))), ...);
    }(std::make_index_sequence<std::tuple_size_v<plain>>{});
  } else if constexpr (is_array_v<plain>) {
    for (std::size_t i = 0; i < x.size(); ++i) tree::for_each_named(x[i], f, join(std::to_string(i)));
  } else {
    boost::hana::for_each(boost::hana::accessors<plain>(), [&](auto pair) {
      tree::for_each_named(boost::hana::second(pair)(x), f, join(boost::hana::to<const char*>(boost::hana::first(pair))));
    });
  }
}

template <class X>
consteval std::size_t leaf_count() {
  std::size_t n = 0;
  X x{};
  tree::for_each(x, [&](const auto&) { ++n; });
  return n;
}

// The leaf types of a tree type, in tree order, as a std::tuple (only types: leaves may be tensors).
template <class X>
struct leaf_types;
template <class X>
using leaf_types_t = typename leaf_types<std::remove_cvref_t<X>>::type;

template <class... Lists>
struct joined {
  using type = std::tuple<>;
};
template <class... A>
struct joined<std::tuple<A...>> {
  using type = std::tuple<A...>;
};
template <class... A, class... B, class... Rest>
struct joined<std::tuple<A...>, std::tuple<B...>, Rest...> : joined<std::tuple<A..., B...>, Rest...> {};

template <class X, class Accessors>
struct member_leaf_types;
template <class X, class... Name, class... Get>
struct member_leaf_types<X, boost::hana::tuple<boost::hana::pair<Name, Get>...>>
    : joined<leaf_types_t<decltype(std::declval<const Get&>()(std::declval<X&>()))>...> {};

// A struct's member types, in declaration order, as a std::tuple.
template <class X, class Accessors = std::remove_cvref_t<decltype(boost::hana::accessors<X>())>>
struct member_types;
template <class X, class... Name, class... Get>
struct member_types<X, boost::hana::tuple<boost::hana::pair<Name, Get>...>> {
  using type = std::tuple<std::remove_cvref_t<decltype(std::declval<const Get&>()(std::declval<X&>()))>...>;
};
template <class X>
using member_types_t = typename member_types<std::remove_cvref_t<X>>::type;

template <class X>
  requires Leaf<X>
struct leaf_types<X> {
  using type = std::tuple<X>;
};
template <class... X>
struct leaf_types<std::tuple<X...>> : joined<leaf_types_t<X>...> {};
template <class X, std::size_t N>
struct leaf_types<std::array<X, N>> {
  template <std::size_t... I>
  static auto repeat(std::index_sequence<I...>) -> typename joined<std::conditional_t<I == I, leaf_types_t<X>, void>...>::type;
  using type = decltype(repeat(std::make_index_sequence<N>{}));
};
template <class X>
  requires(!Leaf<X> && Struct<X>)
struct leaf_types<X> : member_leaf_types<X, std::remove_cvref_t<decltype(boost::hana::accessors<X>())>> {};

// The dotted name of leaf k of a tree type ("layer1.w", "0.b"), as for_each_named gives it, for messages
// made at compile time.
struct leaf_name_text {
  std::array<char, 96> text{};
  std::size_t size = 0;
  constexpr void append(std::string_view part) {
    if (size != 0 && size < text.size()) text[size++] = '.';
    for (char c : part)
      if (size < text.size()) text[size++] = c;
  }
  constexpr void append(std::size_t index) {
    message_builder digits;
    digits << static_cast<std::uint64_t>(index);
    append(digits.view());
  }
  constexpr std::string_view view() const { return {text.data(), size}; }
};

// Walks the tree type to leaf k (counted down in `k`), appending the names on the way; true once there.
template <class X>
constexpr bool find_leaf_name(std::size_t& k, leaf_name_text& name) {
  using plain = std::remove_cvref_t<X>;
  const std::size_t mark = name.size;
  bool found = false;
  if constexpr (Leaf<plain>) {
    if (k == 0) return true;
    --k;
    return false;
  } else if constexpr (is_tuple_v<plain>) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((found || (name.size = mark, name.append(I), found = find_leaf_name<std::tuple_element_t<I, plain>>(k, name))), ...);
    }(std::make_index_sequence<std::tuple_size_v<plain>>{});
  } else if constexpr (is_array_v<plain>) {
    for (std::size_t i = 0; i < std::tuple_size_v<plain> && !found; ++i) {
      name.size = mark;
      name.append(i);
      found = find_leaf_name<typename plain::value_type>(k, name);
    }
  } else {
    boost::hana::for_each(boost::hana::accessors<plain>(), [&](auto pair) {
      if (found) return;
      name.size = mark;
      name.append(std::string_view(boost::hana::to<const char*>(boost::hana::first(pair))));
      found = find_leaf_name<decltype(boost::hana::second(pair)(std::declval<plain&>()))>(k, name);
    });
  }
  if (!found) name.size = mark;
  return found;
}
template <class X>
constexpr leaf_name_text leaf_name(std::size_t k) {
  leaf_name_text name;
  find_leaf_name<X>(k, name);
  return name;
}

// A tree of X's structure whose leaves are f(leaf of x, leaf of ys...) — the leaves' types are kept,
// so f returns the leaf's own type (tensor or tracer of the same dtype and shape).
template <class F, class X, class... Ys>
constexpr X map(F&& f, const X& x, const Ys&... ys) {
  using plain = std::remove_cvref_t<X>;
  if constexpr (Leaf<plain>) {
    return f(x, ys...);
  } else if constexpr (is_tuple_v<plain>) {
    const auto part = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      return tree::map(f, std::get<I>(x), std::get<I>(ys)...);
    };
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return plain{part(std::integral_constant<std::size_t, I>{})...};
    }(std::make_index_sequence<std::tuple_size_v<plain>>{});
  } else if constexpr (is_array_v<plain>) {
    const auto part = [&](std::size_t i) { return tree::map(f, x[i], ys[i]...); };
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return plain{part(I)...};
    }(std::make_index_sequence<std::tuple_size_v<plain>>{});
  } else {
    plain out{};
    boost::hana::for_each(boost::hana::accessors<plain>(), [&](auto pair) {
      const auto& get = boost::hana::second(pair);
      get(out) = tree::map(f, get(x), get(ys)...);
    });
    return out;
  }
}

// A tree of type X built leaf by leaf in tree order: make_leaf(std::type_identity<Leaf>{}) gives each
// (so leaves can be made without first default-constructing them, unlike map).
template <class X, class F>
constexpr X build(F&& make_leaf) {
  if constexpr (Leaf<X>) {
    return make_leaf(std::type_identity<X>{});
  } else if constexpr (is_tuple_v<X>) {
    return [&]<class... P>(std::type_identity<std::tuple<P...>>) {
      return X{tree::build<P>(make_leaf)...};  // braces: built in order
    }(std::type_identity<X>{});
  } else if constexpr (is_array_v<X>) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return X{(static_cast<void>(I), tree::build<typename X::value_type>(make_leaf))...};  // braces: in order
    }(std::make_index_sequence<std::tuple_size_v<X>>{});
  } else {
    return boost::hana::unpack(boost::hana::accessors<X>(), [&](auto... pairs) {
      return X{tree::build<std::remove_cvref_t<decltype(boost::hana::second(pairs)(std::declval<X&>()))>>(make_leaf)...};
    });
  }
}

}  // namespace tree

// jax.tree_util.tree_map's spelling.
template <class F, class X, class... Ys>
constexpr X tree_map(F&& f, const X& x, const Ys&... ys) {
  return tree::map(f, x, ys...);
}

}  // namespace tessel
