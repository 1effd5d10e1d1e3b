#pragma once
// The reductions' tile functions that prim/family/reduce.hpp declares: a row reduced into one
// accumulator, rows combined elementwise, accumulators initialised, with xsimd for floats. Compiled where
// TESSEL_IMPLEMENTATION is (the tessel library), for each reduction prim/all.hpp lists.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "tessel/prim/family/reduce.hpp"
#include "tessel/prim/family/simd_math-inl.hpp"

namespace tessel::prim {

template <class Rule, class T>
void reduce_row_as(const void* in, std::size_t n, void* acc) {
  using V = tile_t<T>;
  const V* x = static_cast<const V*>(in);
  V& out = *static_cast<V*>(acc);
  std::size_t i = 0;
  if constexpr (std::is_same_v<V, float>) {
    using batch = xsimd::batch<float>;
    if (n >= batch::size) {
      // Four independent partials: one chain of combines (max's NaN test, compare and blend) waits on
      // its own latency every vector, which made a softmax's row max cost more than its exp.
      constexpr std::size_t w = batch::size;
      const batch identity(Rule::template identity<float>());
      batch p0 = identity, p1 = identity, p2 = identity, p3 = identity;
      for (; i + 4 * w <= n; i += 4 * w) {
        p0 = Rule::combine(p0, batch::load_unaligned(x + i));
        p1 = Rule::combine(p1, batch::load_unaligned(x + i + w));
        p2 = Rule::combine(p2, batch::load_unaligned(x + i + 2 * w));
        p3 = Rule::combine(p3, batch::load_unaligned(x + i + 3 * w));
      }
      for (; i + w <= n; i += w) p0 = Rule::combine(p0, batch::load_unaligned(x + i));
      const batch partial = Rule::combine(Rule::combine(p0, p1), Rule::combine(p2, p3));
      // The lanes combined by halves (depth log2 w, not a chain of w): a row of 256 spent more on a
      // chain of 16 dependent combines than on its 16 vectors.
      alignas(64) float lanes[w];
      partial.store_aligned(lanes);
      for (std::size_t half = w / 2; half > 0; half /= 2)
        for (std::size_t l = 0; l < half; ++l) lanes[l] = Rule::combine(lanes[l], lanes[l + half]);
      out = Rule::combine(out, lanes[0]);
    }
  }
  for (; i < n; ++i) out = Rule::combine(out, x[i]);
}

template <class Rule, class T>
void combine_as(const void* in, std::size_t n, void* acc) {
  using V = tile_t<T>;
  const V* x = static_cast<const V*>(in);
  V* a = static_cast<V*>(acc);
  std::size_t i = 0;
  if constexpr (std::is_same_v<V, float>) {
    using batch = xsimd::batch<float>;
    for (; i + batch::size <= n; i += batch::size)
      Rule::combine(batch::load_unaligned(a + i), batch::load_unaligned(x + i)).store_unaligned(a + i);
  }
  for (; i < n; ++i) a[i] = Rule::combine(a[i], x[i]);
}

template <class Rule, class T>
void init_as(void* acc, std::size_t n) {
  using V = tile_t<T>;
  std::fill_n(static_cast<V*>(acc), n, Rule::template identity<V>());
}

// Each for the node's dtype, where the rule takes it (every reduction takes f32 and bf16).
template <class Rule>
void reduce_row(const ir::node& node, const void* in, std::size_t n, void* acc) {
  visit_dtype(node.dtype, [&]<class T>(T) {
    if constexpr (rule_accepts<Rule, T>()) reduce_row_as<Rule, T>(in, n, acc);
  });
}
template <class Rule>
void combine(const ir::node& node, const void* in, std::size_t n, void* acc) {
  visit_dtype(node.dtype, [&]<class T>(T) {
    if constexpr (rule_accepts<Rule, T>()) combine_as<Rule, T>(in, n, acc);
  });
}
template <class Rule>
void init(const ir::node& node, void* acc, std::size_t n) {
  visit_dtype(node.dtype, [&]<class T>(T) {
    if constexpr (rule_accepts<Rule, T>()) init_as<Rule, T>(acc, n);
  });
}

}  // namespace tessel::prim
