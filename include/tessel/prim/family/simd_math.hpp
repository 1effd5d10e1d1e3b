#pragma once
// The math that elementwise rules call, so that one rule body serves float scalars and SIMD batches alike.
// Floats get the C library's functions here (as xsimd's scalar overloads are). Batches get xsimd's, but
// only where a batch is used: this header declares them, and simd_math-inl.hpp, which only the tile
// functions' translation unit includes (prim/family/elementwise-inl.hpp), defines them. So the rules'
// headers, and every translation unit that includes a primitive, never parse xsimd.

#include <cmath>

namespace tessel::prim::simd {

// A SIMD batch (xsimd::batch<float, Arch>): what the tile loops pass a rule besides plain values.
template <class V>
concept Batch = requires { V::size; };

inline float exp(float x) { return std::exp(x); }
inline float expm1(float x) { return std::expm1(x); }
inline float log(float x) { return std::log(x); }
inline float log1p(float x) { return std::log1p(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float cbrt(float x) { return std::cbrt(x); }
inline float erf(float x) { return std::erf(x); }
inline float sin(float x) { return std::sin(x); }
inline float cos(float x) { return std::cos(x); }
inline float tanh(float x) { return std::tanh(x); }
inline float floor(float x) { return std::floor(x); }
inline float abs(float x) { return std::fabs(x); }
inline float select(bool c, float a, float b) { return c ? a : b; }

template <Batch V> V exp(const V& x);
template <Batch V> V expm1(const V& x);
template <Batch V> V log(const V& x);
template <Batch V> V log1p(const V& x);
template <Batch V> V sqrt(const V& x);
template <Batch V> V cbrt(const V& x);
template <Batch V> V erf(const V& x);
template <Batch V> V sin(const V& x);
template <Batch V> V cos(const V& x);
template <Batch V> V tanh(const V& x);
template <Batch V> [[gnu::always_inline]] inline V floor(const V& x);
template <Batch V> [[gnu::always_inline]] inline V abs(const V& x);
template <class C, Batch V> [[gnu::always_inline]] inline V select(const C& c, const V& a, const V& b);

// NaN is the one value that is not equal to itself. Written as !(x == x), not x != x: xsimd 8's != on
// AVX and AVX-512 is an ordered compare (_CMP_NEQ_OQ), false in NaN lanes, which let max and min drop
// a NaN that arrived as their first operand. Always inlined (as select): g++ called it out of line from
// reduce_max's unrolled loop, spilling every partial around each call (AMD EPYC: a third of a softmax).
template <class V>
[[gnu::always_inline]] inline auto is_nan(const V& x) {
  return !(x == x);
}

template <class V>
V splat(float v) {
  return V(v);
}

}  // namespace tessel::prim::simd
