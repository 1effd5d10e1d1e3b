// conv_general (both operands) and pooling: grad and jvp against finite differences of double
// references; second order through the derivative primitives' own rules; max_pool's tie rule.
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "gradcheck.hpp"

namespace {
using tessel::dilation;
using tessel::shape;
using tessel::stride;
using tessel::tensor;
using tessel::window;
using tessel::testing::check_gradient;
using tessel::testing::random_tensor;
using V = std::vector<std::vector<double>>;
namespace padding = tessel::padding;

// A windowed op's geometry, written out by hand for each case: sizes, strides, dilations, low padding.
struct geom {
  std::size_t n, h, w, c, kh, kw, o, oh, ow, sh, sw, dh, dw;
  long ph, pw;
};

// Calls f(x index, w index, y index) for every term of the convolution sum.
template <class F>
void for_each_term(const geom& g, F f) {
  for (std::size_t n = 0; n < g.n; ++n)
    for (std::size_t i = 0; i < g.oh; ++i)
      for (std::size_t j = 0; j < g.ow; ++j)
        for (std::size_t a = 0; a < g.kh; ++a)
          for (std::size_t b = 0; b < g.kw; ++b) {
            const long p = static_cast<long>(i * g.sh + a * g.dh) - g.ph, q = static_cast<long>(j * g.sw + b * g.dw) - g.pw;
            if (p < 0 || q < 0 || p >= static_cast<long>(g.h) || q >= static_cast<long>(g.w)) continue;
            for (std::size_t c = 0; c < g.c; ++c)
              for (std::size_t o = 0; o < g.o; ++o)
                f(((n * g.h + static_cast<std::size_t>(p)) * g.w + static_cast<std::size_t>(q)) * g.c + c,
                  ((a * g.kw + b) * g.c + c) * g.o + o, ((n * g.oh + i) * g.ow + j) * g.o + o);
          }
}

std::vector<double> conv(const geom& g, const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> y(g.n * g.oh * g.ow * g.o, 0.0);
  for_each_term(g, [&](std::size_t xi, std::size_t wi, std::size_t yi) { y[yi] += x[xi] * w[wi]; });
  return y;
}

// sum(tanh(conv(x, w)) * r)
double tanh_conv_loss(const geom& g, const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& r) {
  const std::vector<double> y = conv(g, x, w);
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += std::tanh(y[i]) * r[i];
  return s;
}

template <class Strides, class Padding, class Dilation = dilation<1, 1>>
struct tanh_conv {
  constexpr auto operator()(auto x, auto w, auto r) const {
    return tessel::sum(tessel::tanh(tessel::conv_general<Strides, Padding, Dilation>(x, w)) * r);
  }
};
template <class Strides, class Padding, class Dilation = dilation<1, 1>>
struct tanh_conv_by_filter {  // the filter first: check_gradient differentiates argument 0
  constexpr auto operator()(auto w, auto x, auto r) const { return tanh_conv<Strides, Padding, Dilation>{}(x, w, r); }
};

template <std::size_t N, std::size_t H, std::size_t W, std::size_t C, std::size_t KH, std::size_t KW, std::size_t O,
          class Strides, class Padding, class Dilation = dilation<1, 1>>
void check_conv(const geom& g) {
  const auto x = random_tensor<float, shape<N, H, W, C>>(61);
  const auto w = random_tensor<float, shape<KH, KW, C, O>>(62, -0.5, 0.5);
  using Y = decltype(tessel::jit([](auto x, auto w) { return tessel::conv_general<Strides, Padding, Dilation>(x, w); })(x, w));
  ASSERT_EQ(Y::shape_type::dims[1], g.oh);
  ASSERT_EQ(Y::shape_type::dims[2], g.ow);
  const auto r = random_tensor<float, typename Y::shape_type>(63);
  check_gradient(
      tanh_conv<Strides, Padding, Dilation>{}, [g](const V& v) { return tanh_conv_loss(g, v[0], v[1], v[2]); }, x, w, r);
  check_gradient(
      tanh_conv_by_filter<Strides, Padding, Dilation>{}, [g](const V& v) { return tanh_conv_loss(g, v[1], v[0], v[2]); }, w, x,
      r);
}

TEST(ConvGrad, BothOperands) {
  //                                                     n  h  w  c kh kw  o oh ow sh sw dh dw ph pw
  check_conv<2, 5, 5, 2, 3, 3, 3, stride<1, 1>, padding::same>({2, 5, 5, 2, 3, 3, 3, 5, 5, 1, 1, 1, 1, 1, 1});
  check_conv<2, 7, 6, 2, 3, 2, 3, stride<2, 2>, padding::valid>({2, 7, 6, 2, 3, 2, 3, 3, 3, 2, 2, 1, 1, 0, 0});
  // SAME with stride 2 and an even filter: total padding 2 along H (1 before), 1 along W (0 before).
  check_conv<1, 6, 5, 3, 4, 2, 2, stride<2, 2>, padding::same>({1, 6, 5, 3, 4, 2, 2, 3, 3, 2, 2, 1, 1, 1, 0});
  check_conv<1, 7, 7, 2, 2, 2, 2, stride<1, 1>, padding::same, dilation<2, 2>>({1, 7, 7, 2, 2, 2, 2, 7, 7, 1, 1, 2, 2, 1, 1});
  check_conv<2, 5, 6, 1, 3, 3, 2, stride<1, 2>, padding::explicit_pads<2, 0, 1, 1>>(
      {2, 5, 6, 1, 3, 3, 2, 5, 3, 1, 2, 1, 1, 2, 1});
}

// Second order: the loss is <grad_x sum(sin(conv(x, w))), q> = <conv_input_grad(cos(conv(x, w)), w), q>,
// differentiated with respect to w (conv_input_grad's and conv's VJP and JVP rules).
struct conv_second_order {
  constexpr auto operator()(auto w, auto x, auto q) const {
    const auto dx = tessel::grad<0>(
        [](auto x, auto w) { return tessel::sum(tessel::sin(tessel::conv_general<stride<2, 1>, padding::same>(x, w))); })(x, w);
    return tessel::sum(dx * q);
  }
};

TEST(ConvGrad, SecondOrder) {
  const geom g{2, 5, 4, 2, 3, 3, 2, 3, 4, 2, 1, 1, 1, 1, 1};
  const auto w = random_tensor<float, shape<3, 3, 2, 2>>(64, -0.5, 0.5);
  const auto x = random_tensor<float, shape<2, 5, 4, 2>>(65);
  const auto q = random_tensor<float, shape<2, 5, 4, 2>>(66);
  check_gradient(
      conv_second_order{},
      [g](const V& v) {
        const std::vector<double> y = conv(g, v[1], v[0]);
        double s = 0;
        for_each_term(g, [&](std::size_t xi, std::size_t wi, std::size_t yi) { s += std::cos(y[yi]) * v[0][wi] * v[2][xi]; });
        return s;
      },
      w, x, q);
}

// ---- pooling ---------------------------------------------------------------------------------------

enum class pool_kind { max, sum, avg_window, avg_valid };

// Calls f(output index, list of input indices) per output element and channel.
template <class F>
void for_each_window(const geom& g, F f) {
  std::vector<std::size_t> members;
  for (std::size_t n = 0; n < g.n; ++n)
    for (std::size_t i = 0; i < g.oh; ++i)
      for (std::size_t j = 0; j < g.ow; ++j)
        for (std::size_t c = 0; c < g.c; ++c) {
          members.clear();
          for (std::size_t a = 0; a < g.kh; ++a)
            for (std::size_t b = 0; b < g.kw; ++b) {
              const long p = static_cast<long>(i * g.sh + a) - g.ph, q = static_cast<long>(j * g.sw + b) - g.pw;
              if (p < 0 || q < 0 || p >= static_cast<long>(g.h) || q >= static_cast<long>(g.w)) continue;
              members.push_back(((n * g.h + static_cast<std::size_t>(p)) * g.w + static_cast<std::size_t>(q)) * g.c + c);
            }
          f(((n * g.oh + i) * g.ow + j) * g.c + c, members);
        }
}

std::vector<double> pool(const geom& g, const std::vector<double>& x, pool_kind kind) {
  std::vector<double> y(g.n * g.oh * g.ow * g.c);
  for_each_window(g, [&](std::size_t o, const std::vector<std::size_t>& m) {
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    for (std::size_t i : m) best = std::max(best, x[i]), sum += x[i];
    y[o] = kind == pool_kind::max          ? best
           : kind == pool_kind::sum        ? sum
           : kind == pool_kind::avg_window ? sum / static_cast<double>(g.kh * g.kw)
                                           : sum / static_cast<double>(m.size());
  });
  return y;
}

template <pool_kind Kind, class Window, class Strides, class Padding>
constexpr auto pool_op(auto x) {
  if constexpr (Kind == pool_kind::max)
    return tessel::max_pool<Window, Strides, Padding>(x);
  else if constexpr (Kind == pool_kind::sum)
    return tessel::sum_pool<Window, Strides, Padding>(x);
  else
    return tessel::avg_pool<Window, Strides, Padding, Kind == pool_kind::avg_window>(x);
}

template <pool_kind Kind, class Window, class Strides, class Padding>
struct sin_pool {
  constexpr auto operator()(auto x, auto r) const {
    return tessel::sum(tessel::sin(pool_op<Kind, Window, Strides, Padding>(x)) * r);
  }
};

template <pool_kind Kind, class Window, class Strides, class Padding, class X>
void check_pool(const geom& g, const X& x) {
  using Y = decltype(tessel::jit([](auto x) { return pool_op<Kind, Window, Strides, Padding>(x); })(x));
  ASSERT_EQ(Y::shape_type::dims[1], g.oh);
  ASSERT_EQ(Y::shape_type::dims[2], g.ow);
  const auto r = random_tensor<float, typename Y::shape_type>(72);
  check_gradient(
      sin_pool<Kind, Window, Strides, Padding>{},
      [g](const V& v) {
        const std::vector<double> y = pool(g, v[0], Kind);
        double s = 0;
        for (std::size_t i = 0; i < y.size(); ++i) s += std::sin(y[i]) * v[1][i];
        return s;
      },
      x, r);
}

template <class Window, class Strides, class Padding, class X>
void check_pools(const geom& g, const X& x) {
  check_pool<pool_kind::max, Window, Strides, Padding>(g, x);
  check_pool<pool_kind::sum, Window, Strides, Padding>(g, x);
  check_pool<pool_kind::avg_window, Window, Strides, Padding>(g, x);
  check_pool<pool_kind::avg_valid, Window, Strides, Padding>(g, x);
}

TEST(PoolGrad, MaxSumAvg) {
  const auto x = random_tensor<float, shape<2, 6, 6, 3>>(71, -2.0, 2.0);  // distinct values: no ties
  //                                                 n  h  w  c kh kw  o oh ow sh sw dh dw ph pw
  check_pools<window<2, 2>, stride<2, 2>, padding::valid>({2, 6, 6, 3, 2, 2, 0, 3, 3, 2, 2, 1, 1, 0, 0}, x);
  check_pools<window<3, 3>, stride<2, 2>, padding::same>({2, 6, 6, 3, 3, 3, 0, 3, 3, 2, 2, 1, 1, 0, 0}, x);
  check_pools<window<3, 2>, stride<1, 1>, padding::same>({2, 6, 6, 3, 3, 2, 0, 6, 6, 1, 1, 1, 1, 1, 0}, x);
  check_pools<window<2, 3>, stride<1, 2>, padding::explicit_pads<1, 0, 1, 1>>({2, 6, 6, 3, 2, 3, 0, 6, 3, 1, 2, 1, 1, 1, 1}, x);
}

// Second order: <grad_x sum(pool(x)^2 * r / 2), q> = <pool^T(pool(x) * r), q>, differentiated in x: the
// VJP and JVP of select_and_scatter_add (max) and of reduce_window_sum_transpose (avg).
template <pool_kind Kind>
struct pool_second_order {
  constexpr auto operator()(auto x, auto r, auto q) const {
    const auto dx = tessel::grad<0>([](auto x, auto r) {
      const auto y = pool_op<Kind, window<3, 3>, stride<2, 2>, padding::same>(x);
      return tessel::sum(y * y * r * 0.5f);
    })(x, r);
    return tessel::sum(dx * q);
  }
};

TEST(PoolGrad, SecondOrder) {
  const geom g{2, 6, 5, 2, 3, 3, 0, 3, 3, 2, 2, 1, 1, 0, 1};
  const auto x = random_tensor<float, shape<2, 6, 5, 2>>(73, -2.0, 2.0);
  const auto r = random_tensor<float, shape<2, 3, 3, 2>>(74);
  const auto q = random_tensor<float, shape<2, 6, 5, 2>>(75);
  check_gradient(
      pool_second_order<pool_kind::max>{},
      [g](const V& v) {  // sum over windows of y * r * q[argmax]
        double s = 0;
        for_each_window(g, [&](std::size_t o, const std::vector<std::size_t>& m) {
          std::size_t best = m[0];
          for (std::size_t i : m) best = v[0][i] > v[0][best] ? i : best;
          s += v[0][best] * v[1][o] * v[2][best];
        });
        return s;
      },
      x, r, q);
  check_gradient(
      pool_second_order<pool_kind::avg_window>{},
      [g](const V& v) {  // <y * r, avg(q)>
        const std::vector<double> y = pool(g, v[0], pool_kind::avg_window), aq = pool(g, v[2], pool_kind::avg_window);
        double s = 0;
        for (std::size_t o = 0; o < y.size(); ++o) s += y[o] * v[1][o] * aq[o];
        return s;
      },
      x, r, q);
}

// Ties go to the window's first maximum (row-major), as XLA's select_and_scatter with `ge`; padding
// (SAME) never receives anything.
TEST(PoolGrad, MaxTiesGoToTheFirst) {
  tensor<float, shape<1, 3, 3, 1>> x;
  for (std::size_t i = 0; i < 9; ++i) x[i] = 1.0f;
  x[8] = -1.0f;
  // The cotangent comes from an argument: a constant one would be an inline constant, which the planner
  // does not yet materialise for whole-buffer kernels.
  tensor<float, shape<1, 2, 2, 1>> ones;
  for (std::size_t i = 0; i < 4; ++i) ones[i] = 1.0f;
  const auto dx = tessel::grad(
      [](auto x, auto r) { return tessel::sum(tessel::max_pool<window<2, 2>, stride<1, 1>, padding::valid>(x) * r); })(x, ones);
  // Four windows, all of max 1; each one's first element: (0,0), (0,1), (1,0), (1,1).
  const float want[9] = {1, 1, 0, 1, 1, 0, 0, 0, 0};
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(dx[i], want[i]) << i;
  const auto ds = tessel::grad(
      [](auto x, auto r) { return tessel::sum(tessel::max_pool<window<2, 2>, stride<2, 2>, padding::same>(x) * r); })(x, ones);
  // SAME on 3: windows start at 0 and 2 (no low padding); the right and bottom windows are partial.
  const float want_same[9] = {1, 0, 1, 0, 0, 0, 1, 0, 1};
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(ds[i], want_same[i]) << i;
}

// The max-pool kernels against a scalar reference, for f32 and bf16 and odd channel counts: the JVP
// (select_and_gather_add) takes the tangent at each window's choice, the VJP (select_and_scatter_add)
// adds the cotangent there; the choice is XLA's `ge` select (the first element, then each later one the
// choice is not >= to). Inputs from {-1, 0, 0.5, 1} make ties common, 3x2 windows by 2 overlap in rows,
// and the first output row's windows lie wholly in the padding (they select nothing). The tangents and
// cotangents are eighths, so every sum is exact in f32 and in bf16: equality is expected.
template <class Padding>
struct max_pool_3x2_by_2 {
  constexpr auto operator()(auto x) const { return tessel::max_pool<window<3, 2>, stride<2, 2>, Padding>(x); }
};

template <class T, std::size_t C>
void check_max_pool_select() {
  constexpr std::size_t N = 2, H = 5, W = 7, KH = 3, KW = 2, S = 2, LoH = 3, LoW = 1;
  using Pool = tessel::padding::explicit_pads<LoH, 1, LoW, 0>;
  constexpr std::size_t OH = (H + LoH + 1 - KH) / S + 1, OW = (W + LoW - KW) / S + 1;
  tensor<T, shape<N, H, W, C>> x, t;
  tensor<T, shape<N, OH, OW, C>> ct;
  std::uint32_t state = 12345;
  const auto next = [&state] { return (state = state * 1664525u + 1013904223u) >> 8; };
  const float levels[4] = {-1.0f, 0.0f, 0.5f, 1.0f};
  for (std::size_t i = 0; i < x.size; ++i) x[i] = T(levels[next() % 4]);
  for (std::size_t i = 0; i < t.size; ++i) t[i] = T(static_cast<float>(static_cast<int>(next() % 17) - 8) / 8.0f);
  for (std::size_t i = 0; i < ct.size; ++i) ct[i] = T(static_cast<float>(static_cast<int>(next() % 17) - 8) / 8.0f);

  using pool = max_pool_3x2_by_2<Pool>;
  const auto y_t = tessel::jit([](auto x, auto t) { return std::get<1>(tessel::jvp(pool{}, std::make_tuple(x), std::make_tuple(t))); })(x, t);
  const auto dx = tessel::jit([](auto x, auto ct) {
    return tessel::grad<0>([](auto x, auto ct) { return tessel::sum(pool{}(x) * ct); })(x, ct);
  })(x, ct);

  std::vector<double> want_t(y_t.size, 0.0), want_dx(dx.size, 0.0);
  std::size_t empty = 0;
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t i = 0; i < OH; ++i)
      for (std::size_t j = 0; j < OW; ++j)
        for (std::size_t k = 0; k < C; ++k) {
          long best = -1;
          for (std::size_t a = 0; a < KH; ++a)
            for (std::size_t b = 0; b < KW; ++b) {
              const long p = static_cast<long>(i * S + a) - static_cast<long>(LoH), q = static_cast<long>(j * S + b) - static_cast<long>(LoW);
              if (p < 0 || q < 0 || p >= static_cast<long>(H) || q >= static_cast<long>(W)) continue;
              const long at = ((static_cast<long>(n) * static_cast<long>(H) + p) * static_cast<long>(W) + q) * static_cast<long>(C) + static_cast<long>(k);
              if (best < 0 || !(static_cast<float>(x[static_cast<std::size_t>(best)]) >= static_cast<float>(x[static_cast<std::size_t>(at)]))) best = at;
            }
          const std::size_t o = ((n * OH + i) * OW + j) * C + k;
          if (best < 0) {
            ++empty;
            continue;
          }
          want_t[o] = static_cast<float>(t[static_cast<std::size_t>(best)]);
          want_dx[static_cast<std::size_t>(best)] += static_cast<float>(ct[o]);
        }
  EXPECT_EQ(empty, N * OW * C) << "the first output row's windows are all padding";
  for (std::size_t o = 0; o < y_t.size; ++o) ASSERT_EQ(static_cast<double>(static_cast<float>(y_t[o])), want_t[o]) << "JVP at " << o;
  for (std::size_t i = 0; i < dx.size; ++i) ASSERT_EQ(static_cast<double>(static_cast<float>(dx[i])), want_dx[i]) << "VJP at " << i;
}

TEST(PoolGrad, MaxPoolSelectsAsTheScalarRule) {
  check_max_pool_select<float, 1>();
  check_max_pool_select<float, 7>();
  check_max_pool_select<float, 17>();
  check_max_pool_select<tessel::bfloat16, 1>();
  check_max_pool_select<tessel::bfloat16, 7>();
  check_max_pool_select<tessel::bfloat16, 17>();
}

}  // namespace
