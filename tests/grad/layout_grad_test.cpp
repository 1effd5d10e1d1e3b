// slice, pad and concatenate: grad and jvp against finite differences of double references.
#include "gradcheck.hpp"

namespace {
using tessel::pad_axis;
using tessel::shape;
using tessel::testing::check_gradient;
using tessel::testing::random_tensor;
using V = std::vector<std::vector<double>>;

const auto x35 = random_tensor<float, shape<3, 5>>(31);

TEST(LayoutGrad, StridedSlice) {
  const auto w = random_tensor<float, shape<2, 2>>(32);
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::slice<std::array{1, 0}, std::array{3, 4}, std::array{1, 3}>(x * x) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 2; ++i)
                     for (std::size_t j = 0; j < 2; ++j) {
                       const double e = v[0][(i + 1) * 5 + j * 3];
                       s += e * e * v[1][i * 2 + j];
                     }
                   return s;
                 },
                 x35, w);
}

// Interior padding and a crop on one axis; the padding value is differentiated too.
TEST(LayoutGrad, PadOperandAndValue) {
  const auto w = random_tensor<float, shape<6, 10>>(33);
  const tessel::tensor<float, shape<>> fill{0.3f};
  auto reference = [](const V& v, bool value_first) {
    const std::vector<double>& x = value_first ? v[1] : v[0];
    const double fill_value = value_first ? v[0][0] : v[1][0];
    const std::vector<double>& wv = v[2];
    double s = 0;
    for (std::size_t i = 0; i < 6; ++i)
      for (std::size_t j = 0; j < 10; ++j) {
        // rows: lo 1, interior 1 (1 + 5 = 6); cols: lo -1 (crops column 0), interior 1, hi 2 (-1 + 9 + 2 = 10).
        const long r = static_cast<long>(i) - 1, c = static_cast<long>(j) + 1;
        const bool in = r >= 0 && r % 2 == 0 && r / 2 < 3 && c % 2 == 0 && c / 2 < 5;
        const double e = in ? x[static_cast<std::size_t>(r / 2 * 5 + c / 2)] : fill_value;
        s += std::sin(e) * wv[i * 10 + j];
      }
    return s;
  };
  check_gradient([](auto x, auto f, auto w) { return tessel::sum(tessel::sin(tessel::pad<std::array{pad_axis{1, 0, 1}, pad_axis{-1, 2, 1}}>(x, f)) * w); },
                 [&](const V& v) { return reference(v, false); }, x35, fill, w);
  check_gradient([](auto f, auto x, auto w) { return tessel::sum(tessel::sin(tessel::pad<std::array{pad_axis{1, 0, 1}, pad_axis{-1, 2, 1}}>(x, f)) * w); },
                 [&](const V& v) { return reference(v, true); }, fill, x35, w);
}

TEST(LayoutGrad, ConcatenateThreeOperands) {
  const auto y = random_tensor<float, shape<3, 2>>(34);
  const auto w = random_tensor<float, shape<3, 12>>(35);
  check_gradient([](auto x, auto y, auto w) { return tessel::sum(tessel::exp(tessel::concatenate<1>(x, y, x * 2.0f)) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i)
                     for (std::size_t j = 0; j < 12; ++j) {
                       const double e = j < 5 ? v[0][i * 5 + j] : j < 7 ? v[1][i * 2 + j - 5] : 2 * v[0][i * 5 + j - 7];
                       s += std::exp(e) * v[2][i * 12 + j];
                     }
                   return s;
                 },
                 x35, y, w);
}
}  // namespace

namespace {
// Indices computed in the program (check_gradient's arguments are all f32): k = 0..3 over [2,2], then
// k*k - 3k = {0, -2, -2, 0}: repeated and negative (-2 counts from the end: 3 on an axis of 5).
template <class X>
constexpr auto repeated_indices(X anchor) {
  const auto k = tessel::broadcasted_iota<std::int32_t, shape<2, 2>, 0>(anchor) * 2 +
                 tessel::broadcasted_iota<std::int32_t, shape<2, 2>, 1>(anchor);
  return k * k - k * 3;
}
constexpr std::size_t repeated_index[4] = {0, 3, 3, 0};
// 2k - 3 over [2,3] = {-3, -1, 1, 3, 5, 7}, clamped into [0, 4] by index_mode::clip.
template <class X>
constexpr auto clipped_indices(X anchor) {
  const auto k = tessel::broadcasted_iota<std::int32_t, shape<2, 3>, 0>(anchor) * 3 +
                 tessel::broadcasted_iota<std::int32_t, shape<2, 3>, 1>(anchor);
  return k * 2 - 3;
}
constexpr std::size_t clipped_index[6] = {0, 0, 1, 3, 4, 4};

TEST(LayoutGrad, TakeWithRepeatedNegativeAndClippedIndices) {
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::sin(tessel::take<1>(x, repeated_indices(x))) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i)
                     for (std::size_t j = 0; j < 4; ++j) s += std::sin(v[0][i * 5 + repeated_index[j]]) * v[1][i * 4 + j];
                   return s;
                 },
                 x35, random_tensor<float, shape<3, 2, 2>>(36));
  check_gradient([](auto x, auto w) {
    return tessel::sum(tessel::sin(tessel::take<1, tessel::index_mode::clip>(x, clipped_indices(x))) * w);
  },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i)
                     for (std::size_t j = 0; j < 6; ++j) s += std::sin(v[0][i * 5 + clipped_index[j]]) * v[1][i * 6 + j];
                   return s;
                 },
                 x35, random_tensor<float, shape<3, 2, 3>>(37));
}

// Both differentiable operands of scatter_add: the operand and the updates.
TEST(LayoutGrad, ScatterAddOperandAndUpdates) {
  const auto u = random_tensor<float, shape<3, 2, 2>>(38);
  const auto w = random_tensor<float, shape<3, 5>>(39);
  auto reference = [](const V& v, bool updates_first) {
    const std::vector<double>& x = updates_first ? v[1] : v[0];
    const std::vector<double>& up = updates_first ? v[0] : v[1];
    std::vector<double> y = x;
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 4; ++j) y[i * 5 + repeated_index[j]] += up[i * 4 + j];
    double s = 0;
    for (std::size_t k = 0; k < 15; ++k) s += std::sin(y[k]) * v[2][k];
    return s;
  };
  check_gradient([](auto x, auto up, auto wt) { return tessel::sum(tessel::sin(tessel::scatter_add<1>(x, repeated_indices(x), up)) * wt); },
                 [&](const V& v) { return reference(v, false); }, x35, u, w);
  check_gradient([](auto up, auto x, auto wt) { return tessel::sum(tessel::sin(tessel::scatter_add<1>(x, repeated_indices(x), up)) * wt); },
                 [&](const V& v) { return reference(v, true); }, u, x35, w);
}
}  // namespace
