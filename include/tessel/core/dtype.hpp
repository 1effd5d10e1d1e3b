#pragma once
// The closed set of element types and their promotion rules.
//
// A dtype is the C++ element type itself: float (f32), tessel::bfloat16 (bf16), std::int32_t (s32),
// std::uint32_t (u32), bool (pred). Names follow XLA's HLO spelling, as JAX prints them.
//
// Promotion (JAX's lattice restricted to these types, with no 64-bit types): pred < s32, u32 < bf16 < f32;
// mixing s32 with u32 has no 32-bit answer and is an error. Operations never promote silently between
// tensors: a binary op on different dtypes is a compile error that names `convert_element_type`; scalars
// written in the program are weakly typed and take the tensor's dtype.

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"

namespace tessel {

using float32 = float;
using int32 = std::int32_t;
using uint32 = std::uint32_t;

// The dtypes as values, as the node table holds them (ir::node::dtype), in dtype_table's order.
enum class dtype_code : std::uint8_t { f32, bf16, s32, u32, pred };

// Everything about a dtype besides its C++ type, one row each: every name, size and rule of a dtype
// comes from here.
struct dtype_info {
  std::string_view name;   // XLA's spelling
  std::size_t bytes;       // in memory
  std::size_t tile_bytes;  // in a kernel's tile, the executor's working form: bf16 is computed as f32 there
  bool is_floating;
  int lattice_level;       // promotion: pred < s32, u32 < bf16 < f32
  std::string_view mlir;   // the element type in MLIR (StableHLO export): signless i32, unsigned ui32
  std::string_view comparison;  // StableHLO's compare_type for this dtype
};
inline constexpr std::array<dtype_info, 5> dtype_table{{
    {"f32", 4, 4, true, 3, "f32", "FLOAT"},
    {"bf16", 2, 4, true, 2, "bf16", "FLOAT"},
    {"s32", 4, 4, false, 1, "i32", "SIGNED"},
    {"u32", 4, 4, false, 1, "ui32", "UNSIGNED"},
    {"pred", 1, 1, false, 0, "i1", "UNSIGNED"},
}};
constexpr const dtype_info& info_of(dtype_code c) { return dtype_table[static_cast<std::size_t>(c)]; }

// The C++ type of each dtype: T's code, and the rest of its row.
template <class T>
struct dtype_traits {
  static constexpr bool supported = false;
};
template <dtype_code C>
struct dtype_row {
  static constexpr bool supported = true;
  static constexpr dtype_code code = C;
  static constexpr bool is_floating = info_of(C).is_floating;
  static constexpr int lattice_level = info_of(C).lattice_level;
};
template <>
struct dtype_traits<float> : dtype_row<dtype_code::f32> {};
template <>
struct dtype_traits<bfloat16> : dtype_row<dtype_code::bf16> {};
template <>
struct dtype_traits<std::int32_t> : dtype_row<dtype_code::s32> {};
template <>
struct dtype_traits<std::uint32_t> : dtype_row<dtype_code::u32> {};
template <>
struct dtype_traits<bool> : dtype_row<dtype_code::pred> {};

// The C++ type of a dtype's values in a kernel's tile (dtype_info::tile_bytes): bf16 is computed as float.
template <class T>
using tile_t = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

// The table's sizes are those of the C++ types.
template <class T>
consteval bool sizes_match_table() {
  return sizeof(T) == info_of(dtype_traits<T>::code).bytes && sizeof(tile_t<T>) == info_of(dtype_traits<T>::code).tile_bytes;
}
static_assert(sizes_match_table<float>() && sizes_match_table<bfloat16>() && sizes_match_table<std::int32_t>() &&
              sizes_match_table<std::uint32_t>() && sizes_match_table<bool>());

// Calls visit(T{}) with the C++ type of dtype `c` (a kernel written once for every element type).
template <class Visit>
constexpr decltype(auto) visit_dtype(dtype_code c, Visit&& visit) {
  switch (c) {
    case dtype_code::f32: return visit(float{});
    case dtype_code::bf16: return visit(bfloat16{});
    case dtype_code::s32: return visit(std::int32_t{});
    case dtype_code::u32: return visit(std::uint32_t{});
    case dtype_code::pred: break;
  }
  return visit(bool{});
}

template <class T>
concept DType = dtype_traits<std::remove_cv_t<T>>::supported;

template <class T>
concept FloatingDType = DType<T> && dtype_traits<T>::is_floating;

// The name of a C++ type as a message shows it: the dtype's name, or a description of what is wrong.
template <class T>
constexpr std::string_view dtype_name() {
  if constexpr (DType<T>) {
    return info_of(dtype_traits<T>::code).name;
  } else if constexpr (std::is_same_v<T, double>) {
    return "double (f64)";
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return "int64_t (s64)";
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    return "uint64_t (u64)";
  } else if constexpr (std::is_integral_v<T>) {
    return "an integer type of unsupported width";
  } else {
    return "a non-numeric type";
  }
}

// Raises, at the caller, a message if T is not one of tessel's dtypes.
template <class T, fixed_string Where>
constexpr void require_dtype() {
  if constexpr (!DType<T>) {
    raise<fit<[] {
      return message_builder{} << Where << ": element type " << dtype_name<T>()
                               << " is not a tessel dtype; supported: f32 (float), bf16 (tessel::bfloat16), "
                                  "s32 (std::int32_t), u32 (std::uint32_t), pred (bool); fix: store it as one of these";
    }>()>();
  }
}

namespace detail {
template <class A, class B>
consteval auto promote_impl() {
  if constexpr (std::is_same_v<A, B>) {
    return std::type_identity<A>{};
  } else if constexpr (dtype_traits<A>::lattice_level == dtype_traits<B>::lattice_level) {
    // s32 with u32: JAX answers s64, which tessel does not have.
    return std::type_identity<void>{};
  } else if constexpr (dtype_traits<A>::lattice_level > dtype_traits<B>::lattice_level) {
    return std::type_identity<A>{};
  } else {
    return std::type_identity<B>{};
  }
}
}  // namespace detail

// The dtype both operands convert to, as jnp.promote_types does (use it to choose an explicit cast).
template <class A, class B>
consteval auto promote_types() {
  require_dtype<A, "tessel::promote_types">();
  require_dtype<B, "tessel::promote_types">();
  if constexpr (DType<A> && DType<B>) {
    using result = typename decltype(detail::promote_impl<A, B>())::type;
    if constexpr (std::is_void_v<result>) {
      raise<fit<[] {
        return message_builder{} << "tessel::promote_types: " << dtype_name<A>() << " and " << dtype_name<B>()
                                 << " have no common 32-bit dtype (JAX would promote to s64); fix: "
                                    "convert_element_type one operand to the other's dtype or to f32";
      }>()>();
      return std::type_identity<A>{};
    } else {
      return std::type_identity<result>{};
    }
  } else {
    return std::type_identity<A>{};
  }
}

template <class A, class B>
using promote_t = typename decltype(promote_types<A, B>())::type;

}  // namespace tessel
