#pragma once
// The batch overloads that prim/family/simd_math.hpp declares: xsimd's functions. Included only where the
// tile functions are compiled (prim/family/elementwise-inl.hpp).

#include <xsimd/xsimd.hpp>

#include "tessel/prim/family/simd_math.hpp"

namespace tessel::prim::simd {

template <Batch V> V exp(const V& x) { return xsimd::exp(x); }
template <Batch V> V expm1(const V& x) { return xsimd::expm1(x); }
template <Batch V> V log(const V& x) { return xsimd::log(x); }
template <Batch V> V log1p(const V& x) { return xsimd::log1p(x); }
template <Batch V> V sqrt(const V& x) { return xsimd::sqrt(x); }
template <Batch V> V cbrt(const V& x) { return xsimd::cbrt(x); }
template <Batch V> V erf(const V& x) { return xsimd::erf(x); }
template <Batch V> V sin(const V& x) { return xsimd::sin(x); }
template <Batch V> V cos(const V& x) { return xsimd::cos(x); }
template <Batch V> V tanh(const V& x) { return xsimd::tanh(x); }
template <Batch V> [[gnu::always_inline]] inline V floor(const V& x) { return xsimd::floor(x); }
template <Batch V> [[gnu::always_inline]] inline V abs(const V& x) { return xsimd::abs(x); }
template <class C, Batch V> [[gnu::always_inline]] inline V select(const C& c, const V& a, const V& b) { return xsimd::select(c, a, b); }

}  // namespace tessel::prim::simd
