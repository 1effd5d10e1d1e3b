#pragma once
// Shared by the control-flow vmap tests (control_test.cpp, control_cond_test.cpp, control_grad_test.cpp):
// vmap(f) against jit(f) slice by slice for functions returning any tree of tensors, and an RNN cell scan.
#include <cmath>
#include <cstdint>
#include <vector>

#include "tessel/core/tree.hpp"
#include "tessel/jit.hpp"
#include "tessel/transform/cond.hpp"
#include "tessel/transform/scan.hpp"
#include "vmap_check.hpp"

namespace control_check {

using tessel::in_axes;
using tessel::none;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
using tessel::testing::stack;

constexpr std::size_t B = 3;
constexpr std::size_t L = 4;
using H = tensor<float, shape<4>>;
using XS = tensor<float, shape<L, 4>>;
using W = tensor<float, shape<4, 4>>;
using I = tensor<std::int32_t, shape<>>;

// Every leaf of a tree of tensors as floats.
template <class T>
std::vector<std::vector<float>> leaves(const T& tree) {
  std::vector<std::vector<float>> out;
  tessel::tree::for_each(tree, [&](const auto& leaf) {
    using Leaf = std::remove_cvref_t<decltype(leaf)>;
    std::vector<float> v;
    for (std::size_t i = 0; i < Leaf::shape_type::size; ++i) v.push_back(static_cast<float>(leaf[i]));
    out.push_back(v);
  });
  return out;
}

// got: every leaf with `count` slices stacked at axis 0; want[b]: slice b's leaves.
inline ::testing::AssertionResult same_slices(const std::vector<std::vector<float>>& got, const std::vector<std::vector<std::vector<float>>>& want) {
  for (std::size_t b = 0; b < want.size(); ++b) {
    if (want[b].size() != got.size()) return ::testing::AssertionFailure() << "leaf count differs";
    for (std::size_t l = 0; l < got.size(); ++l) {
      const std::size_t n = want[b][l].size();
      if (got[l].size() != n * want.size()) return ::testing::AssertionFailure() << "leaf " << l << " has the wrong size";
      for (std::size_t i = 0; i < n; ++i) {
        const float a = got[l][b * n + i], e = want[b][l][i];
        if (!(std::abs(a - e) <= 1e-5f + 1e-4f * std::abs(e)))
          return ::testing::AssertionFailure() << "slice " << b << ", leaf " << l << ", element " << i << ": " << a << " vs " << e;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

template <class T>
std::array<T, B> slices(std::uint32_t seed) {
  std::array<T, B> a;
  for (std::size_t b = 0; b < B; ++b) a[b] = random_tensor<typename T::value_type, typename T::shape_type>(seed + static_cast<std::uint32_t>(b));
  return a;
}

// vmap(f, in_axes<Axes...>) on the slices stacked at their axes (slice 0 for none) against jit(f) per slice.
template <long... Axes, class F, class... X>
::testing::AssertionResult check_vmap(F f, const std::array<X, B>&... per_arg) {
  auto batched = [&]<long A, class T>(const std::array<T, B>& s) {
    if constexpr (A == none) return s[0];
    else return stack<A>(s);
  };
  const auto got = tessel::vmap(f, in_axes<Axes...>)(batched.template operator()<Axes>(per_arg)...);
  std::vector<std::vector<std::vector<float>>> want;
  for (std::size_t b = 0; b < B; ++b) want.push_back(leaves(tessel::jit(f)(per_arg[Axes == none ? 0 : b]...)));
  return same_slices(leaves(got), want);
}

constexpr auto rnn = [](auto h, auto xs, auto w) {
  return tessel::scan([&](auto c, auto x) {
    const auto n = tessel::tanh(tessel::matmul(c, w) + x);
    return std::tuple{n, n * 2.0f};
  }, h, xs);
};

}  // namespace control_check
