#pragma once
// Static shapes: `shape<Dims...>` and the compile-time rules every operation uses.
//
// A shape is a type; its numbers are also available as a constexpr std::array (`S::dims`) so that rules
// are ordinary constexpr functions over arrays (cheap to compile), and only the result becomes a type
// again (`shape_from<array>`). Each checked rule takes the operation's name and raises a compile_error
// (core/error.hpp) at the caller that names the operation, the shapes, the rule and the fix.
//
//   using s = tessel::shape<2, 3>;   s::rank == 2, s::size == 6, s::strides == {3, 1}
//   tessel::broadcast_shapes_t<tessel::shape<2, 1>, tessel::shape<3>>   // shape<2, 3>
//   tessel::permute_t<tessel::shape<2, 3, 4>, 2, 0, 1>                  // shape<4, 2, 3>

#include <array>
#include <cstddef>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tessel/core/dtype.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"

namespace tessel {

// JAX's None where an axis may be named: vmap's in_axes / out_axes entry for an argument not mapped, and a
// PartitionSpec entry for a dimension not split (core/mesh.hpp).
inline constexpr long none = std::numeric_limits<long>::min();


template <std::size_t R>
using dims_t = std::array<std::size_t, R>;

template <std::size_t R>
constexpr dims_t<R> row_major_strides(const dims_t<R>& dims) {
  dims_t<R> strides{};
  std::size_t stride = 1;
  for (std::size_t i = R; i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

template <std::size_t... Dims>
struct shape {
  static constexpr std::size_t rank = sizeof...(Dims);
  static constexpr dims_t<rank> dims{Dims...};
  static constexpr std::size_t size = (std::size_t{1} * ... * Dims);
  static constexpr dims_t<rank> strides = row_major_strides<rank>(dims);
  static constexpr std::size_t dim(std::size_t axis) { return dims[axis]; }
};

template <class T>
inline constexpr bool is_shape_v = false;
template <std::size_t... Dims>
inline constexpr bool is_shape_v<shape<Dims...>> = true;
template <class T>
concept Shape = is_shape_v<T>;

namespace detail {
template <auto Dims, class Seq = std::make_index_sequence<Dims.size()>>
struct shape_from_impl;
template <auto Dims, std::size_t... I>
struct shape_from_impl<Dims, std::index_sequence<I...>> {
  using type = shape<Dims[I]...>;
};
}  // namespace detail

// The shape type whose dims are the constexpr array Dims.
template <auto Dims>
using shape_from = typename detail::shape_from_impl<Dims>::type;

// A dtype and a shape: the static type of a value, shared by concrete and symbolic tensors.
template <class T, class S>
struct tensor_type {
  using value_type = T;
  using shape_type = S;
};

// ---- rendering for messages ------------------------------------------------------------------

template <std::size_t R>
constexpr message_builder& append_dims(message_builder& m, const dims_t<R>& dims) {
  m << '[';
  for (std::size_t i = 0; i < R; ++i) {
    if (i) m << ',';
    m << static_cast<std::uint64_t>(dims[i]);
  }
  return m << ']';
}

// "[2,3]" for a shape, "f32[2,3]" for a tensor_type (or anything with value_type and shape_type).
template <class X>
constexpr message_builder& append_type(message_builder& m) {
  if constexpr (Shape<X>) {
    return append_dims<X::rank>(m, X::dims);
  } else {
    m << dtype_name<typename X::value_type>();
    return append_dims<X::shape_type::rank>(m, X::shape_type::dims);
  }
}

template <class X>
constexpr message_builder describe() {
  message_builder m;
  append_type<X>(m);
  return m;
}

template <class X>
constexpr auto shape_of_impl() {
  if constexpr (Shape<X>) {
    return std::type_identity<X>{};
  } else {
    return std::type_identity<typename X::shape_type>{};
  }
}
template <class X>
using shape_of = typename decltype(shape_of_impl<X>())::type;

// ---- axes --------------------------------------------------------------------------------------

// Axis in [-rank, rank) (or [-(rank+1), rank] when inserting) to a position; raises on a bad axis.
template <fixed_string Op, class X, long Axis, bool Inserting = false>
consteval std::size_t normalize_axis() {
  constexpr long rank = static_cast<long>(shape_of<X>::rank) + (Inserting ? 1 : 0);
  if constexpr (Axis < -rank || Axis >= rank) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": axis " << static_cast<std::int64_t>(Axis) << " is out of range for ";
      append_type<X>(m) << " (rank " << static_cast<std::uint64_t>(shape_of<X>::rank) << "; valid axes are "
                        << static_cast<std::int64_t>(-rank) << " to " << static_cast<std::int64_t>(rank - 1)
                        << (Inserting ? " for a new axis" : "") << "); fix: count axes from 0, or from -1 for the last";
      return m;
    }>()>();
    return 0;
  } else {
    return static_cast<std::size_t>(Axis < 0 ? Axis + rank : Axis);
  }
}

template <std::size_t R>
constexpr dims_t<R - 1> drop_dim(const dims_t<R>& d, std::size_t axis) {
  dims_t<R - 1> out{};
  for (std::size_t i = 0, j = 0; i < R; ++i)
    if (i != axis) out[j++] = d[i];
  return out;
}

template <std::size_t R>
constexpr dims_t<R + 1> insert_dim(const dims_t<R>& d, std::size_t axis, std::size_t size) {
  dims_t<R + 1> out{};
  for (std::size_t i = 0, j = 0; i <= R; ++i) out[i] = i == axis ? size : d[j++];
  return out;
}

namespace detail {
template <fixed_string Op, class S, long Axis>
consteval auto drop_axis_impl() {
  constexpr std::size_t a = normalize_axis<Op, S, Axis>();
  if constexpr (a < shape_of<S>::rank) {
    return std::type_identity<shape_from<drop_dim<shape_of<S>::rank>(shape_of<S>::dims, a)>>{};
  } else {
    return std::type_identity<shape_of<S>>{};
  }
}
template <fixed_string Op, class S, long Axis, std::size_t Size>
consteval auto insert_axis_impl() {
  constexpr std::size_t a = normalize_axis<Op, S, Axis, true>();
  return std::type_identity<shape_from<insert_dim<shape_of<S>::rank>(shape_of<S>::dims, a, Size)>>{};
}
}  // namespace detail

// S without axis Axis (a reduction's result shape).
template <class S, long Axis, fixed_string Op = "tessel::drop_axis">
using drop_axis_t = typename decltype(detail::drop_axis_impl<Op, S, Axis>())::type;

// S with a new axis of size Size at position Axis (vmap's out_axes, expand_dims).
template <class S, long Axis, std::size_t Size = 1, fixed_string Op = "tessel::insert_axis">
using insert_axis_t = typename decltype(detail::insert_axis_impl<Op, S, Axis, Size>())::type;

// ---- broadcasting ------------------------------------------------------------------------------

// NumPy broadcasting of two dims arrays; ok is false (and failed_axis names the result axis) on a clash.
template <std::size_t RA, std::size_t RB>
struct broadcast_result {
  static constexpr std::size_t rank = RA > RB ? RA : RB;
  dims_t<rank> dims{};
  bool ok = true;
  std::size_t failed_axis = 0, lhs_dim = 0, rhs_dim = 0;
};

template <std::size_t RA, std::size_t RB>
constexpr broadcast_result<RA, RB> broadcast_dims(const dims_t<RA>& a, const dims_t<RB>& b) {
  broadcast_result<RA, RB> r;
  constexpr std::size_t rank = broadcast_result<RA, RB>::rank;
  for (std::size_t i = 0; i < rank; ++i) {
    const std::size_t da = i + RA >= rank ? a[i + RA - rank] : 1;
    const std::size_t db = i + RB >= rank ? b[i + RB - rank] : 1;
    if (da == db || db == 1) {
      r.dims[i] = da;
    } else if (da == 1) {
      r.dims[i] = db;
    } else if (r.ok) {
      r.ok = false;
      r.failed_axis = i;
      r.lhs_dim = da;
      r.rhs_dim = db;
    }
  }
  return r;
}

// True, or a compile error naming both operands: A and B broadcast together (NumPy's rule).
template <fixed_string Op, class A, class B>
consteval bool broadcasts() {
  using sa = shape_of<A>;
  using sb = shape_of<B>;
  constexpr auto r = broadcast_dims<sa::rank, sb::rank>(sa::dims, sb::dims);
  if constexpr (!r.ok) {
    raise<fit<[] {
      constexpr auto r = broadcast_dims<sa::rank, sb::rank>(sa::dims, sb::dims);
      message_builder m;
      m << Op << ": shapes ";
      append_type<A>(m) << " and ";
      append_type<B>(m) << " do not broadcast: result axis " << static_cast<std::uint64_t>(r.failed_axis)
                        << " would need " << static_cast<std::uint64_t>(r.lhs_dim) << " and "
                        << static_cast<std::uint64_t>(r.rhs_dim)
                        << " (dims are aligned from the right; each pair must be equal or one of them 1); fix: "
                           "reshape or broadcast_in_dim one operand";
      return m;
    }>()>();
  }
  return r.ok;
}

namespace detail {
template <fixed_string Op, class A, class B>
consteval auto broadcast_impl() {
  using sa = shape_of<A>;
  using sb = shape_of<B>;
  constexpr auto r = broadcast_dims<sa::rank, sb::rank>(sa::dims, sb::dims);
  if constexpr (broadcasts<Op, A, B>()) {
    return std::type_identity<shape_from<r.dims>>{};
  } else {
    return std::type_identity<sa>{};
  }
}
}  // namespace detail

// The broadcast shape of A and B (shapes or tensor types), or a compile error naming both (jnp.broadcast_shapes).
template <class A, class B, fixed_string Op = "tessel::broadcast_shapes">
using broadcast_shapes_t = typename decltype(detail::broadcast_impl<Op, A, B>())::type;

namespace detail {
template <fixed_string Op, class From, class To>
consteval bool broadcast_to_check() {
  using sf = shape_of<From>;
  using st = shape_of<To>;
  constexpr auto r = broadcast_dims<sf::rank, st::rank>(sf::dims, st::dims);
  constexpr bool ok = r.ok && sf::rank <= st::rank && r.dims == st::dims;
  if constexpr (!ok) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": cannot broadcast ";
      append_type<From>(m) << " to ";
      append_type<To>(m) << " (every dim of the source, aligned from the right, must equal the target's or be 1, "
                            "and the source's rank must not exceed the target's); fix: reshape the source first";
      return m;
    }>()>();
  }
  return ok;
}
}  // namespace detail

// True, or a compile error: From can be broadcast to To (jnp.broadcast_to).
template <class From, class To, fixed_string Op = "tessel::broadcast_to">
inline constexpr bool broadcastable_to_v = detail::broadcast_to_check<Op, From, To>();

// ---- permute, concatenate, reshape -------------------------------------------------------------

namespace detail {
template <fixed_string Op, class S, std::size_t... Perm>
consteval auto permute_impl() {
  using s = shape_of<S>;
  constexpr std::array<std::size_t, sizeof...(Perm)> perm{Perm...};
  constexpr bool valid = [&] {
    if (perm.size() != s::rank) return false;
    std::array<bool, sizeof...(Perm)> seen{};
    for (std::size_t p : perm) {
      if (p >= s::rank || seen[p]) return false;
      seen[p] = true;
    }
    return true;
  }();
  if constexpr (!valid) {
    raise<fit<[] {
      constexpr std::array<std::size_t, sizeof...(Perm)> perm{Perm...};
      message_builder m;
      m << Op << ": (";
      bool first = true;
      for (std::size_t p : perm) {
        if (!first) m << ',';
        m << static_cast<std::uint64_t>(p);
        first = false;
      }
      m << ") is not a permutation of the " << static_cast<std::uint64_t>(s::rank) << " axes of ";
      append_type<S>(m) << "; fix: list every axis from 0 to " << static_cast<std::int64_t>(s::rank) - 1
                        << " exactly once";
      return m;
    }>()>();
    return std::type_identity<s>{};
  } else {
    constexpr dims_t<s::rank> out = [] {
      dims_t<s::rank> d{};
      for (std::size_t i = 0; i < s::rank; ++i) d[i] = s::dims[std::array<std::size_t, s::rank>{Perm...}[i]];
      return d;
    }();
    return std::type_identity<shape_from<out>>{};
  }
}

template <fixed_string Op, long Axis, class A, class B>
consteval auto concat_impl() {
  using sa = shape_of<A>;
  using sb = shape_of<B>;
  constexpr std::size_t axis = normalize_axis<Op, A, Axis>();
  constexpr bool ok = sa::rank == sb::rank && [] {
    for (std::size_t i = 0; i < sa::rank; ++i)
      if (i != axis && sa::dims[i] != sb::dims[i]) return false;
    return true;
  }();
  if constexpr (!ok) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": cannot concatenate ";
      append_type<A>(m) << " and ";
      append_type<B>(m) << " along axis " << static_cast<std::int64_t>(Axis)
                        << " (ranks must be equal and every other dim must match); fix: reshape or pad the "
                           "operands so that only the concatenated axis differs";
      return m;
    }>()>();
    return std::type_identity<sa>{};
  } else if constexpr (axis >= sa::rank) {
    return std::type_identity<sa>{};
  } else {
    constexpr dims_t<sa::rank> out = [] {
      dims_t<sa::rank> d = sa::dims;
      d[axis] += sb::dims[axis];
      return d;
    }();
    return std::type_identity<shape_from<out>>{};
  }
}

template <fixed_string Op, class From, class To>
consteval bool reshape_check() {
  constexpr bool ok = shape_of<From>::size == shape_of<To>::size;
  if constexpr (!ok) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": cannot reshape ";
      append_type<From>(m) << " (" << static_cast<std::uint64_t>(shape_of<From>::size) << " elements) to ";
      append_type<To>(m) << " (" << static_cast<std::uint64_t>(shape_of<To>::size)
                         << " elements); the number of elements must stay the same; fix: choose dims whose "
                            "product is "
                         << static_cast<std::uint64_t>(shape_of<From>::size);
      return m;
    }>()>();
  }
  return ok;
}
}  // namespace detail

// S with its axes reordered: result axis i is S's axis Perm[i] (jnp.transpose).
template <class S, std::size_t... Perm>
using permute_t = typename decltype(detail::permute_impl<"tessel::transpose", S, Perm...>())::type;

// A and B joined along Axis (jnp.concatenate).
template <long Axis, class A, class B, fixed_string Op = "tessel::concatenate">
using concat_t = typename decltype(detail::concat_impl<Op, Axis, A, B>())::type;

// True, or a compile error: From and To hold the same number of elements.
template <class From, class To, fixed_string Op = "tessel::reshape">
inline constexpr bool reshapable_v = detail::reshape_check<Op, From, To>();

// ---- dtypes of two operands ---------------------------------------------------------------------

// True, or a compile error naming both operands: binary operations never promote between tensors.
template <fixed_string Op, class A, class B>
consteval bool require_same_dtype() {
  constexpr bool ok = std::is_same_v<typename A::value_type, typename B::value_type>;
  if constexpr (!ok) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": dtypes differ: ";
      append_type<A>(m) << " and ";
      append_type<B>(m) << " (tessel never promotes between tensors implicitly); fix: "
                           "convert_element_type one operand, e.g. to "
                        << dtype_name<promote_t<typename A::value_type, typename B::value_type>>();
      return m;
    }>()>();
  }
  return ok;
}

}  // namespace tessel
