// The Highway path of the transcendental primitives (backend/hwy_math.hpp) on every Highway target
// compiled here: each function within its stated Highway bound over its range, special values (NaN,
// infinities, signed zeros, subnormals, huge arguments, the edges of each fast range) exactly as the
// scalar path gives them, in vector bodies and tails alike, in place too; and the executor evaluating
// jit programs with whichever path is forced (force_math_path, TESSEL_MATH_PATH).

// Compile every target Highway can attain (not only those better than -march=native's baseline) so
// that each one's kernels are tested on this CPU.
#define HWY_COMPILE_ALL_ATTAINABLE
#define HWY_WANT_AVX3_DL 1  // as the tessel library is built (CMakeLists.txt)
#include "tessel/kernels/hwy_math.hpp"

#include <hwy/targets.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "math_cases.hpp"
#include "tessel/jit.hpp"

namespace {
namespace tm = tessel::testing::math;
using namespace tessel::kernels;

// Runs body once per Highway target this CPU supports among those compiled, then restores dispatch.
template <class F>
void for_each_target(F body) {
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    ASSERT_STREQ(hwy_math_target(), hwy::TargetName(target));
    SCOPED_TRACE(hwy::TargetName(target));
    body(hwy::TargetName(target));
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(HwyMath, SeveralTargets) {
  // This CPU has AVX-512: at least SSSE3, SSE4, AVX2 and AVX3 are compiled and runnable here.
  EXPECT_GE(hwy::SupportedAndGeneratedTargets().size(), 4u);
}

// Every target within the Highway bound of the unary table, and within (hwy + scalar bound + 1) of the
// scalar path.
#define TESSEL_HWY_CASE(op, ref, lo, hi, log_spaced, scalar_bound, xsimd_bound, hwy_bound, near_lo, near_hi, smooth) \
  TEST(HwyMath, op##_EveryTarget) {                                                                                  \
    const std::vector<float> x = tm::sweep_points(lo, hi, log_spaced, std::size_t{1} << 16);                         \
    for_each_target([&](const char* target) {                                                                        \
      const tm::errors e = tm::measure<tessel::prim::op##_rule>(ref, x);                                             \
      EXPECT_LE(e.worst[2], hwy_bound) << "at x = " << e.worst_at[2];                                                \
      EXPECT_LE(e.worst[0], scalar_bound) << "scalar path";                                                          \
      EXPECT_LE(e.disagreement, (scalar_bound) + (xsimd_bound) + (hwy_bound) + 1);                                   \
      std::printf("%-9s %-8s max ULP %.3f\n", #op, target, e.worst[2]);                                              \
    });                                                                                                              \
  }
TESSEL_UNARY_TABLE(TESSEL_HWY_CASE)

// The kernel table's entries are found by their primitives' names: each names a primitive, which has a
// row in the unary table (so the sweeps above run its kernel on every target); a name with no entry
// finds none.
TEST(HwyMath, EveryKernelIsAPrimitiveWithATableRow) {
#define TESSEL_ROW_NAME(op, ...) #op,
  const std::vector<std::string_view> rows = {TESSEL_UNARY_TABLE(TESSEL_ROW_NAME)};
#undef TESSEL_ROW_NAME
  ASSERT_FALSE(hwy_math_functions().empty());
  for (std::string_view name : hwy_math_functions()) {
    EXPECT_TRUE(std::ranges::any_of(tessel::all_primitives, [&](const tessel::ir::primitive* p) { return p->name == name; }))
        << "the Highway kernel '" << name << "' is named as no primitive is";
    EXPECT_NE(std::ranges::find(rows, name), rows.end()) << "the Highway kernel '" << name << "' has no row in the unary table";
    EXPECT_EQ(hwy_math_functions()[hwy_math_function(name)->entry], name);
  }
  EXPECT_FALSE(hwy_math_function("erf").has_value());  // xsimd's erf only
  EXPECT_FALSE(hwy_math_function("tessel::exp").has_value());
}

// Arguments where the functions are special or the Highway kernels hand over to the scalar path.
std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float fmax = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  return {0.0f,      -0.0f,     inf,        -inf,      nan,       -nan,         fmax,         -fmax,
          1e30f,     -1e30f,    tiny,       -tiny,     1e-40f,    -1e-40f,      1.17549435e-38f, 1.0f,
          -1.0f,     -0.999999f, -1.000001f, 0.5f,      -0.5f,     2.0f,         88.0f,        -88.0f,
          88.72f,    88.7228f,  88.73f,     89.0f,     -103.0f,   -104.5f,      -200.0f,      200.0f,
          18.0f,     19.0f,     -19.0f,     39000.0f,  -39000.0f, 39000.004f,   1e5f,         -1e6f,
          3.14159265f, 1.57079633f, 100.0f, -87.3f,  -89.0f,    1e-7f,        -1e-7f,       1e38f};
}

bool same(float a, float b) { return std::isnan(a) ? std::isnan(b) : (a == b && std::signbit(a) == std::signbit(b)); }

// hwy path vs scalar path on special values: identical where the scalar result is NaN, infinite or
// zero, or is one of the values a kernel hands over; otherwise within the two bounds.
template <class Rule>
void check_special(const char* name, double hwy_bound, double scalar_bound) {
  const std::vector<float> specials = special_values();
  // Each value in a vector body (surrounded by ordinary arguments) and in a tail.
  std::vector<float> x;
  for (float s : specials) {
    for (int i = 0; i < 7; ++i) x.push_back(0.25f * static_cast<float>(i));
    x.push_back(s);
    for (int i = 0; i < 8; ++i) x.push_back(-0.125f * static_cast<float>(i));
  }
  x.insert(x.end(), specials.begin(), specials.begin() + 13);  // 13 < 16: a tail on every target
  const std::size_t n = x.size();
  std::vector<float> scalar(n), hwy(n), xs(n), in_place = x;
  tessel::prim::map_unary_f32<Rule>(math_path::scalar, x.data(), scalar.data(), n);
  tessel::prim::map_unary_f32<Rule>(math_path::xsimd, x.data(), xs.data(), n);
  for_each_target([&](const char*) {
    tessel::prim::map_unary_f32<Rule>(math_path::hwy, x.data(), hwy.data(), n);
    in_place = x;
    tessel::prim::map_unary_f32<Rule>(math_path::hwy, in_place.data(), in_place.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      SCOPED_TRACE(std::string(name) + "(" + std::to_string(x[i]) + ")");
      EXPECT_TRUE(same(in_place[i], hwy[i])) << in_place[i] << " in place vs " << hwy[i];
      const float s = scalar[i];
      if (std::isnan(s) || std::isinf(s) || s == 0.0f) {
        EXPECT_TRUE(same(hwy[i], s)) << "hwy " << hwy[i] << " vs scalar " << s;
        EXPECT_TRUE(same(xs[i], s)) << "xsimd " << xs[i] << " vs scalar " << s;
      } else {
        EXPECT_LE(tessel::testing::ulp_error(hwy[i], s), hwy_bound + scalar_bound + 1) << hwy[i] << " vs " << s;
      }
    }
  });
}

#define TESSEL_HWY_SPECIAL(op, ref, lo, hi, log_spaced, scalar_bound, xsimd_bound, hwy_bound, near_lo, near_hi, smooth) \
  TEST(HwyMath, op##_SpecialValues) { check_special<tessel::prim::op##_rule>(#op, hwy_bound, scalar_bound); }
TESSEL_UNARY_TABLE(TESSEL_HWY_SPECIAL)

TEST(HwyMath, SpecialValuesByDefinition) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  struct expect {
    const char* f;
    scalar_math_fn scalar;
    float x, y;
  };
  const expect cases[] = {
      {"exp", [](float v) { return std::exp(v); }, -inf, 0.0f},
      {"exp", [](float v) { return std::exp(v); }, inf, inf},
      {"exp", [](float v) { return std::exp(v); }, 100.0f, inf},
      {"exp", [](float v) { return std::exp(v); }, -0.0f, 1.0f},
      {"log", [](float v) { return std::log(v); }, 0.0f, -inf},
      {"log", [](float v) { return std::log(v); }, inf, inf},
      {"log", [](float v) { return std::log(v); }, -1.0f, nan},
      {"log1p", [](float v) { return std::log1p(v); }, -1.0f, -inf},
      {"log1p", [](float v) { return std::log1p(v); }, -0.0f, -0.0f},
      {"expm1", [](float v) { return std::expm1(v); }, -inf, -1.0f},
      {"expm1", [](float v) { return std::expm1(v); }, -0.0f, -0.0f},
      {"tanh", [](float v) { return std::tanh(v); }, -inf, -1.0f},
      {"tanh", [](float v) { return std::tanh(v); }, -0.0f, -0.0f},
      {"logistic", [](float v) { return 1.0f / (1.0f + std::exp(-v)); }, -inf, 0.0f},
      {"logistic", [](float v) { return 1.0f / (1.0f + std::exp(-v)); }, inf, 1.0f},
      {"sin", [](float v) { return std::sin(v); }, inf, nan},
      {"sin", [](float v) { return std::sin(v); }, -0.0f, -0.0f},
      {"cos", [](float v) { return std::cos(v); }, -inf, nan},
      {"sqrt", [](float v) { return std::sqrt(v); }, -1.0f, nan},
      {"sqrt", [](float v) { return std::sqrt(v); }, -0.0f, -0.0f},
      {"rsqrt", [](float v) { return 1.0f / std::sqrt(v); }, 0.0f, inf},
      {"rsqrt", [](float v) { return 1.0f / std::sqrt(v); }, inf, 0.0f},
  };
  for_each_target([&](const char*) {
    for (const expect& c : cases) {
      std::vector<float> x(37, c.x), y(37);  // two 16-lane vectors and a tail
      const std::optional<math_fn> f = hwy_math_function(c.f);
      ASSERT_TRUE(f.has_value()) << c.f << " has no Highway kernel";
      hwy_math(*f, x.data(), y.data(), x.size(), c.scalar);
      for (std::size_t i = 0; i < x.size(); ++i)
        EXPECT_TRUE(same(y[i], c.y)) << c.f << " at " << c.x << ": " << y[i] << ", lane " << i;
    }
  });
}

// The executor evaluates with the forced path: jit results equal the path's kernel bit for bit, and the
// Highway and xsimd paths differ somewhere (so the switch is real).
TEST(HwyMath, JitFollowsTheForcedPath) {
  using tessel::shape;
  using tessel::tensor;
  const auto x = tessel::testing::random_tensor<float, shape<1024>>(11, -10.0, 10.0);
  const auto f = [](auto v) { return tessel::exp(v); };
  tensor<float, shape<1024>> expected[3];
  for (int p = 0; p < 3; ++p) tessel::prim::map_unary_f32<tessel::prim::exp_rule>(tm::paths[p], x.data(), expected[p].data(), 1024);
  for (int p = 0; p < 3; ++p) {
    force_math_path(tm::paths[p]);
    const auto y = tessel::jit(f)(x);
    for (std::size_t i = 0; i < 1024; ++i) ASSERT_TRUE(same(y[i], expected[p][i])) << tm::path_names[p] << " path, element " << i;
  }
  force_math_path(math_path::automatic);
  const auto y = tessel::jit(f)(x);
  const int by_default = tessel::prim::default_path<tessel::prim::exp_rule>() == math_path::hwy ? 2 : 1;
  for (std::size_t i = 0; i < 1024; ++i) ASSERT_TRUE(same(y[i], expected[by_default][i])) << "exp's default path";
  int differ = 0;
  for (std::size_t i = 0; i < 1024; ++i) differ += !same(expected[1][i], expected[2][i]);
  EXPECT_GT(differ, 0);
}

TEST(HwyMath, PathFromEnvironment) {
  const char* old = std::getenv("TESSEL_MATH_PATH");
  const std::string saved = old ? old : "";
  setenv("TESSEL_MATH_PATH", "scalar", 1);
  EXPECT_EQ(hwy_math_detail::path_from_environment(), math_path::scalar);
  setenv("TESSEL_MATH_PATH", "xsimd", 1);
  EXPECT_EQ(hwy_math_detail::path_from_environment(), math_path::xsimd);
  setenv("TESSEL_MATH_PATH", "hwy", 1);
  EXPECT_EQ(hwy_math_detail::path_from_environment(), math_path::hwy);
  setenv("TESSEL_MATH_PATH", "fast", 1);
  EXPECT_EQ(hwy_math_detail::path_from_environment(), math_path::automatic);
  if (old) setenv("TESSEL_MATH_PATH", saved.c_str(), 1);
  else unsetenv("TESSEL_MATH_PATH");
}

TEST(HwyMath, ForceReturnsThePrevious) {
  const math_path before = force_math_path(math_path::scalar);
  EXPECT_EQ(forced_math_path(), math_path::scalar);
  EXPECT_EQ(force_math_path(before), math_path::scalar);
  EXPECT_EQ(forced_math_path(), before);
}

// Defaults: the measured preference where xsimd is as wide as the Highway target, Highway where narrower.
TEST(HwyMath, DefaultPaths) {
  using namespace tessel::prim;
  const bool narrower = xsimd::batch<float>::size < hwy_math_lanes();
  const math_path xsimd_or_hwy = narrower ? math_path::hwy : math_path::xsimd;
  EXPECT_EQ(default_path<exp_rule>(), xsimd_or_hwy);
  EXPECT_EQ(default_path<tanh_rule>(), xsimd_or_hwy);
  EXPECT_EQ(default_path<log_rule>(), math_path::hwy);
  EXPECT_EQ(default_path<sin_rule>(), math_path::hwy);
  EXPECT_EQ(default_path<erf_rule>(), math_path::xsimd);  // no Highway kernel
  EXPECT_EQ(default_path<cbrt_rule>(), math_path::xsimd);  // no Highway kernel
  EXPECT_EQ(default_path<neg_rule>(), math_path::xsimd);  // no Highway kernel either
}
}  // namespace
