// conv_general and pooling against naive double-precision references: several shapes, strides 1 and
// 2, SAME, VALID and explicit padding, filter dilation, C and O > 1, batch > 1, f32 and bf16; the
// derivative primitives against the reference's adjoints; a fused bias + relu epilogue.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::dilation;
using tessel::jit;
using tessel::shape;
using tessel::stride;
using tessel::tensor;
using tessel::window;
using tessel::testing::random_tensor;
namespace padding = tessel::padding;

// One spatial axis, computed here from the rules' definitions (not from the library).
struct axis_rule {
  std::size_t out;
  long lo;
};
axis_rule same_axis(std::size_t in, std::size_t window, std::size_t s) {
  const std::size_t out = (in + s - 1) / s;
  const long total = std::max<long>(static_cast<long>((out - 1) * s + window) - static_cast<long>(in), 0);
  return {out, total / 2};
}
axis_rule valid_axis(std::size_t in, std::size_t window, std::size_t s) { return {(in - window) / s + 1, 0}; }
axis_rule explicit_axis(std::size_t in, std::size_t window, std::size_t s, long lo, long hi) {
  return {(in + static_cast<std::size_t>(lo + hi) - window) / s + 1, lo};
}

struct conv_spec {
  std::size_t n, h, w, c, kh, kw, o, sh, sw, dh, dw;
  axis_rule ah, aw;
};

// y[n, i, j, o] = sum x[n, i*sh + a*dh - ph, j*sw + b*dw - pw, c] * w[a, b, c, o]
std::vector<double> reference_conv(const conv_spec& s, const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> y(s.n * s.ah.out * s.aw.out * s.o, 0.0);
  for (std::size_t n = 0; n < s.n; ++n)
    for (std::size_t i = 0; i < s.ah.out; ++i)
      for (std::size_t j = 0; j < s.aw.out; ++j)
        for (std::size_t o = 0; o < s.o; ++o) {
          double acc = 0;
          for (std::size_t a = 0; a < s.kh; ++a)
            for (std::size_t b = 0; b < s.kw; ++b) {
              const long r = static_cast<long>(i * s.sh + a * s.dh) - s.ah.lo,
                         q = static_cast<long>(j * s.sw + b * s.dw) - s.aw.lo;
              if (r < 0 || q < 0 || r >= static_cast<long>(s.h) || q >= static_cast<long>(s.w)) continue;
              for (std::size_t c = 0; c < s.c; ++c)
                acc += x[((n * s.h + static_cast<std::size_t>(r)) * s.w + static_cast<std::size_t>(q)) * s.c + c] *
                       w[((a * s.kw + b) * s.c + c) * s.o + o];
            }
          y[((n * s.ah.out + i) * s.aw.out + j) * s.o + o] = acc;
        }
  return y;
}

template <class T, class S>
std::vector<double> doubles(const tensor<T, S>& t) {
  std::vector<double> v(S::size);
  for (std::size_t i = 0; i < S::size; ++i) v[i] = static_cast<double>(static_cast<float>(t[i]));
  return v;
}

template <class T, class S>
::testing::AssertionResult near(const tensor<T, S>& got, const std::vector<double>& want, double rel, double abs) {
  if (want.size() != S::size) return ::testing::AssertionFailure() << "size " << S::size << " vs reference " << want.size();
  for (std::size_t i = 0; i < S::size; ++i) {
    const double g = static_cast<float>(got[i]);
    if (!(std::abs(g - want[i]) <= abs + rel * std::abs(want[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << g << " vs reference " << want[i];
  }
  return ::testing::AssertionSuccess();
}

// conv_general, and its two derivative primitives (through grad of <r, conv(x, w)>, whose gradients are
// exactly conv_input_grad(r, w) and conv_filter_grad(x, r)) against the reference and its adjoints.
template <std::size_t N, std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t O,
          class Strides, class Padding, class Dilation = dilation<1, 1>>
void check_conv(const conv_spec& s) {
  const auto x = random_tensor<float, shape<N, H, W, C>>(41);
  const auto w = random_tensor<float, shape<KH, KW, C, O>>(42);
  const auto y = jit([](auto x, auto w) { return tessel::conv_general<Strides, Padding, Dilation>(x, w); })(x, w);
  const std::vector<double> want = reference_conv(s, doubles(x), doubles(w));
  const double tol = 1e-6 * static_cast<double>(KH * KW * C);
  ASSERT_TRUE(near(y, want, tol, tol));

  using Y = std::remove_cvref_t<decltype(y)>;
  const auto r = random_tensor<float, typename Y::shape_type>(43);
  const auto [dx, dw] = tessel::grad<0, 1>(
      [](auto x, auto w, auto r) { return tessel::sum(tessel::conv_general<Strides, Padding, Dilation>(x, w) * r); })(x, w, r);
  // Adjoints of the reference: dx[p] = sum over outputs of r * w at the tap mapping to p; likewise dw.
  const std::vector<double> xd = doubles(x), wd = doubles(w), rd = doubles(r);
  std::vector<double> want_dx(xd.size(), 0.0), want_dw(wd.size(), 0.0);
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t i = 0; i < s.ah.out; ++i)
      for (std::size_t j = 0; j < s.aw.out; ++j)
        for (std::size_t a = 0; a < KH; ++a)
          for (std::size_t b = 0; b < KW; ++b) {
            const long p = static_cast<long>(i * s.sh + a * s.dh) - s.ah.lo, q = static_cast<long>(j * s.sw + b * s.dw) - s.aw.lo;
            if (p < 0 || q < 0 || p >= static_cast<long>(H) || q >= static_cast<long>(W)) continue;
            for (std::size_t c = 0; c < C; ++c)
              for (std::size_t o = 0; o < O; ++o) {
                const std::size_t xi = ((n * H + static_cast<std::size_t>(p)) * W + static_cast<std::size_t>(q)) * C + c;
                const std::size_t wi = ((a * KW + b) * C + c) * O + o;
                const double ri = rd[((n * s.ah.out + i) * s.aw.out + j) * O + o];
                want_dx[xi] += ri * wd[wi];
                want_dw[wi] += ri * xd[xi];
              }
          }
  EXPECT_TRUE(near(dx, want_dx, tol, tol)) << "conv_input_grad";
  EXPECT_TRUE(
      near(dw, want_dw, 1e-6 * static_cast<double>(N * s.ah.out * s.aw.out), 1e-6 * static_cast<double>(N * s.ah.out * s.aw.out)))
      << "conv_filter_grad";
}

TEST(Conv, SameAndValidStrides1And2) {
  check_conv<2, 7, 7, 3, 3, 3, 4, stride<1, 1>, padding::same>(
      {2, 7, 7, 3, 3, 3, 4, 1, 1, 1, 1, same_axis(7, 3, 1), same_axis(7, 3, 1)});
  check_conv<2, 7, 7, 3, 3, 3, 4, stride<2, 2>, padding::same>(
      {2, 7, 7, 3, 3, 3, 4, 2, 2, 1, 1, same_axis(7, 3, 2), same_axis(7, 3, 2)});
  check_conv<3, 8, 9, 2, 3, 2, 5, stride<2, 1>, padding::valid>(
      {3, 8, 9, 2, 3, 2, 5, 2, 1, 1, 1, valid_axis(8, 3, 2), valid_axis(9, 2, 1)});
  check_conv<2, 9, 8, 3, 2, 3, 5, stride<2, 2>, padding::valid>(
      {2, 9, 8, 3, 2, 3, 5, 2, 2, 1, 1, valid_axis(9, 2, 2), valid_axis(8, 3, 2)});
  // An even filter under SAME pads more after than before.
  check_conv<2, 6, 5, 2, 4, 2, 3, stride<1, 2>, padding::same>(
      {2, 6, 5, 2, 4, 2, 3, 1, 2, 1, 1, same_axis(6, 4, 1), same_axis(5, 2, 2)});
}

TEST(Conv, OneByOneExplicitPaddingAndDilation) {
  check_conv<2, 5, 5, 4, 1, 1, 3, stride<1, 1>, padding::valid>(
      {2, 5, 5, 4, 1, 1, 3, 1, 1, 1, 1, valid_axis(5, 1, 1), valid_axis(5, 1, 1)});
  check_conv<2, 6, 7, 2, 3, 3, 3, stride<2, 1>, padding::explicit_pads<1, 2, 0, 1>>(
      {2, 6, 7, 2, 3, 3, 3, 2, 1, 1, 1, explicit_axis(6, 3, 2, 1, 2), explicit_axis(7, 3, 1, 0, 1)});
  check_conv<2, 9, 9, 2, 3, 3, 3, stride<1, 1>, padding::same, dilation<2, 2>>(
      {2, 9, 9, 2, 3, 3, 3, 1, 1, 2, 2, same_axis(9, 5, 1), same_axis(9, 5, 1)});
  check_conv<1, 10, 9, 1, 2, 3, 2, stride<2, 2>, padding::valid, dilation<3, 2>>(
      {1, 10, 9, 1, 2, 3, 2, 2, 2, 3, 2, valid_axis(10, 4, 2), valid_axis(9, 5, 2)});
}

TEST(Conv, ManyChannelsAndRows) {
  // 3*3*40 = 360 patch columns: two GEMM K blocks; 8*12*12 = 1152 rows: several work items per thread.
  check_conv<8, 12, 12, 40, 3, 3, 24, stride<1, 1>, padding::same>(
      {8, 12, 12, 40, 3, 3, 24, 1, 1, 1, 1, same_axis(12, 3, 1), same_axis(12, 3, 1)});
  // The MNIST first layer's shape on a smaller batch: C = 1, O = 32.
  check_conv<4, 28, 28, 1, 3, 3, 32, stride<1, 1>, padding::same>(
      {4, 28, 28, 1, 3, 3, 32, 1, 1, 1, 1, same_axis(28, 3, 1), same_axis(28, 3, 1)});
}

TEST(Conv, Bf16AccumulatesInF32) {
  const auto x = random_tensor<float, shape<2, 9, 9, 16>>(44).astype<tessel::bfloat16>();
  const auto w = random_tensor<float, shape<3, 3, 16, 8>>(45).astype<tessel::bfloat16>();
  const auto y = jit([](auto x, auto w) { return tessel::conv_general<stride<2, 2>, padding::same>(x, w); })(x, w);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>, tensor<tessel::bfloat16, shape<2, 5, 5, 8>>>);
  const conv_spec s{2, 9, 9, 16, 3, 3, 8, 2, 2, 1, 1, same_axis(9, 3, 2), same_axis(9, 3, 2)};
  EXPECT_TRUE(near(y, reference_conv(s, doubles(x), doubles(w)), 1.0 / 128, 1e-5));  // one bf16 rounding of an f32 sum
  // The derivative primitives in bf16 too.
  const auto r = random_tensor<float, shape<2, 5, 5, 8>>(46).astype<tessel::bfloat16>();
  const auto dw = tessel::grad<1>([](auto x, auto w, auto r) {
    return tessel::sum(tessel::convert_element_type<float>(tessel::conv_general<stride<2, 2>, padding::same>(x, w) * r));
  })(x, w, r);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(dw)>, tensor<tessel::bfloat16, shape<3, 3, 16, 8>>>);
  const auto dw32 = tessel::grad<1>([](auto x, auto w, auto r) {
    return tessel::sum(tessel::conv_general<stride<2, 2>, padding::same>(x, w) * r);
  })(x.astype<float>(), w.astype<float>(), r.astype<float>());
  for (std::size_t i = 0; i < dw.size; ++i) EXPECT_NEAR(static_cast<float>(dw[i]), dw32[i], std::abs(dw32[i]) / 64 + 1e-2) << i;
}

TEST(Conv, FusedBiasAndRelu) {
  const auto x = random_tensor<float, shape<3, 10, 10, 4>>(47);
  const auto w = random_tensor<float, shape<3, 3, 4, 6>>(48);
  const auto b = random_tensor<float, shape<6>>(49);
  const auto y = jit(
      [](auto x, auto w, auto b) { return tessel::relu(tessel::conv_general<stride<1, 1>, padding::same>(x, w) + b); })(x, w, b);
  const conv_spec s{3, 10, 10, 4, 3, 3, 6, 1, 1, 1, 1, same_axis(10, 3, 1), same_axis(10, 3, 1)};
  std::vector<double> want = reference_conv(s, doubles(x), doubles(w));
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, want[i] + b[i % 6]);
  EXPECT_TRUE(near(y, want, 1e-5, 1e-5));
}

// ---- pooling ---------------------------------------------------------------------------------------

struct pool_spec {
  std::size_t n, h, w, c, kh, kw, sh, sw;
  axis_rule ah, aw;
};

enum class pool_kind { max, sum, avg_window, avg_valid };

std::vector<double> reference_pool(const pool_spec& s, const std::vector<double>& x, pool_kind kind) {
  std::vector<double> y(s.n * s.ah.out * s.aw.out * s.c);
  for (std::size_t n = 0; n < s.n; ++n)
    for (std::size_t i = 0; i < s.ah.out; ++i)
      for (std::size_t j = 0; j < s.aw.out; ++j)
        for (std::size_t c = 0; c < s.c; ++c) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          std::size_t count = 0;
          for (std::size_t a = 0; a < s.kh; ++a)
            for (std::size_t b = 0; b < s.kw; ++b) {
              const long p = static_cast<long>(i * s.sh + a) - s.ah.lo, q = static_cast<long>(j * s.sw + b) - s.aw.lo;
              if (p < 0 || q < 0 || p >= static_cast<long>(s.h) || q >= static_cast<long>(s.w)) continue;
              const double v = x[((n * s.h + static_cast<std::size_t>(p)) * s.w + static_cast<std::size_t>(q)) * s.c + c];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          double r = best;
          if (kind == pool_kind::sum) r = sum;
          if (kind == pool_kind::avg_window) r = sum / static_cast<double>(s.kh * s.kw);
          if (kind == pool_kind::avg_valid) r = sum / static_cast<double>(count);
          y[((n * s.ah.out + i) * s.aw.out + j) * s.c + c] = r;
        }
  return y;
}

template <class T, std::size_t N, std::size_t H, std::size_t W, std::size_t C, class Window, class Strides, class Padding>
void check_pools(const pool_spec& s, double tol) {
  const auto x = random_tensor<float, shape<N, H, W, C>>(51).template astype<T>();
  const auto xd = doubles(x);
  const auto mx = jit([](auto x) { return tessel::max_pool<Window, Strides, Padding>(x); })(x);
  const auto sm = jit([](auto x) { return tessel::sum_pool<Window, Strides, Padding>(x); })(x);
  const auto aw = jit([](auto x) { return tessel::avg_pool<Window, Strides, Padding>(x); })(x);
  const auto av = jit([](auto x) { return tessel::avg_pool<Window, Strides, Padding, false>(x); })(x);
  EXPECT_TRUE(near(mx, reference_pool(s, xd, pool_kind::max), 0, 0)) << "max_pool";
  EXPECT_TRUE(near(sm, reference_pool(s, xd, pool_kind::sum), tol, tol)) << "sum_pool";
  EXPECT_TRUE(near(aw, reference_pool(s, xd, pool_kind::avg_window), tol, tol)) << "avg_pool counting padding";
  EXPECT_TRUE(near(av, reference_pool(s, xd, pool_kind::avg_valid), tol, tol)) << "avg_pool over inputs only";
}

TEST(Pool, Values) {
  check_pools<float, 2, 8, 8, 3, window<2, 2>, stride<2, 2>, padding::valid>(
      {2, 8, 8, 3, 2, 2, 2, 2, valid_axis(8, 2, 2), valid_axis(8, 2, 2)}, 1e-6);
  check_pools<float, 2, 7, 9, 4, window<3, 3>, stride<2, 2>, padding::same>(
      {2, 7, 9, 4, 3, 3, 2, 2, same_axis(7, 3, 2), same_axis(9, 3, 2)}, 1e-6);
  check_pools<float, 1, 6, 5, 2, window<3, 2>, stride<1, 1>, padding::same>(
      {1, 6, 5, 2, 3, 2, 1, 1, same_axis(6, 3, 1), same_axis(5, 2, 1)}, 1e-6);
  check_pools<float, 2, 5, 6, 3, window<2, 3>, stride<1, 2>, padding::explicit_pads<1, 1, 2, 0>>(
      {2, 5, 6, 3, 2, 3, 1, 2, explicit_axis(5, 2, 1, 1, 1), explicit_axis(6, 3, 2, 2, 0)}, 1e-6);
}

TEST(Pool, Bf16) {
  // max is exact; sums are one bf16 rounding of an f32 sum.
  check_pools<tessel::bfloat16, 2, 7, 9, 4, window<3, 3>, stride<2, 2>, padding::same>(
      {2, 7, 9, 4, 3, 3, 2, 2, same_axis(7, 3, 2), same_axis(9, 3, 2)}, 1.0 / 128);
}

TEST(Pool, ConvThenPoolPipeline) {
  // The Fashion-MNIST block: conv (SAME) + bias + relu, 2x2 max pool; checked against the references.
  const auto x = random_tensor<float, shape<2, 12, 12, 1>>(52);
  const auto w = random_tensor<float, shape<3, 3, 1, 8>>(53);
  const auto b = random_tensor<float, shape<8>>(54);
  const auto y = jit([](auto x, auto w, auto b) {
    return tessel::max_pool<window<2, 2>, stride<2, 2>, padding::valid>(
        tessel::relu(tessel::conv_general<stride<1, 1>, padding::same>(x, w) + b));
  })(x, w, b);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>, tensor<float, shape<2, 6, 6, 8>>>);
  const conv_spec s{2, 12, 12, 1, 3, 3, 8, 1, 1, 1, 1, same_axis(12, 3, 1), same_axis(12, 3, 1)};
  std::vector<double> act = reference_conv(s, doubles(x), doubles(w));
  for (std::size_t i = 0; i < act.size(); ++i) act[i] = std::max(0.0, act[i] + b[i % 8]);
  const pool_spec p{2, 12, 12, 8, 2, 2, 2, 2, valid_axis(12, 2, 2), valid_axis(12, 2, 2)};
  EXPECT_TRUE(near(y, reference_pool(p, act, pool_kind::max), 1e-5, 1e-5));
}

}  // namespace
