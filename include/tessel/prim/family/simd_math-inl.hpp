#pragma once
// The batch overloads that prim/family/simd_math.hpp declares: xsimd's functions. Included only where the
// tile functions are compiled (prim/family/elementwise-inl.hpp).

#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "tessel/prim/family/simd_math.hpp"

namespace tessel::prim::simd {

namespace detail {
#if XSIMD_WITH_AVX512F
// e^x on 16 floats: xsimd's own reduction and polynomial (the same values wherever xsimd's result is
// finite and normal), with its scaling by 2^k done by one vscalefps instead of an integer ldexp and two
// range selects: AMD EPYC (Zen 4), a 4 KiB tile in L1, 3.78 -> 2.74 ns per 16 lanes. vscalefps also
// overflows and underflows where e^x does: inf from ln(FLT_MAX) = 88.72 (xsimd: from 88.38) and
// subnormal results down to -103.97 (xsimd: 0 below -88.38). The clamps keep k finite for +-inf (e^-104
// rounds to 0); vminps and vmaxps return their second operand, x, when it is NaN.
// The zero-masked forms of min, max, vrndscaleps and vscalefps, with every lane kept: GCC 12 at -O1 warns
// that the unmasked ones read their undefined pass-through operand.
[[gnu::always_inline]] inline __m512 exp_avx512(__m512 x) {
  constexpr __mmask16 all = 0xFFFF;
  x = _mm512_maskz_max_ps(all, _mm512_set1_ps(-104.0f), _mm512_maskz_min_ps(all, _mm512_set1_ps(88.8f), x));
  using batch = xsimd::batch<float, xsimd::avx512f>;
  const __m512 k = _mm512_maskz_roundscale_ps(all, _mm512_mul_ps(x, xsimd::constants::invlog_2<batch>()),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, xsimd::constants::log_2hi<batch>(), x);
  r = _mm512_fnmadd_ps(k, xsimd::constants::log_2lo<batch>(), r);
  // xsimd's minimax polynomial for float exp: 1 + r + r^2 (c0 + c1 r + ... + c4 r^4).
  __m512 y = _mm512_set1_ps(0x1.6ef19ep-10f);  // 1.3997796e-03
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0x1.131b16p-7f));  // 8.3955629e-03
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0x1.5552aep-5f));  // 4.1665401e-02
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0x1.55534ap-3f));  // 1.6666277e-01
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.5f));
  y = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(all, y, k);
}
#endif
}  // namespace detail

template <Batch V>
V exp(const V& x) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_same_v<typename V::value_type, float> && V::size == 16) return V(detail::exp_avx512(x));
#endif
  return xsimd::exp(x);
}
template <Batch V>
[[gnu::always_inline]] inline V floor(const V& x) {
#if XSIMD_WITH_SSE4_1
  return xsimd::floor(x);  // roundps and its successors: -0 stays -0
#else
  // Without SSE4.1 (a plain x86-64 build) xsimd floors by converting to integers and back, which makes -0
  // +0; floor(-0) is -0 (IEEE, JAX, the scalar path), and -0 is the only argument whose floor is -0.
  return xsimd::select(x == V(0.0f), x, xsimd::floor(x));
#endif
}
template <Batch V> [[gnu::always_inline]] inline V abs(const V& x) { return xsimd::abs(x); }
template <class C, Batch V> [[gnu::always_inline]] inline V select(const C& c, const V& a, const V& b) { return xsimd::select(c, a, b); }

}  // namespace tessel::prim::simd
