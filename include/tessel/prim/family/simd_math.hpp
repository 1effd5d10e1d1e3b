#pragma once
// Small helpers so that one rule body serves float scalars and xsimd batches alike.

#include <cmath>

#include <xsimd/xsimd.hpp>

namespace tessel::prim::simd {

inline float select(bool c, float a, float b) { return c ? a : b; }
template <class A>
xsimd::batch<float, A> select(const xsimd::batch_bool<float, A>& c, const xsimd::batch<float, A>& a,
                              const xsimd::batch<float, A>& b) {
  return xsimd::select(c, a, b);
}

inline bool is_nan(float x) { return x != x; }
template <class A>
xsimd::batch_bool<float, A> is_nan(const xsimd::batch<float, A>& x) {
  return x != x;
}

template <class V>
V splat(float v) {
  return V(v);
}

}  // namespace tessel::prim::simd
