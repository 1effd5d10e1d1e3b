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

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"

namespace tessel {

using float32 = float;
using int32 = std::int32_t;
using uint32 = std::uint32_t;

template <class T>
struct dtype_traits {
  static constexpr bool supported = false;
};

template <>
struct dtype_traits<float> {
  static constexpr bool supported = true;
  static constexpr fixed_string name = "f32";
  static constexpr bool is_floating = true;
  static constexpr int lattice_level = 3;
};
template <>
struct dtype_traits<bfloat16> {
  static constexpr bool supported = true;
  static constexpr fixed_string name = "bf16";
  static constexpr bool is_floating = true;
  static constexpr int lattice_level = 2;
};
template <>
struct dtype_traits<std::int32_t> {
  static constexpr bool supported = true;
  static constexpr fixed_string name = "s32";
  static constexpr bool is_floating = false;
  static constexpr int lattice_level = 1;
};
template <>
struct dtype_traits<std::uint32_t> {
  static constexpr bool supported = true;
  static constexpr fixed_string name = "u32";
  static constexpr bool is_floating = false;
  static constexpr int lattice_level = 1;
};
template <>
struct dtype_traits<bool> {
  static constexpr bool supported = true;
  static constexpr fixed_string name = "pred";
  static constexpr bool is_floating = false;
  static constexpr int lattice_level = 0;
};

template <class T>
concept DType = dtype_traits<std::remove_cv_t<T>>::supported;

template <class T>
concept FloatingDType = DType<T> && dtype_traits<T>::is_floating;

// The name of a C++ type as a message shows it: the dtype's name, or a description of what is wrong.
template <class T>
constexpr std::string_view dtype_name() {
  if constexpr (DType<T>) {
    return dtype_traits<T>::name.view();
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
