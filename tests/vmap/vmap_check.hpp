#pragma once
// The generic batching checker: vmap(f, in_axes<...>) on a batch of random inputs against a loop that
// runs jit(f) on each slice, for every primitive (each through a small function that uses it) and
// for a set of in_axes per arity that covers leading, trailing (negative), middle and `none` axes.
// Every primitive the checked functions use is recorded, so that coverage_test.cpp can fail when a
// primitive of tessel::all_primitives has no batching rule or was never checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/transform/vmap.hpp"

namespace tessel::testing {

// Names of the primitives whose batching rules the checker has run (shared by the binary's files).
inline std::set<std::string>& checked_primitives() {
  static std::set<std::string> names;
  return names;
}

// Axis A of a batched rank R, normalised (none stays none).
constexpr long normal_axis(long a, std::size_t rank) { return a == none ? none : a < 0 ? a + static_cast<long>(rank) : a; }

// The B slices of a tensor stacked along axis A (A in the batched rank).
template <long A, std::size_t B, class T, class S>
auto stack(const std::array<tensor<T, S>, B>& parts) {
  using out_shape = insert_axis_t<S, A, B>;
  constexpr auto axis = static_cast<std::size_t>(normal_axis(A, S::rank + 1));
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= S::dims[i];
  for (std::size_t i = axis; i < S::rank; ++i) inner *= S::dims[i];
  tensor<T, out_shape> out;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < inner; ++i) out[(o * B + b) * inner + i] = parts[b][o * inner + i];
  return out;
}

// Slice b of x along axis A.
template <long A, class T, class S>
auto unstack(const tensor<T, S>& x, std::size_t b) {
  constexpr auto axis = static_cast<std::size_t>(normal_axis(A, S::rank));
  using slice_shape = drop_axis_t<S, A>;
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= S::dims[i];
  for (std::size_t i = axis + 1; i < S::rank; ++i) inner *= S::dims[i];
  const std::size_t n = S::dims[axis];
  tensor<T, slice_shape> out;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) out[o * inner + i] = x[(o * n + b) * inner + i];
  return out;
}

// The interval the random inputs are drawn from (log and sqrt want positive inputs, erf_inv (-1, 1)).
struct domain {
  double lo = -1, hi = 1;
};

template <class F, class... X>
void record_primitives() {
  using program = typename jitted<F>::template traced_for<X...>;
  for (const auto& n : program::program.nodes)
    if (n.arity > 0) checked_primitives().insert(std::string(n.prim->name));
}

template <class R>
::testing::AssertionResult same_slice(const R& got, const R& want, std::size_t b) {
  if constexpr (std::is_same_v<typename R::value_type, float>) {
    auto r = all_close(got, want, tolerance{1e-5, 1e-6});
    if (!r) return ::testing::AssertionFailure() << "batch element " << b << ": " << r.message();
  } else {
    for (std::size_t i = 0; i < R::shape_type::size; ++i)
      if (got[i] != want[i]) return ::testing::AssertionFailure() << "batch element " << b << ", element " << i << " differs";
  }
  return ::testing::AssertionSuccess();
}

// vmap(f, in_axes<Axes...>) against jit(f) slice by slice, B = 3, on arguments of types X... (unbatched).
template <class... X, class F, long... Axes>
void check_batching_axes(F f, domain d, std::uint32_t seed, in_axes_t<Axes...>) {
  constexpr std::size_t B = 3;
  std::tuple<std::array<X, B>...> slices;
  std::uint32_t next = seed;
  std::apply([&](auto&... per_arg) {
    (([&] {
       for (auto& s : per_arg) {
         using E = std::remove_cvref_t<decltype(s)>;
         s = random_tensor<typename E::value_type, typename E::shape_type>(next++, d.lo, d.hi);
       }
     }()),
     ...);
  }, slices);
  // A shared argument (none) is the slices' first element for every b.
  auto batched_arg = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    constexpr long a = std::array<long, sizeof...(Axes)>{Axes...}[K];
    if constexpr (a == none) return std::get<K>(slices)[0];
    else return stack<a>(std::get<K>(slices));
  };
  const auto result = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return vmap(f, in_axes<Axes...>)(batched_arg(std::integral_constant<std::size_t, K>{})...);
  }(std::index_sequence_for<X...>{});
  for (std::size_t b = 0; b < B; ++b) {
    const auto want = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
      constexpr long a = std::array<long, sizeof...(Axes)>{Axes...}[K];
      return std::get<K>(slices)[a == none ? 0 : b];
    };
    const auto expected = [&]<std::size_t... K>(std::index_sequence<K...>) {
      return jit(f)(want(std::integral_constant<std::size_t, K>{})...);
    }(std::index_sequence_for<X...>{});
    EXPECT_TRUE(same_slice(unstack<0>(result, b), expected, b)) << "in_axes (" << ((std::to_string(Axes) + " ") + ...) << ")";
  }
}

template <class Axes, class... X, class F>
void check_batching_with(F f, domain d, std::uint32_t seed) {
  check_batching_axes<X...>(f, d, seed, Axes{});
}

// The standard in_axes set for f's arity: leading, trailing (negative), a middle axis where the
// unbatched rank allows it, and each argument shared (none) in turn.
template <class... X, class F>
void check_batching(F f, domain d = {}) {
  record_primitives<F, X...>();
  constexpr std::size_t min_rank = std::min({X::shape_type::rank...});
  constexpr long mid = min_rank >= 1 ? 1 : 0;
  if constexpr (sizeof...(X) == 1) {
    check_batching_with<in_axes_t<0>, X...>(f, d, 1);
    check_batching_with<in_axes_t<-1>, X...>(f, d, 2);
    check_batching_with<in_axes_t<mid>, X...>(f, d, 3);
  } else if constexpr (sizeof...(X) == 2) {
    check_batching_with<in_axes_t<0, 0>, X...>(f, d, 1);
    check_batching_with<in_axes_t<-1, mid>, X...>(f, d, 2);
    check_batching_with<in_axes_t<none, -1>, X...>(f, d, 3);
    check_batching_with<in_axes_t<mid, none>, X...>(f, d, 4);
  } else {
    check_batching_with<in_axes_t<0, 0, 0>, X...>(f, d, 1);
    check_batching_with<in_axes_t<-1, mid, 0>, X...>(f, d, 2);
    check_batching_with<in_axes_t<none, -1, none>, X...>(f, d, 3);
    check_batching_with<in_axes_t<mid, none, -1>, X...>(f, d, 4);
    check_batching_with<in_axes_t<none, none, 0>, X...>(f, d, 5);
  }
}

}  // namespace tessel::testing
