// Per-target part of tessel/kernels/hwy_math.hpp: the transcendental functions of the elementwise
// primitives over arrays of floats (the kernel table at the end lists them),
// compiled by Highway once per target through the aggregator's HWY_TARGET_INCLUDE pass
// (tessel/kernels/hwy_gemm-inl.hpp includes this file, in kernels/implementation.hpp), each time into its own namespace
// tessel::kernels::hwy_math_detail::N_<TARGET>. Include tessel/kernels/hwy_math.hpp, not this file.
//
// The vector math is hwy/contrib/math (Highway 1.0.3), whose functions are accurate only inside stated
// ranges and do not handle NaN or infinities. Each op therefore names a "fast" range; a vector whose
// lanes all lie in it is computed by Highway, and lanes outside it (NaN, infinities, overflow, huge
// arguments of sin and cos) are computed by the scalar function the caller passes, so that special
// values are exactly those of the scalar path. Tails shorter than a vector use the scalar function too.

// Target-independent part, once per translation unit.
#ifndef TESSEL_KERNELS_HWY_MATH_INL_COMMON
#define TESSEL_KERNELS_HWY_MATH_INL_COMMON

#include <array>
#include <cmath>  // HUGE_VALF
#include <cstddef>
#include <span>
#include <string_view>

#ifndef HWY_WANT_AVX3_DL  // see implementation.hpp
#define HWY_WANT_AVX3_DL 1
#endif
#include <hwy/highway.h>

#include "tessel/kernels/hwy_math.hpp"

#endif  // TESSEL_KERNELS_HWY_MATH_INL_COMMON

// Per-target part: toggled once per pass of foreach_target.h.
#if defined(TESSEL_KERNELS_HWY_MATH_INL_TOGGLE) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSEL_KERNELS_HWY_MATH_INL_TOGGLE
#undef TESSEL_KERNELS_HWY_MATH_INL_TOGGLE
#else
#define TESSEL_KERNELS_HWY_MATH_INL_TOGGLE
#endif

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

// Compile time: two targets reuse an older one's kernels instead of compiling their own (each
// target's kernels cost about 0.25 s per translation unit): AVX3_DL runs AVX3's (the DL extensions
// add nothing these functions use) and SSE4 runs SSSE3's (same width; CPUs with SSE4 but no AVX2 are
// rare), whenever that target is compiled too. With -march=native only one target is compiled.
#undef TESSEL_HWY_MATH_FORWARD
#if HWY_TARGET == HWY_AVX3_DL && (HWY_TARGETS & HWY_AVX3)
#define TESSEL_HWY_MATH_FORWARD N_AVX3
#elif HWY_TARGET == HWY_SSE4 && (HWY_TARGETS & HWY_SSSE3)
#define TESSEL_HWY_MATH_FORWARD N_SSSE3
#endif

#ifdef TESSEL_HWY_MATH_FORWARD
namespace tessel::kernels::hwy_math_detail::TESSEL_HWY_MATH_FORWARD {
inline void map_target(math_fn f, const float* x, float* y, std::size_t n, scalar_math_fn scalar);
inline std::span<const std::string_view> names_target();
}  // namespace tessel::kernels::hwy_math_detail::TESSEL_HWY_MATH_FORWARD
#endif

HWY_BEFORE_NAMESPACE();
namespace tessel::kernels::hwy_math_detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline const char* target_name() { return hwy::TargetName(HWY_TARGET); }
inline std::size_t float_lanes() { return hn::Lanes(hn::ScalableTag<float>()); }

#ifdef TESSEL_HWY_MATH_FORWARD
inline void map_target(math_fn f, const float* x, float* y, std::size_t n, scalar_math_fn scalar) {
  TESSEL_HWY_MATH_FORWARD::map_target(f, x, y, n, scalar);
}
inline std::span<const std::string_view> names_target() { return TESSEL_HWY_MATH_FORWARD::names_target(); }
#else

// An op: its name (its primitive's), eval (Highway's vector function, valid where fast holds), fast
// (vector and scalar forms of the same predicate, false for NaN), or `always` where eval is valid
// everywhere.
//
// ln(FLT_MAX) = 88.7228: above it e^x overflows; hwy::Exp is valid up to 104 but the scalar path
// rounds the boundary correctly, so the fast range stops just below it.
constexpr float exp_fast_max = 88.72f;

struct exp_op {
  static constexpr std::string_view name = "exp";
  static constexpr bool always = false;
  template <class D, class V>
  static V eval(D d, V x) {
    return hn::Exp(d, x);  // x < -104 (and -inf) give +0, as e^x rounds to there
  }
  template <class D, class V>
  static auto fast(D d, V x) {
    return hn::Le(x, hn::Set(d, exp_fast_max));
  }
  static bool fast(float x) { return x <= exp_fast_max; }
};

// f(x) where x is not zero, and x itself where it is: keeps the sign of zero for odd functions whose
// Highway form loses it (expm1(-0) and sin(-0) would be +0).
template <class D, class V>
V keep_zero(D d, V x, V fx) {
  return hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, fx);
}

struct expm1_op {
  static constexpr std::string_view name = "expm1";
  static constexpr bool always = false;
  template <class D, class V>
  static V eval(D d, V x) {
    return keep_zero(d, x, hn::Expm1(d, x));  // x < -104 (and -inf) give -1
  }
  template <class D, class V>
  static auto fast(D d, V x) {
    return hn::Le(x, hn::Set(d, exp_fast_max));
  }
  static bool fast(float x) { return x <= exp_fast_max; }
};

// Positive and finite (subnormals included: hwy::Log scales them up).
struct log_op {
  static constexpr std::string_view name = "log";
  static constexpr bool always = false;
  template <class D, class V>
  static V eval(D d, V x) {
    return hn::Log(d, x);
  }
  template <class D, class V>
  static auto fast(D d, V x) {
    return hn::And(hn::Gt(x, hn::Zero(d)), hn::Lt(x, hn::Set(d, HUGE_VALF)));
  }
  static bool fast(float x) { return x > 0.0f && x < HUGE_VALF; }
};

// (-1, inf): hwy::Log1p computes log(1 + x) * x / ((1 + x) - 1), exact at the pole (x = +-0 give x).
struct log1p_op {
  static constexpr std::string_view name = "log1p";
  static constexpr bool always = false;
  template <class D, class V>
  static V eval(D d, V x) {
    return hn::Log1p(d, x);
  }
  template <class D, class V>
  static auto fast(D d, V x) {
    return hn::And(hn::Gt(x, hn::Set(d, -1.0f)), hn::Lt(x, hn::Set(d, HUGE_VALF)));
  }
  static bool fast(float x) { return x > -1.0f && x < HUGE_VALF; }
};

// Everything but NaN: hwy::Tanh returns +-1 past |x| = 18.7 (infinities included) and keeps -0.
struct tanh_op {
  static constexpr std::string_view name = "tanh";
  static constexpr bool always = false;
  template <class D, class V>
  static V eval(D d, V x) {
    return hn::Tanh(d, x);
  }
  template <class D, class V>
  static auto fast(D /*d*/, V x) {
    return hn::Eq(x, x);
  }
  static bool fast(float x) { return x == x; }
};

// 1 / (1 + e^-x) with e^-x finite: |x| <= 88; beyond, the scalar path saturates to 0 or 1.
struct logistic_op {
  static constexpr std::string_view name = "logistic";
  static constexpr bool always = false;
  template <class D, class V>
  static V eval(D d, V x) {
    const V one = hn::Set(d, 1.0f);
    return hn::Div(one, hn::Add(one, hn::Exp(d, hn::Neg(x))));
  }
  template <class D, class V>
  static auto fast(D d, V x) {
    return hn::Le(hn::Abs(x), hn::Set(d, 88.0f));
  }
  static bool fast(float x) { return x <= 88.0f && x >= -88.0f; }
};

// hwy::Sin and hwy::Cos reduce the argument with a four-part pi, valid for |x| <= 39000 (Highway's
// statement); larger arguments, infinities and NaN take the scalar path (libm's exact reduction).
constexpr float trig_fast_max = 39000.0f;

struct sin_op {
  static constexpr std::string_view name = "sin";
  static constexpr bool always = false;
  template <class D, class V>
  static V eval(D d, V x) {
    return keep_zero(d, x, hn::Sin(d, x));
  }
  template <class D, class V>
  static auto fast(D d, V x) {
    return hn::Le(hn::Abs(x), hn::Set(d, trig_fast_max));
  }
  static bool fast(float x) { return x <= trig_fast_max && x >= -trig_fast_max; }
};

struct cos_op {
  static constexpr std::string_view name = "cos";
  static constexpr bool always = false;
  template <class D, class V>
  static V eval(D d, V x) {
    return hn::Cos(d, x);
  }
  template <class D, class V>
  static auto fast(D d, V x) {
    return hn::Le(hn::Abs(x), hn::Set(d, trig_fast_max));
  }
  static bool fast(float x) { return x <= trig_fast_max && x >= -trig_fast_max; }
};

// IEEE square root (correctly rounded, every input), and 1 / sqrt(x) as a division by it.
struct sqrt_op {
  static constexpr std::string_view name = "sqrt";
  static constexpr bool always = true;
  template <class D, class V>
  static V eval(D /*d*/, V x) {
    return hn::Sqrt(x);
  }
  static bool fast(float) { return true; }
};

struct rsqrt_op {
  static constexpr std::string_view name = "rsqrt";
  static constexpr bool always = true;
  template <class D, class V>
  static V eval(D d, V x) {
    return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(x));
  }
  static bool fast(float) { return true; }
};

// y[i] = f(x[i]) for i < n; x and y may be the same array.
template <class Op>
void map(const float* x, float* y, std::size_t n, scalar_math_fn scalar) {
  const hn::ScalableTag<float> d;
  const std::size_t lanes = hn::Lanes(d);
  const std::size_t body = n - n % lanes;
  for (std::size_t i = 0; i < body; i += lanes) {
    const auto v = hn::LoadU(d, x + i);
    const auto r = Op::eval(d, v);
    if constexpr (!Op::always) {
      if (HWY_UNLIKELY(!hn::AllTrue(d, Op::fast(d, v)))) {
        HWY_ALIGN float tmp[HWY_MAX_BYTES / sizeof(float)];
        hn::Store(r, d, tmp);
        for (std::size_t j = 0; j < lanes; ++j)
          if (!Op::fast(x[i + j])) tmp[j] = scalar(x[i + j]);
        hn::StoreU(hn::Load(d, tmp), d, y + i);
        continue;
      }
    }
    hn::StoreU(r, d, y + i);
  }
  for (std::size_t i = body; i < n; ++i) y[i] = scalar(x[i]);
}

// The kernel table: every function with a Highway kernel, one entry each (hwy_math.hpp's math_fn is
// a place in it).
template <class... Op>
struct kernel_table {
  static constexpr std::array<std::string_view, sizeof...(Op)> names{Op::name...};
  static constexpr std::array<void (*)(const float*, float*, std::size_t, scalar_math_fn), sizeof...(Op)> maps{&map<Op>...};
};
using kernels_of_this_target = kernel_table<exp_op, expm1_op, log_op, log1p_op, tanh_op, logistic_op, sin_op, cos_op, sqrt_op, rsqrt_op>;

// The exported entry points.
inline void map_target(math_fn f, const float* x, float* y, std::size_t n, scalar_math_fn scalar) {
  kernels_of_this_target::maps[f.entry](x, y, n, scalar);
}
inline std::span<const std::string_view> names_target() { return kernels_of_this_target::names; }

#endif  // TESSEL_HWY_MATH_FORWARD

}  // namespace tessel::kernels::hwy_math_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSEL_KERNELS_HWY_MATH_INL_TOGGLE
