#pragma once
// The math that elementwise rules call, so that one rule body serves float scalars and SIMD batches alike.
//
// A rule calls a math function f that the C library and xsimd both have unqualified, after
// `using std::f;` (prim/sin.hpp): a float gets std::f, and a batch xsimd::f, found by argument-dependent
// lookup where the tile functions are compiled (prim/family/elementwise-inl.hpp, which includes xsimd).
// So a new rule needs nothing declared here, and the rules' headers, and every translation unit that
// includes a primitive, never parse xsimd.
//
// Declared here: what tessel writes itself or must have inlined. Floats get the C library's functions
// (as xsimd's scalar overloads are); batches are declared here and defined in simd_math-inl.hpp, which
// only the tile functions' translation unit includes.

#include <cmath>

namespace tessel::prim::simd {

// A SIMD batch (xsimd::batch<float, Arch>): what the tile loops pass a rule besides plain values.
template <class V>
concept Batch = requires { V::size; };

inline float exp(float x) { return std::exp(x); }
inline float floor(float x) { return std::floor(x); }
inline float abs(float x) { return std::fabs(x); }
inline float select(bool c, float a, float b) { return c ? a : b; }

template <Batch V> V exp(const V& x);
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
