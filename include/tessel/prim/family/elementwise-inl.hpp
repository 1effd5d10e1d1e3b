#pragma once
// The elementwise rules' tile functions: the loops that evaluate_unary and evaluate_binary run, with their
// xsimd and Highway paths. prim/family/elementwise.hpp declares evaluate_unary/evaluate_binary and
// includes this file only where TESSEL_IMPLEMENTATION is defined (the tessel library), where prim/all.hpp
// instantiates them for every rule; kernel tests and benchmarks that call map_unary_f32 include it.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "tessel/kernels/hwy_math.hpp"
#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/simd_math-inl.hpp"

namespace tessel::prim {

template <class Rule, class V>
concept BatchRule1 = requires(V v) { Rule::apply(v); };
template <class Rule, class V>
concept BatchRule2 = requires(V v) { Rule::apply(v, v); };

// Unary rules on f32 tiles have three paths (kernels/hwy_math.hpp): scalar (Rule::apply on one float),
// xsimd (Rule::apply on batches, where it takes them) and hwy (kernels::hwy_math, for rules whose primitive
// has an entry in the Highway kernel table, found by its name). A rule states its default where both
// SIMD paths have the same width with `static constexpr kernels::math_path preferred` (xsimd if it
// does not); where xsimd is narrower than the CPU's Highway target, rules with a Highway kernel use it.
// kernels::force_math_path or TESSEL_MATH_PATH overrides both for every rule. A path a rule lacks
// falls back to xsimd, then scalar.
template <class Rule>
constexpr kernels::math_path preferred_path() {
  if constexpr (requires { { Rule::preferred } -> std::convertible_to<kernels::math_path>; }) return Rule::preferred;
  else return kernels::math_path::xsimd;
}

// The rule's Highway kernel: the table's entry named as its primitive (Rule::name without "tessel::").
template <class Rule>
const std::optional<kernels::math_fn>& highway_kernel() {
  static constexpr std::string_view qualified = Rule::name.view();
  static const std::optional<kernels::math_fn> kernel = kernels::hwy_math_function(qualified.substr(qualified.rfind(':') + 1));
  return kernel;
}

// The scalar path of a unary rule on floats, as a plain function (hwy_math's fallback for tails and
// out-of-range lanes).
template <class Rule>
float apply_scalar(float x) {
  return static_cast<float>(Rule::apply(x));
}

// The path of a rule when none is forced.
template <class Rule>
kernels::math_path default_path() {
  constexpr kernels::math_path preferred = preferred_path<Rule>();
  if (preferred == kernels::math_path::xsimd && highway_kernel<Rule>() && kernels::hwy_math_lanes() > xsimd::batch<float>::size)
    return kernels::math_path::hwy;
  return preferred;
}

// y[i] = Rule(x[i]) on f32 with path p (automatic: default_path); x and y may be the same array.
template <class Rule>
void map_unary_f32(kernels::math_path p, const float* x, float* y, std::size_t n) {
  if (p == kernels::math_path::automatic) p = default_path<Rule>();
  if (p == kernels::math_path::hwy) {
    if (const std::optional<kernels::math_fn>& kernel = highway_kernel<Rule>()) {
      kernels::hwy_math(*kernel, x, y, n, &apply_scalar<Rule>);
      return;
    }
  }
  std::size_t i = 0;
  if constexpr (BatchRule1<Rule, xsimd::batch<float>>) {
    if (p != kernels::math_path::scalar) {
      using batch = xsimd::batch<float>;
      for (const std::size_t body = n - n % batch::size; i < body; i += batch::size)
        Rule::apply(batch::load_unaligned(x + i)).store_unaligned(y + i);
    }
  }
  for (; i < n; ++i) y[i] = apply_scalar<Rule>(x[i]);
}

template <class Rule, class T, class R>
void map_unary(const T* x, R* y, std::size_t n) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float>) {
    map_unary_f32<Rule>(kernels::forced_math_path(), x, y, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<R>(Rule::apply(x[i]));
  }
}

// y[i] = Rule(a[i], b[i]), where a one-value operand (SplatA, SplatB) is read at [0] for every i.
template <class Rule, bool SplatA, bool SplatB, class T, class R>
void map_binary(const T* a, const T* b, R* y, std::size_t n) {
  std::size_t i = 0;
  if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float> && BatchRule2<Rule, xsimd::batch<float>>) {
    using batch = xsimd::batch<float>;
    const batch one_a(SplatA ? a[0] : 0.0f), one_b(SplatB ? b[0] : 0.0f);
    for (const std::size_t body = n - n % batch::size; i < body; i += batch::size)
      Rule::apply(SplatA ? one_a : batch::load_unaligned(a + i), SplatB ? one_b : batch::load_unaligned(b + i)).store_unaligned(y + i);
  }
  for (; i < n; ++i) y[i] = static_cast<R>(Rule::apply(a[SplatA ? 0 : i], b[SplatB ? 0 : i]));
}

template <class Rule, class T>
void evaluate_unary_as(const void* in, void* out, std::size_t n) {
  if constexpr (rule_accepts<Rule, T>()) {
    using R = tile_t<result_t<Rule, T>>;
    map_unary<Rule>(static_cast<const tile_t<T>*>(in), static_cast<R*>(out), n);
  }
}

template <class Rule>
void evaluate_unary(const ir::node& node, const void* const* in, void* out, std::size_t n) {
  visit_dtype(node.operand_dtype, [&]<class T>(T) { evaluate_unary_as<Rule, T>(in[0], out, n); });
}

template <class Rule, class T>
void evaluate_binary_as(const void* a, const void* b, unsigned splat, void* out, std::size_t n) {
  if constexpr (rule_accepts<Rule, T>()) {
    using V = tile_t<T>;
    using R = tile_t<result_t<Rule, T>>;
    const auto* x = static_cast<const V*>(a);
    const auto* z = static_cast<const V*>(b);
    auto* y = static_cast<R*>(out);
    switch (splat & 3u) {
      case 0: map_binary<Rule, false, false>(x, z, y, n); break;
      case 1: map_binary<Rule, true, false>(x, z, y, n); break;
      case 2: map_binary<Rule, false, true>(x, z, y, n); break;
      default: std::fill_n(y, n, static_cast<R>(Rule::apply(x[0], z[0])));
    }
  }
}

template <class Rule>
void evaluate_binary(const ir::node& node, const void* const* in, unsigned splat, void* out, std::size_t n) {
  visit_dtype(node.operand_dtype, [&]<class T>(T) { evaluate_binary_as<Rule, T>(in[0], in[1], splat, out, n); });
}
}  // namespace tessel::prim
