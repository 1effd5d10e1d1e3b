#pragma once
// Transcendental functions over float arrays with Highway's run-time dispatch, and the choice between
// the three paths every transcendental elementwise primitive has (prim/family/elementwise.hpp):
//
//   scalar  the rule on one float at a time (libm: std::exp, std::log, ...); also every tail
//   xsimd   the rule on xsimd batches: the instruction set this translation unit was compiled for
//   hwy     hwy_math below: hwy/contrib/math compiled for every x86 target, the best one for the
//           running CPU picked at run time (so a plain x86-64 build still runs AVX-512 where it exists)
//
// Each primitive states its default path, measured where xsimd and Highway have the same vector width
// (bench/elementwise.cpp, bench/README.md): Highway for log, sin and cos (1.06-1.38x faster), xsimd for
// the others (faster, or as fast and more accurate: log1p, expm1, sqrt, rsqrt). Where the build's
// xsimd is narrower than the CPU's best Highway target (a plain x86-64 build, 4 floats, on an AVX-512
// CPU, 16), every function with a Highway kernel defaults to Highway (2.7-5.6x faster here). Each
// primitive also states the maximum error of each path in ULP (tests/backend/ulp_test.cpp,
// hwy_math_test.cpp). The default can be overridden process-wide, for tests and comparisons:
// force_math_path(math_path::scalar), or the environment variable TESSEL_MATH_PATH=scalar|xsimd|hwy
// read at the first elementwise evaluation.
//
//   float x[100], y[100];
//   hwy_math(*hwy_math_function("exp"), x, y, 100, [](float v) { return std::exp(v); });
//
// Lanes outside a function's fast range (NaN, infinities, overflow, |x| > 39000 for sin and cos) and
// tails shorter than a vector are computed by the scalar function passed in, so special values are
// exactly the scalar path's (hwy_math-inl.hpp lists the ranges).
//
// The functions are compiled once in the tessel library (kernels/implementation.hpp, with the per-target
// code in hwy_math-inl.hpp); this header only declares them.

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

namespace tessel::kernels {

// A function with a Highway kernel: an entry of the kernel table (hwy_math-inl.hpp), which names each
// entry as its primitive is named, so a primitive finds its kernel by its own name and a new kernel is
// one entry there.
struct math_fn {
  unsigned char entry;  // its place in the table
};

// The function named `name` ("exp", "expm1", ...), or nullopt where the table has none.
std::optional<math_fn> hwy_math_function(std::string_view name);

// The names of the table's entries, in its order.
std::span<const std::string_view> hwy_math_functions();

// The scalar path of one function: used for out-of-range lanes and tails.
using scalar_math_fn = float (*)(float);

// y[i] = f(x[i]) for i < n with the best Highway target of this CPU; `scalar` computes f on one float
// (tails and lanes outside f's fast range). x and y may be the same array.
void hwy_math(math_fn f, const float* x, float* y, std::size_t n, scalar_math_fn scalar);

// The Highway target hwy_math runs on this CPU, e.g. "AVX3_DL".
const char* hwy_math_target();

// Floats per vector of that target (16 for AVX-512).
std::size_t hwy_math_lanes();

enum class math_path : unsigned char {
  automatic,  // each primitive's measured default (see prim/family/elementwise.hpp, map_unary_f32)
  scalar,
  xsimd,
  hwy,  // functions without a Highway kernel (erf, erf_inv) use xsimd, then scalar
};

namespace hwy_math_detail {
inline math_path path_from_environment() {
  const char* v = std::getenv("TESSEL_MATH_PATH");
  if (v == nullptr) return math_path::automatic;
  if (std::strcmp(v, "scalar") == 0) return math_path::scalar;
  if (std::strcmp(v, "xsimd") == 0) return math_path::xsimd;
  if (std::strcmp(v, "hwy") == 0) return math_path::hwy;
  return math_path::automatic;
}
inline std::atomic<math_path>& forced_path() {
  static std::atomic<math_path> p{path_from_environment()};
  return p;
}
}  // namespace hwy_math_detail

// Makes every unary elementwise primitive on f32 tiles use `p` (automatic: each one's default).
// Process-wide; returns the previous setting.
inline math_path force_math_path(math_path p) { return hwy_math_detail::forced_path().exchange(p); }

// The path force_math_path (or TESSEL_MATH_PATH) imposes: automatic where none is.
inline math_path forced_math_path() { return hwy_math_detail::forced_path().load(std::memory_order_relaxed); }

}  // namespace tessel::kernels
