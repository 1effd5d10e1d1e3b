#pragma once
// Pooling (lax.reduce_window over the spatial axes of NHWC images): x [N, H, W, C] -> y [N, OH, OW, C],
// each output the max, sum or mean of a KH x KW window moved by strides, with the padding rules of
// conv_general (padding::same, padding::valid, padding::explicit_pads; OH as there, with the window
// in place of the filter).
//
//   max_pool<window<2, 2>, stride<2, 2>, padding::valid>(x)   // f32[8,28,28,32] -> f32[8,14,14,32]
//   avg_pool<window<3, 3>, stride<1, 1>, padding::same>(x)    // f32[8,28,28,32] -> f32[8,28,28,32]
//
// max_pool: padding never wins (it is -inf, as in flax and XLA). Its VJP sends each cotangent to the
// window's first maximum (XLA's select_and_scatter with `ge`: a later element is chosen only when the
// current choice is not >= it); its JVP reads the tangent there.
// avg_pool<..., CountIncludePad = true>: with padding, divides by the whole window (flax.linen.avg_pool's
// default, count_include_pad=True; padded zeros count); with false, by the number of input elements in
// the window (jax.example_libraries.stax.AvgPool, PyTorch's count_include_pad=False).
// sum_pool: the window sums. f32 and bf16 (computed in f32; the result has the operand's dtype).
//
// Layout kernels, run in work items the executor threads, like conv_general's.
// Primitives (lax's names): reduce_window_max, with select_and_scatter_add (its VJP) and
// select_and_gather_add (its JVP), which transpose into each other; reduce_window_sum (scaled by the
// divisor rule, so avg_pool is one node) and its transpose. Derivatives of any order exist.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "tessel/core/bfloat16.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/prim/conv_general.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {

// Pooling window extent along (height, width).
template <std::size_t H, std::size_t W>
struct window {
  static constexpr std::array<std::size_t, 2> values{H, W};
};

template <class T>
inline constexpr bool is_window_v = false;
template <std::size_t H, std::size_t W>
inline constexpr bool is_window_v<window<H, W>> = true;
template <class W>
concept WindowRule = is_window_v<W>;

namespace prim {

// attr: [KH, KW, SH, SW, PH_lo, PW_lo, PH_hi, PW_hi, divisor]; divisor (reduce_window_sum only) is one
// of pool_divisor.
enum class pool_divisor : std::int64_t { none = 0, window = 1, valid = 2 };

struct pool_geometry {
  std::size_t n = 0, h = 0, w = 0, c = 0;
  std::size_t kh = 1, kw = 1, sh = 1, sw = 1;
  std::size_t oh = 0, ow = 0;
  std::ptrdiff_t ph = 0, pw = 0;
  pool_divisor divisor = pool_divisor::none;
};

constexpr pool_geometry pool_geometry_of(const ir::dims& x, const ir::dims& y, const ir::attributes& a) {
  pool_geometry g;
  g.n = x.d[0], g.h = x.d[1], g.w = x.d[2], g.c = x.d[3];
  g.oh = y.d[1], g.ow = y.d[2];
  g.kh = static_cast<std::size_t>(a.ints[0]), g.kw = static_cast<std::size_t>(a.ints[1]);
  g.sh = static_cast<std::size_t>(a.ints[2]), g.sw = static_cast<std::size_t>(a.ints[3]);
  g.ph = static_cast<std::ptrdiff_t>(a.ints[4]), g.pw = static_cast<std::ptrdiff_t>(a.ints[5]);
  g.divisor = static_cast<pool_divisor>(a.ints[8]);
  return g;
}

constexpr ir::dims pool_output_shape(const ir::dims& x, const ir::attributes& a) {
  ir::dims out = x;
  for (std::size_t i = 0; i < 2; ++i) {
    const auto k = static_cast<std::size_t>(a.ints[i]), s = static_cast<std::size_t>(a.ints[2 + i]);
    out.d[1 + i] = windowed_size(x.d[1 + i], a.ints[4 + i], a.ints[6 + i], k, s);
  }
  return out;
}

// The pooling kernels, threaded by the executor in work items (ir::item_plan): blocks of output rows for
// the pooled-shape results, blocks of images for the input-shaped (scatter) ones. Declared here and
// defined below only where TESSEL_IMPLEMENTATION is (the tessel library), so the window loops for each
// dtype are compiled once. operands: x (reduce_window_max, reduce_window_sum); t, x
// (select_and_gather_add); ct, x (select_and_scatter_add); ct (reduce_window_sum_transpose).
ir::item_plan reduce_window_max_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t cache_bytes);
void reduce_window_max_item(const ir::item_args& args, const ir::item_plan& plan, std::size_t item);
ir::item_plan select_and_gather_add_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t cache_bytes);
void select_and_gather_add_item(const ir::item_args& args, const ir::item_plan& plan, std::size_t item);
ir::item_plan select_and_scatter_add_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t cache_bytes);
void select_and_scatter_add_item(const ir::item_args& args, const ir::item_plan& plan, std::size_t item);
ir::item_plan reduce_window_sum_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t cache_bytes);
void reduce_window_sum_item(const ir::item_args& args, const ir::item_plan& plan, std::size_t item);
ir::item_plan reduce_window_sum_transpose_items(const ir::node& n, const ir::node* const* operands, std::size_t threads,
                                                std::size_t cache_bytes);
void reduce_window_sum_transpose_item(const ir::item_args& args, const ir::item_plan& plan, std::size_t item);

#ifdef TESSEL_IMPLEMENTATION
namespace pool_detail {

// The input rows [a0, a1) and columns [b0, b1) of output pixel (i, j)'s window, as image positions.
struct window_span {
  std::size_t a0, a1, b0, b1;
  std::size_t count() const { return (a1 - a0) * (b1 - b0); }
};
inline window_span span_of(const pool_geometry& g, std::size_t i, std::size_t j) {
  const std::ptrdiff_t top = static_cast<std::ptrdiff_t>(i * g.sh) - g.ph, left = static_cast<std::ptrdiff_t>(j * g.sw) - g.pw;
  std::size_t ta0, ta1, tb0, tb1;
  conv_detail::valid_taps(top, 1, g.kh, g.h, ta0, ta1);
  conv_detail::valid_taps(left, 1, g.kw, g.w, tb0, tb1);
  const auto at = [](std::ptrdiff_t origin, std::size_t tap) {
    return static_cast<std::size_t>(origin + static_cast<std::ptrdiff_t>(tap));
  };
  if (ta1 == ta0 || tb1 == tb0) return {0, 0, 0, 0};
  return {at(top, ta0), at(top, ta1), at(left, tb0), at(left, tb1)};
}

inline float divisor_of(const pool_geometry& g, const window_span& s) {
  switch (g.divisor) {
    case pool_divisor::window:
      return static_cast<float>(g.kh * g.kw);
    case pool_divisor::valid:
      return s.count() == 0 ? 1.0f : static_cast<float>(s.count());
    default:
      return 1.0f;
  }
}

// Visits the window's valid elements in row-major order: f(t, offset), t counting from 0, offset the
// element's first channel in the input (image n).
template <class F>
void for_taps(const pool_geometry& g, std::size_t n, const window_span& s, F f) {
  std::uint32_t t = 0;
  for (std::size_t a = s.a0; a < s.a1; ++a)
    for (std::size_t b = s.b0; b < s.b1; ++b, ++t) f(t, ((n * g.h + a) * g.w + b) * g.c);
}

// For every channel of a window that holds input (s.count() > 0): the selected element's value and tap
// (its t in for_taps). XLA's `ge` select: the first element, then each later one the choice so far is
// not >= (NaN included). Branch-free, and the taps 32-bit like the values, so the channel loop
// vectorizes at full width; gather and scatter then find the choice with one compare per tap.
template <class T>
void select(const pool_geometry& g, const T* x, std::size_t n, const window_span& s, float* best, std::uint32_t* tap) {
  for_taps(g, n, s, [&](std::uint32_t t, std::size_t offset) {
    const T* p = x + offset;
    if (t == 0) {
      for (std::size_t k = 0; k < g.c; ++k) best[k] = static_cast<float>(p[k]), tap[k] = 0;
      return;
    }
    for (std::size_t k = 0; k < g.c; ++k) {
      const float v = static_cast<float>(p[k]);
      const bool take = !(best[k] >= v);
      best[k] = take ? v : best[k];
      tap[k] = take ? t : tap[k];
    }
  });
}

template <class T>
void put(T* out, std::size_t i, float v) {
  if constexpr (std::is_same_v<T, float>)
    out[i] = v;
  else
    out[i] = T(v);
}

// One item of a kernel: which, of what plan, with its thread's scratch.
struct item_ref {
  const ir::item_plan& plan;
  std::size_t item;
  float* scratch;
};

// Output-shaped kernels: items of output rows (n, i), about 4096 outputs each; scratch for one pixel's
// channels (the best values and their taps).
inline ir::item_plan output_rows_plan(const pool_geometry& g) {
  const std::size_t rows = g.n * g.oh;
  const std::size_t per_item = std::max<std::size_t>(1, 4096 / std::max<std::size_t>(g.ow * g.c, 1));
  return {.items = (rows + per_item - 1) / per_item, .per_item = per_item, .scratch_floats = 2 * ir::aligned_floats(g.c)};
}
template <class Body>
void for_output_rows(const pool_geometry& g, const item_ref& r, Body body) {
  const std::size_t rows = g.n * g.oh, first = r.item * r.plan.per_item, last = std::min(rows, first + r.plan.per_item);
  float* best = r.scratch;
  auto* tap = reinterpret_cast<std::uint32_t*>(r.scratch + ir::aligned_floats(g.c));
  for (std::size_t row = first; row < last; ++row) body(row / g.oh, row % g.oh, best, tap);
}

// Input-shaped (scatter) kernels: items of images, a few per thread, each accumulated in f32 in scratch.
inline ir::item_plan images_plan(const pool_geometry& g, std::size_t threads) {
  const std::size_t per_item = std::max<std::size_t>(1, g.n / (4 * std::max<std::size_t>(threads, 1)));
  return {.items = (g.n + per_item - 1) / per_item,
          .per_item = per_item,
          .scratch_floats = ir::aligned_floats(g.h * g.w * g.c) + 2 * ir::aligned_floats(g.c)};
}
template <class T, class Body>
void for_images(const pool_geometry& g, const item_ref& r, T* out, Body body) {
  const std::size_t image = g.h * g.w * g.c, first = r.item * r.plan.per_item, last = std::min(g.n, first + r.plan.per_item);
  float* acc = r.scratch;
  float* best = acc + ir::aligned_floats(image);
  auto* tap = reinterpret_cast<std::uint32_t*>(best + ir::aligned_floats(g.c));
  for (std::size_t n = first; n < last; ++n) {
    std::fill(acc, acc + image, 0.0f);
    body(n, acc, best, tap);
    for (std::size_t i = 0; i < image; ++i) put(out, n * image + i, acc[i]);
  }
}

template <class T>
void max_forward(const pool_geometry& g, const item_ref& r, const T* x, T* y) {
  // select's choice without its positions: the same value (the first element, then each later one the
  // choice so far is not >= to), in one max-like pass per window element.
  for_output_rows(g, r, [&](std::size_t n, std::size_t i, float* best, std::uint32_t*) {
    for (std::size_t j = 0; j < g.ow; ++j) {
      const window_span s = span_of(g, i, j);
      T* out = y + ((n * g.oh + i) * g.ow + j) * g.c;
      if (s.count() == 0) {
        for (std::size_t k = 0; k < g.c; ++k) put(out, k, -std::numeric_limits<float>::infinity());
        continue;
      }
      const T* first = x + ((n * g.h + s.a0) * g.w + s.b0) * g.c;
      for (std::size_t k = 0; k < g.c; ++k) best[k] = static_cast<float>(first[k]);
      for (std::size_t a = s.a0; a < s.a1; ++a)
        for (std::size_t b = a == s.a0 ? s.b0 + 1 : s.b0; b < s.b1; ++b) {
          const T* p = x + ((n * g.h + a) * g.w + b) * g.c;
          for (std::size_t k = 0; k < g.c; ++k) {
            const float v = static_cast<float>(p[k]);
            best[k] = best[k] >= v ? best[k] : v;
          }
        }
      for (std::size_t k = 0; k < g.c; ++k) put(out, k, best[k]);
    }
  });
}

// y[o] = t[selected(x, o)]
template <class T>
void gather(const pool_geometry& g, const item_ref& r, const T* t, const T* x, T* y) {
  for_output_rows(g, r, [&](std::size_t n, std::size_t i, float* best, std::uint32_t* tap) {
    for (std::size_t j = 0; j < g.ow; ++j) {
      const window_span s = span_of(g, i, j);
      T* out = y + ((n * g.oh + i) * g.ow + j) * g.c;
      if (s.count() == 0) {  // a window of padding selects nothing
        for (std::size_t k = 0; k < g.c; ++k) put(out, k, 0.0f);
        continue;
      }
      select(g, x, n, s, best, tap);
      for_taps(g, n, s, [&](std::uint32_t u, std::size_t offset) {  // best becomes t at the choice
        const T* p = t + offset;
        for (std::size_t k = 0; k < g.c; ++k) best[k] = tap[k] == u ? static_cast<float>(p[k]) : best[k];
      });
      for (std::size_t k = 0; k < g.c; ++k) put(out, k, best[k]);
    }
  });
}

// dx[selected(x, o)] += ct[o]
template <class T>
void scatter(const pool_geometry& g, const item_ref& r, const T* ct, const T* x, T* dx) {
  for_images(g, r, dx, [&](std::size_t n, float* acc, float* best, std::uint32_t* tap) {
    const std::size_t image = n * g.h * g.w * g.c;
    for (std::size_t i = 0; i < g.oh; ++i)
      for (std::size_t j = 0; j < g.ow; ++j) {
        const window_span s = span_of(g, i, j);
        if (s.count() == 0) continue;
        select(g, x, n, s, best, tap);
        const T* c = ct + ((n * g.oh + i) * g.ow + j) * g.c;
        // Each tap's channels take the cotangent where they were chosen: a masked add per tap, in
        // vectors, rather than one scattered add per channel.
        for_taps(g, n, s, [&](std::uint32_t u, std::size_t offset) {
          float* d = acc + (offset - image);
          for (std::size_t k = 0; k < g.c; ++k) d[k] = tap[k] == u ? d[k] + static_cast<float>(c[k]) : d[k];
        });
      }
  });
}

// y[o] = sum of x over o's window / divisor(o)
template <class T>
void sum_forward(const pool_geometry& g, const item_ref& r, const T* x, T* y) {
  for_output_rows(g, r, [&](std::size_t n, std::size_t i, float* acc, std::uint32_t*) {
    for (std::size_t j = 0; j < g.ow; ++j) {
      const window_span s = span_of(g, i, j);
      std::fill_n(acc, g.c, 0.0f);
      for (std::size_t a = s.a0; a < s.a1; ++a)
        for (std::size_t b = s.b0; b < s.b1; ++b) {
          const T* p = x + ((n * g.h + a) * g.w + b) * g.c;
          for (std::size_t k = 0; k < g.c; ++k) acc[k] += static_cast<float>(p[k]);
        }
      const float scale = 1.0f / divisor_of(g, s);
      for (std::size_t k = 0; k < g.c; ++k) put(y, ((n * g.oh + i) * g.ow + j) * g.c + k, acc[k] * scale);
    }
  });
}

// dx[i] = sum over the windows o holding i of ct[o] / divisor(o)
template <class T>
void sum_transpose(const pool_geometry& g, const item_ref& r, const T* ct, T* dx) {
  for_images(g, r, dx, [&](std::size_t n, float* acc, float*, std::uint32_t*) {
    for (std::size_t i = 0; i < g.oh; ++i)
      for (std::size_t j = 0; j < g.ow; ++j) {
        const window_span s = span_of(g, i, j);
        const float scale = 1.0f / divisor_of(g, s);
        const T* c = ct + ((n * g.oh + i) * g.ow + j) * g.c;
        for (std::size_t a = s.a0; a < s.a1; ++a)
          for (std::size_t b = s.b0; b < s.b1; ++b) {
            float* d = acc + (a * g.w + b) * g.c;
            for (std::size_t k = 0; k < g.c; ++k) d[k] += static_cast<float>(c[k]) * scale;
          }
      }
  });
}

}  // namespace pool_detail

// operands: x.
ir::item_plan reduce_window_max_items(const ir::node& n, const ir::node* const* operands, std::size_t, std::size_t) {
  return pool_detail::output_rows_plan(pool_geometry_of(operands[0]->shape, n.shape, n.attr));
}
void reduce_window_max_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const pool_geometry g = pool_geometry_of(a.operands[0]->shape, a.n->shape, a.n->attr);
  conv_detail::typed(a.n->dtype, [&]<class T>(const T*) {
    pool_detail::max_forward(g, {plan, item, a.scratch}, static_cast<const T*>(a.in[0]), static_cast<T*>(a.out));
  });
}
// operands: t (x's shape), x; the result has the pooled shape.
ir::item_plan select_and_gather_add_items(const ir::node& n, const ir::node* const* operands, std::size_t, std::size_t) {
  return pool_detail::output_rows_plan(pool_geometry_of(operands[1]->shape, n.shape, n.attr));
}
void select_and_gather_add_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const pool_geometry g = pool_geometry_of(a.operands[1]->shape, a.n->shape, a.n->attr);
  conv_detail::typed(a.n->dtype, [&]<class T>(const T*) {
    pool_detail::gather(g, {plan, item, a.scratch}, static_cast<const T*>(a.in[0]), static_cast<const T*>(a.in[1]),
                        static_cast<T*>(a.out));
  });
}
// operands: ct (the pooled shape), x; the result has x's shape.
ir::item_plan select_and_scatter_add_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t) {
  return pool_detail::images_plan(pool_geometry_of(operands[1]->shape, operands[0]->shape, n.attr), threads);
}
void select_and_scatter_add_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const pool_geometry g = pool_geometry_of(a.operands[1]->shape, a.operands[0]->shape, a.n->attr);
  conv_detail::typed(a.n->dtype, [&]<class T>(const T*) {
    pool_detail::scatter(g, {plan, item, a.scratch}, static_cast<const T*>(a.in[0]), static_cast<const T*>(a.in[1]),
                         static_cast<T*>(a.out));
  });
}
// operands: x.
ir::item_plan reduce_window_sum_items(const ir::node& n, const ir::node* const* operands, std::size_t, std::size_t) {
  return pool_detail::output_rows_plan(pool_geometry_of(operands[0]->shape, n.shape, n.attr));
}
void reduce_window_sum_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const pool_geometry g = pool_geometry_of(a.operands[0]->shape, a.n->shape, a.n->attr);
  conv_detail::typed(a.n->dtype, [&]<class T>(const T*) {
    pool_detail::sum_forward(g, {plan, item, a.scratch}, static_cast<const T*>(a.in[0]), static_cast<T*>(a.out));
  });
}
// operands: ct (the pooled shape); the result has the pooled input's shape.
ir::item_plan reduce_window_sum_transpose_items(const ir::node& n, const ir::node* const* operands, std::size_t threads,
                                                std::size_t) {
  return pool_detail::images_plan(pool_geometry_of(n.shape, operands[0]->shape, n.attr), threads);
}
void reduce_window_sum_transpose_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const pool_geometry g = pool_geometry_of(a.n->shape, a.operands[0]->shape, a.n->attr);
  conv_detail::typed(a.n->dtype, [&]<class T>(const T*) {
    pool_detail::sum_transpose(g, {plan, item, a.scratch}, static_cast<const T*>(a.in[0]), static_cast<T*>(a.out));
  });
}
#endif  // TESSEL_IMPLEMENTATION

namespace build {

constexpr int max_pool(ir::graph_builder& g, int x, const ir::attributes& a) {
  return ir::make_node(g, reduce_window_max_p, g[x].dtype, pool_output_shape(g[x].shape, a), {x}, a);
}
constexpr int select_and_gather_add(ir::graph_builder& g, int t, int x, const ir::attributes& a) {
  return ir::make_node(g, select_and_gather_add_p, g[t].dtype, pool_output_shape(g[x].shape, a), {t, x}, a);
}
constexpr int select_and_scatter_add(ir::graph_builder& g, int ct, int x, const ir::attributes& a) {
  return ir::make_node(g, select_and_scatter_add_p, g[ct].dtype, g[x].shape, {ct, x}, a);
}
constexpr int sum_pool(ir::graph_builder& g, int x, const ir::attributes& a) {
  return ir::make_node(g, reduce_window_sum_p, g[x].dtype, pool_output_shape(g[x].shape, a), {x}, a);
}
constexpr int sum_pool_transpose(ir::graph_builder& g, int ct, const ir::attributes& a, const ir::dims& x_shape) {
  return ir::make_node(g, reduce_window_sum_transpose_p, g[ct].dtype, x_shape, {ct}, a);
}

}  // namespace build

// The selection depends on x only through comparisons, so x gets no derivative from the selecting ops.
constexpr void reduce_window_max_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = build::select_and_scatter_add(g, ct, n.operands[0], n.attr);
}
constexpr int reduce_window_max_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : build::select_and_gather_add(g, t[0], n.operands[0], n.attr);
}
constexpr void select_and_scatter_add_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = build::select_and_gather_add(g, ct, n.operands[1], n.attr);
}
constexpr int select_and_scatter_add_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : build::select_and_scatter_add(g, t[0], n.operands[1], n.attr);
}
constexpr void select_and_gather_add_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = build::select_and_scatter_add(g, ct, n.operands[1], n.attr);
}
constexpr int select_and_gather_add_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : build::select_and_gather_add(g, t[0], n.operands[1], n.attr);
}
constexpr void reduce_window_sum_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  out[0] = build::sum_pool_transpose(g, ct, n.attr, g[n.operands[0]].shape);
}
constexpr int reduce_window_sum_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  return t[0] < 0 ? -1 : build::sum_pool(g, t[0], g[node].attr);
}
constexpr void reduce_window_sum_transpose_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  out[0] = build::sum_pool(g, ct, g[node].attr);
}
constexpr int reduce_window_sum_transpose_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  return t[0] < 0 ? -1 : build::sum_pool_transpose(g, t[0], n.attr, n.shape);
}

// vmap: every operand carries the image axis N, so the batch folds into it and the node runs once.
constexpr int pool_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                         const std::array<int, ir::max_operands>& axes, int& out_axis) {
  return batching::fold_leading(g, n, ops, axes, {true, true, true}, out_axis);
}

// ---- export: stablehlo.reduce_window and select_and_scatter over (1, KH, KW, 1) windows, computed in f32
// as the kernels are (bf16 converted there and back) ----------------------------------------------------

struct hlo_window {
  std::array<std::int64_t, 4> dims{1, 1, 1, 1}, strides{1, 1, 1, 1}, lo{}, hi{};
};
inline hlo_window window_of(const ir::attributes& a) {
  hlo_window w;
  for (std::size_t i = 0; i < 2; ++i) {
    w.dims[1 + i] = a.ints[i];
    w.strides[1 + i] = a.ints[2 + i];
    w.lo[1 + i] = a.ints[4 + i];
    w.hi[1 + i] = a.ints[6 + i];
  }
  return w;
}
inline ir::hlo_properties window_properties(const hlo_window& w, bool dilations = true) {
  constexpr std::array<std::int64_t, 4> ones{1, 1, 1, 1};
  ir::hlo_properties p;
  if (dilations) p.i64s("base_dilations", ones);
  p.padding("padding", w.lo, w.hi);
  if (dilations) p.i64s("window_dilations", ones);
  return p.i64s("window_dimensions", w.dims).i64s("window_strides", w.strides);
}
// stablehlo.reduce_window of an f32 x from init by `combiner`, giving an f32 of shape `out`.
inline ir::hlo_value reduce_windows(ir::stablehlo_writer& w, const ir::hlo_value& x, double init, std::string_view combiner, const hlo_window& win,
                                    const ir::dims& out) {
  constexpr ir::dtype_code f32 = ir::dtype_code::f32;
  const std::string scalar = ir::hlo_type(f32, {});
  ir::hlo_region body{{scalar, scalar}, [&](const std::vector<ir::hlo_value>& a) {
                        return std::vector<ir::hlo_value>{w.emit(combiner, {a[0], a[1]}, {}, scalar)};
                      }};
  return w.emit("stablehlo.reduce_window", {x, w.constant(f32, init)}, window_properties(win), {ir::hlo_type(f32, out)}, {body}).front();
}
inline ir::hlo_value as_f32(ir::stablehlo_writer& w, std::size_t operand) {
  const ir::node& o = w.operand_node(operand);
  return o.dtype == ir::dtype_code::f32 ? w.operand(operand) : w.convert(w.operand(operand), ir::dtype_code::f32, o.shape);
}
inline void define_from_f32(ir::stablehlo_writer& w, const ir::hlo_value& v) {
  const ir::node& n = w.current();
  w.define(n.dtype == ir::dtype_code::f32 ? v : w.convert(v, n.dtype, n.shape));
}
// The pooled values times 1 / divisor: the window's size, or the count of its input elements (a
// reduce_window of ones over the input's shape `in`), as the kernels scale them.
inline ir::hlo_value scaled_by_divisor(ir::stablehlo_writer& w, const ir::hlo_value& pooled, const ir::dims& in, const ir::dims& out,
                                       const ir::attributes& a) {
  constexpr ir::dtype_code f32 = ir::dtype_code::f32;
  const auto divisor = static_cast<pool_divisor>(a.ints[8]);
  if (divisor == pool_divisor::none) return pooled;
  ir::hlo_value scale;
  if (divisor == pool_divisor::window) {
    scale = w.constant(f32, 1.0f / static_cast<float>(a.ints[0] * a.ints[1]), out);
  } else {
    const ir::hlo_value counts = reduce_windows(w, w.constant(f32, 1, in), 0, "stablehlo.add", window_of(a), out);
    const ir::hlo_value at_least_one = w.emit("stablehlo.maximum", {counts, w.constant(f32, 1, out)}, {}, counts.type);
    scale = w.emit("stablehlo.divide", {w.constant(f32, 1, out), at_least_one}, {}, counts.type);
  }
  return w.emit("stablehlo.multiply", {pooled, scale}, {}, pooled.type);
}

inline void lower_reduce_window_max(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  define_from_f32(w, reduce_windows(w, as_f32(w, 0), -std::numeric_limits<double>::infinity(), "stablehlo.maximum", window_of(n.attr), n.shape));
}
inline void lower_reduce_window_sum(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const ir::hlo_value sums = reduce_windows(w, as_f32(w, 0), 0, "stablehlo.add", window_of(n.attr), n.shape);
  define_from_f32(w, scaled_by_divisor(w, sums, w.operand_node(0).shape, n.shape, n.attr));
}
// The transpose of a windowed sum (JAX's): the scaled cotangent spread out by the strides and padded so
// that a stride-1 window sum over it lands on the input's elements.
inline void lower_reduce_window_sum_transpose(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const ir::node& ct = w.operand_node(0);
  const ir::hlo_value scaled = scaled_by_divisor(w, as_f32(w, 0), n.shape, ct.shape, n.attr);
  const pool_geometry g = pool_geometry_of(n.shape, ct.shape, n.attr);
  const std::array<std::size_t, 2> k{g.kh, g.kw}, s{g.sh, g.sw}, size{g.h, g.w}, out{g.oh, g.ow};
  std::array<std::int64_t, 4> lo{}, hi{}, interior{};
  ir::dims padded = ct.shape;
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t p = n.attr.ints[4 + i];
    lo[1 + i] = static_cast<std::int64_t>(k[i]) - 1 - p;
    hi[1 + i] = static_cast<std::int64_t>(size[i]) - static_cast<std::int64_t>((out[i] - 1) * s[i]) - 1 + p;
    interior[1 + i] = static_cast<std::int64_t>(s[i]) - 1;
    padded.d[1 + i] = static_cast<std::size_t>(static_cast<std::int64_t>((out[i] - 1) * s[i] + 1) + lo[1 + i] + hi[1 + i]);
  }
  constexpr ir::dtype_code f32 = ir::dtype_code::f32;
  const ir::hlo_value spread = w.emit("stablehlo.pad", {scaled, w.constant(f32, 0)},
                                      ir::hlo_properties{}.i64s("edge_padding_high", hi).i64s("edge_padding_low", lo).i64s("interior_padding", interior),
                                      ir::hlo_type(f32, padded));
  hlo_window unit;
  unit.dims = {1, n.attr.ints[0], n.attr.ints[1], 1};
  define_from_f32(w, reduce_windows(w, spread, 0, "stablehlo.add", unit, n.shape));
}
// Each cotangent to its window's first maximum (`ge`), as XLA's select_and_scatter does.
inline void lower_select_and_scatter_add(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  constexpr ir::dtype_code f32 = ir::dtype_code::f32;
  const std::string scalar = ir::hlo_type(f32, {}), pred = ir::hlo_type(ir::dtype_code::pred, {});
  ir::hlo_region select{{scalar, scalar}, [&](const std::vector<ir::hlo_value>& a) {
                          return std::vector<ir::hlo_value>{w.compare(a[0], a[1], f32, "GE", pred)};
                        }};
  ir::hlo_region scatter{{scalar, scalar}, [&](const std::vector<ir::hlo_value>& a) {
                           return std::vector<ir::hlo_value>{w.emit("stablehlo.add", {a[0], a[1]}, {}, scalar)};
                         }};
  const ir::hlo_value r = w.emit("stablehlo.select_and_scatter", {as_f32(w, 1), as_f32(w, 0), w.constant(f32, 0)},
                                 window_properties(window_of(n.attr), false), {ir::hlo_type(f32, n.shape)}, {select, scatter})
                              .front();
  define_from_f32(w, r);
}
// The tangent at each window's first maximum: a reduce_window of (x, t) pairs keeping the pair whose x is
// >= the other's (or NaN).
inline void lower_select_and_gather_add(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  constexpr ir::dtype_code f32 = ir::dtype_code::f32;
  const std::string scalar = ir::hlo_type(f32, {}), pred = ir::hlo_type(ir::dtype_code::pred, {});
  ir::hlo_region pick{{scalar, scalar, scalar, scalar}, [&](const std::vector<ir::hlo_value>& a) {
                        const ir::hlo_value first = w.emit("stablehlo.or", {w.compare(a[0], a[2], f32, "GE", pred), w.compare(a[0], a[0], f32, "NE", pred)}, {}, pred);
                        return std::vector<ir::hlo_value>{w.emit("stablehlo.select", {first, a[0], a[2]}, {}, scalar),
                                                          w.emit("stablehlo.select", {first, a[1], a[3]}, {}, scalar)};
                      }};
  const std::string out = ir::hlo_type(f32, n.shape);
  const std::vector<ir::hlo_value> r =
      w.emit("stablehlo.reduce_window",
             {as_f32(w, 1), as_f32(w, 0), w.constant(f32, -std::numeric_limits<double>::infinity()), w.constant(f32, 0)},
             window_properties(window_of(n.attr)), {out, out}, {pick});
  define_from_f32(w, r[1]);
}

inline constexpr ir::primitive reduce_window_max_p{.name = "reduce_window_max",
                                                   .kind = ir::prim_kind::layout,
                                                   .plan_items = &reduce_window_max_items,
                                                   .run_item = &reduce_window_max_item,
                                                   .vjp = &reduce_window_max_vjp,
                                                   .jvp = &reduce_window_max_jvp,
                                                   .batch = &pool_batch, .lower = &lower_reduce_window_max};
inline constexpr ir::primitive select_and_scatter_add_p{.name = "select_and_scatter_add",
                                                        .kind = ir::prim_kind::layout,
                                                        .plan_items = &select_and_scatter_add_items,
                                                        .run_item = &select_and_scatter_add_item,
                                                        .vjp = &select_and_scatter_add_vjp,
                                                        .jvp = &select_and_scatter_add_jvp,
                                                        .batch = &pool_batch, .lower = &lower_select_and_scatter_add};
inline constexpr ir::primitive select_and_gather_add_p{.name = "select_and_gather_add",
                                                       .kind = ir::prim_kind::layout,
                                                       .plan_items = &select_and_gather_add_items,
                                                       .run_item = &select_and_gather_add_item,
                                                       .vjp = &select_and_gather_add_vjp,
                                                       .jvp = &select_and_gather_add_jvp,
                                                       .batch = &pool_batch,
                                                       .flops_per_element = 0, .lower = &lower_select_and_gather_add};
inline constexpr ir::primitive reduce_window_sum_p{.name = "reduce_window_sum",
                                                   .kind = ir::prim_kind::layout,
                                                   .plan_items = &reduce_window_sum_items,
                                                   .run_item = &reduce_window_sum_item,
                                                   .vjp = &reduce_window_sum_vjp,
                                                   .jvp = &reduce_window_sum_jvp,
                                                   .batch = &pool_batch, .lower = &lower_reduce_window_sum};
inline constexpr ir::primitive reduce_window_sum_transpose_p{.name = "reduce_window_sum_transpose",
                                                             .kind = ir::prim_kind::layout,
                                                             .plan_items = &reduce_window_sum_transpose_items,
                                                             .run_item = &reduce_window_sum_transpose_item,
                                                             .vjp = &reduce_window_sum_transpose_vjp,
                                                             .jvp = &reduce_window_sum_transpose_jvp,
                                                             .batch = &pool_batch, .lower = &lower_reduce_window_sum_transpose};

// ---- the type-level shape rule -----------------------------------------------------------------------

template <fixed_string Op, class X, class Window, class Strides, class Padding>
struct pool_check {
  using xs = typename X::shape_type;

  // 0: fine; 1: rank; 2: zero window or stride; 3: the window does not fit
  static constexpr int operand_problem = [] {
    if (xs::rank != 4) return 1;
    for (std::size_t i = 0; i < 2; ++i)
      if (Window::values[i] == 0 || Strides::values[i] == 0) return 2;
    return 0;
  }();

  // Each axis's padding (Padding's).
  static constexpr std::array<padding::pads, 2> spatial = [] {
    std::array<padding::pads, 2> r{};
    if constexpr (operand_problem == 0)
      for (std::size_t i = 0; i < 2; ++i) r[i] = Padding::resolve(i, xs::dims[1 + i], Window::values[i], Strides::values[i]);
    return r;
  }();

  // The node's attributes but the divisor: window, strides, each axis's low padding, then its high.
  static constexpr ir::attributes window_attributes = [] {
    ir::attributes a;
    for (std::size_t v : Window::values) a.push(static_cast<std::int64_t>(v));
    for (std::size_t v : Strides::values) a.push(static_cast<std::int64_t>(v));
    for (const auto& s : spatial) a.push(static_cast<std::int64_t>(s.lo));
    for (const auto& s : spatial) a.push(static_cast<std::int64_t>(s.hi));
    return a;
  }();

  static constexpr int problem = [] {
    if (operand_problem != 0) return operand_problem;
    for (std::size_t i = 0; i < 2; ++i)
      if (!window_fits(xs::dims[1 + i], static_cast<std::int64_t>(spatial[i].lo), static_cast<std::int64_t>(spatial[i].hi), Window::values[i]))
        return 3;
    return 0;
  }();

  // The result's dims: the builder's rule (pool_output_shape) on the node's attributes.
  static constexpr dims_t<4> out_dims = [] {
    dims_t<4> d{};
    if constexpr (problem == 0) {
      const ir::dims out = pool_output_shape(ir::dims_of<xs>(), window_attributes);
      d = {out.d[0], out.d[1], out.d[2], out.d[3]};
    }
    return d;
  }();

  static consteval bool report() {
    if constexpr (problem != 0) {
      raise<fit<[] {
        message_builder m;
        m << Op << ": ";
        if constexpr (problem == 1) {
          m << "input ";
          append_type<X>(m) << " has rank " << static_cast<std::uint64_t>(xs::rank)
                            << " but must have rank 4 (NHWC: batch, height, width, channels); fix: reshape it, "
                               "e.g. a single image to [1,H,W,C]";
        } else if constexpr (problem == 2) {
          m << "window and strides must be at least 1 (input ";
          append_type<X>(m) << "); fix: e.g. window<2,2> with stride<2,2>";
        } else {
          m << "window " << static_cast<std::uint64_t>(Window::values[0]) << "x" << static_cast<std::uint64_t>(Window::values[1])
            << " is larger than input ";
          append_type<X>(m) << " (" << static_cast<std::uint64_t>(xs::dims[1]) << "x" << static_cast<std::uint64_t>(xs::dims[2])
                            << ") with " << Padding::name << " padding; fix: use padding::same or a smaller window";
        }
        return m;
      }>()>();
    }
    return problem == 0;
  }

  static constexpr ir::attributes attributes(pool_divisor divisor) {
    ir::attributes a = window_attributes;
    a.push(static_cast<std::int64_t>(divisor));
    return a;
  }
};

template <fixed_string Op, class Window, class Strides, class Padding, Traced X>
constexpr auto pool(X x, const ir::primitive& p, pool_divisor divisor) {
  using T = typename X::value_type;
  using check = pool_check<Op, X, Window, Strides, Padding>;
  using out_shape = shape_from<check::out_dims>;
  if constexpr (!check::report()) {
    return tracer<T, out_shape>{x.graph, -1};
  } else if constexpr (!FloatingDType<T>) {
    raise<fit<[] {
      return message_builder{} << Op << ": integer and pred operands are not supported; fix: convert_element_type to f32 or bf16";
    }>()>();
    return tracer<T, out_shape>{x.graph, -1};
  } else {
    return ir::emit<T, out_shape>(x.graph, p, {x.id}, check::attributes(divisor));
  }
}

}  // namespace prim

// The maximum of each window (padding never wins).
template <WindowRule Window, StrideRule Strides, PaddingRule Padding, Traced X>
constexpr auto max_pool(X x) {
  return prim::pool<"tessel::max_pool", Window, Strides, Padding>(x, prim::reduce_window_max_p, prim::pool_divisor::none);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <WindowRule Window, StrideRule Strides, PaddingRule Padding, Tensor X>
auto max_pool(const X& x) {
  return eagerly([](auto x) { return max_pool<Window, Strides, Padding>(x); }, x);
}

// The mean of each window: over the whole window when CountIncludePad (flax's default), else over its
// input elements.
template <WindowRule Window, StrideRule Strides, PaddingRule Padding, bool CountIncludePad = true, Traced X>
constexpr auto avg_pool(X x) {
  return prim::pool<"tessel::avg_pool", Window, Strides, Padding>(
      x, prim::reduce_window_sum_p, CountIncludePad ? prim::pool_divisor::window : prim::pool_divisor::valid);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <WindowRule Window, StrideRule Strides, PaddingRule Padding, bool CountIncludePad = true, Tensor X>
auto avg_pool(const X& x) {
  return eagerly([](auto x) { return avg_pool<Window, Strides, Padding, CountIncludePad>(x); }, x);
}

// The sum of each window.
template <WindowRule Window, StrideRule Strides, PaddingRule Padding, Traced X>
constexpr auto sum_pool(X x) {
  return prim::pool<"tessel::sum_pool", Window, Strides, Padding>(x, prim::reduce_window_sum_p, prim::pool_divisor::none);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <WindowRule Window, StrideRule Strides, PaddingRule Padding, Tensor X>
auto sum_pool(const X& x) {
  return eagerly([](auto x) { return sum_pool<Window, Strides, Padding>(x); }, x);
}

}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
