#pragma once
// conv_general (lax.conv_general_dilated for 2-D NHWC images): a cross-correlation of an input
// x f32[N, H, W, C] with a filter w f32[KH, KW, C, O] (HWIO), giving y f32[N, OH, OW, O]:
//
//   y[n, i, j, o] = sum_{a, b, c} x[n, i*SH + a*DH - PH, j*SW + b*DW - PW, c] * w[a, b, c, o]
//
// (terms outside the image are zero). Strides S, filter (rhs) dilation D and padding are template
// arguments; padding is TensorFlow's and JAX's:
//   padding::same    OH = ceil(H / SH), total = max((OH - 1)*SH + (KH - 1)*DH + 1 - H, 0), PH = total / 2
//   padding::valid   OH = (H - ((KH - 1)*DH + 1)) / SH + 1, no padding (the filter must fit the input)
//   padding::explicit_pads<LoH, HiH, LoW, HiW>   zeros added before and after each spatial axis
// f32 and bf16 (both operands alike; accumulated in f32; the result has the operands' dtype).
//
//   conv_general<stride<1, 1>, padding::same>(x, w)    // f32[8,28,28,1] * f32[3,3,1,32] -> f32[8,28,28,32]
//   conv_general<stride<2, 2>, padding::valid>(x, w)   // f32[8,28,28,1] * f32[3,3,1,32] -> f32[8,13,13,32]
//
// Runs as an im2col into a scratch panel and a GEMM (kernels::select_gemm()), in work items the executor
// threads (ir::item_plan): blocks of output pixels sized to the thread's cache budget, with the thread's
// scratch from the executor's arena. The planner makes it a contraction kernel whose elementwise epilogue
// (bias, relu) is fused: each block goes to the executor's sink, which runs the epilogue on it in cache. Its
// derivatives are two more primitives of this file, `conv_input_grad` (the transposed convolution: the
// cotangent back to the input's shape) and `conv_filter_grad` (the correlation of input and cotangent). With
// conv_general they form a closed set under VJP and JVP (all three are bilinear slices of one trilinear
// form <ct, conv(x, w)>), so derivatives of any order exist.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "tessel/kernels/gemm.hpp"
#include "tessel/core/bfloat16.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {

// Window strides along (height, width).
template <std::size_t H, std::size_t W>
struct stride {
  static constexpr std::array<std::size_t, 2> values{H, W};
};
// Filter (rhs) dilation along (height, width): 1 is a dense filter.
template <std::size_t H, std::size_t W>
struct dilation {
  static constexpr std::array<std::size_t, 2> values{H, W};
};

template <class T>
inline constexpr bool is_stride_v = false;
template <std::size_t H, std::size_t W>
inline constexpr bool is_stride_v<stride<H, W>> = true;
template <class T>
inline constexpr bool is_dilation_v = false;
template <std::size_t H, std::size_t W>
inline constexpr bool is_dilation_v<dilation<H, W>> = true;

namespace padding {

// The padding a policy puts before and after one spatial axis of a windowed op (the node's attributes);
// the output size follows from it by the one rule, windowed_size.
struct pads {
  std::size_t lo = 0, hi = 0;
};

// As much as keeps the output at ceil(in / stride), split evenly, the odd element after (XLA's SAME).
struct same {
  static constexpr std::string_view name = "padding::same";
  static constexpr pads resolve(std::size_t, std::size_t in, std::size_t window, std::size_t stride) {
    const std::size_t out = (in + stride - 1) / stride;
    const std::size_t need = out == 0 ? 0 : (out - 1) * stride + window;
    const std::size_t total = need > in ? need - in : 0;
    return {total / 2, total - total / 2};
  }
};

struct valid {
  static constexpr std::string_view name = "padding::valid";
  static constexpr pads resolve(std::size_t, std::size_t, std::size_t, std::size_t) { return {}; }
};

template <std::size_t LoH, std::size_t HiH, std::size_t LoW, std::size_t HiW>
struct explicit_pads {
  static constexpr std::string_view name = "padding::explicit_pads";
  static constexpr pads resolve(std::size_t axis, std::size_t, std::size_t, std::size_t) {
    return axis == 0 ? pads{LoH, HiH} : pads{LoW, HiW};
  }
};

}  // namespace padding

namespace prim {

// The one shape rule of a windowed axis (conv_general and the pools; the typed check at the user's call
// and the value-level builder both use it): `in` elements padded by lo and hi hold a window of `window`
// elements when window_fits, and the window then stops windowed_size times, every `stride` elements.
constexpr bool window_fits(std::size_t in, std::int64_t lo, std::int64_t hi, std::size_t window) {
  return static_cast<std::int64_t>(in) + lo + hi >= static_cast<std::int64_t>(window);
}
constexpr std::size_t windowed_size(std::size_t in, std::int64_t lo, std::int64_t hi, std::size_t window, std::size_t stride) {
  if (!window_fits(in, lo, hi, window)) return 0;
  return (static_cast<std::size_t>(static_cast<std::int64_t>(in) + lo + hi) - window) / stride + 1;
}

}  // namespace prim

template <class P>
concept PaddingRule = requires {
  P::resolve(0, 1, 1, 1);
  P::name;
};
template <class S>
concept StrideRule = is_stride_v<S>;
template <class D>
concept DilationRule = is_dilation_v<D>;

namespace prim {

// ---- geometry shared by the three primitives -------------------------------------------------------
// attr: [SH, SW, DH, DW, PH_lo, PW_lo, PH_hi, PW_hi]. The output size of each node is its own shape (or
// its operand's), so only the low padding is needed to run; the high padding keeps nodes of different
// padding apart and lets rules recompute the forward shape.

struct conv_geometry {
  std::size_t n = 0, h = 0, w = 0, c = 0;  // input
  std::size_t kh = 0, kw = 0, o = 0;       // filter (c in, o out)
  std::size_t oh = 0, ow = 0;              // output
  std::size_t sh = 1, sw = 1, dh = 1, dw = 1;
  std::ptrdiff_t ph = 0, pw = 0;  // low padding

  constexpr std::size_t rows() const { return n * oh * ow; }   // im2col rows: one per output pixel
  constexpr std::size_t patch() const { return kh * kw * c; }  // im2col columns, in HWIO filter order
};

constexpr conv_geometry conv_geometry_of(const ir::dims& x, const ir::dims& w, const ir::dims& y, const ir::attributes& a) {
  conv_geometry g;
  g.n = x.d[0], g.h = x.d[1], g.w = x.d[2], g.c = x.d[3];
  g.kh = w.d[0], g.kw = w.d[1], g.o = w.d[3];
  g.oh = y.d[1], g.ow = y.d[2];
  g.sh = static_cast<std::size_t>(a.ints[0]), g.sw = static_cast<std::size_t>(a.ints[1]);
  g.dh = static_cast<std::size_t>(a.ints[2]), g.dw = static_cast<std::size_t>(a.ints[3]);
  g.ph = static_cast<std::ptrdiff_t>(a.ints[4]), g.pw = static_cast<std::ptrdiff_t>(a.ints[5]);
  return g;
}

// The forward result's shape for input x, filter w and the node attributes.
constexpr ir::dims conv_output_shape(const ir::dims& x, const ir::dims& w, const ir::attributes& a) {
  ir::dims out;
  out.rank = 4;
  out.d[0] = x.d[0];
  out.d[3] = w.d[3];
  for (std::size_t i = 0; i < 2; ++i) {
    const auto s = static_cast<std::size_t>(a.ints[i]), d = static_cast<std::size_t>(a.ints[2 + i]);
    out.d[1 + i] = windowed_size(x.d[1 + i], a.ints[4 + i], a.ints[6 + i], (w.d[i] - 1) * d + 1, s);
  }
  return out;
}

// ---- kernels -----------------------------------------------------------------------------------------

// The three primitives' kernels, threaded by the executor in work items (ir::item_plan): forward and
// filter gradient in blocks of output pixels, the input gradient an image per item. Declared here and
// defined below only where TESSEL_IMPLEMENTATION is (the tessel library): im2col and its GEMM calls are
// compiled once. operands: x, w (conv_general); ct, w (input_grad, the forward input's shape); x, ct
// (filter_grad).
ir::item_plan conv_general_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t cache_bytes);
void conv_general_item(const ir::item_args& args, const ir::item_plan& plan, std::size_t item);
ir::item_plan conv_input_grad_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t cache_bytes);
void conv_input_grad_item(const ir::item_args& args, const ir::item_plan& plan, std::size_t item);
ir::item_plan conv_filter_grad_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t cache_bytes);
void conv_filter_grad_item(const ir::item_args& args, const ir::item_plan& plan, std::size_t item);
// An implicit GEMM: one row per output pixel, one column per output channel, KH*KW*C deep.
constexpr ir::gemm_extent conv_general_extent(const ir::node& n, const ir::node& x, const ir::node& w) {
  const conv_geometry g = conv_geometry_of(x.shape, w.shape, n.shape, n.attr);
  return {1, g.rows(), g.o, g.patch()};
}

#ifdef TESSEL_IMPLEMENTATION
namespace conv_detail {

// The filter taps [first, last) of one axis that land inside [0, size) from base position `origin`.
inline void valid_taps(std::ptrdiff_t origin, std::size_t dilation, std::size_t taps, std::size_t size, std::size_t& first,
                       std::size_t& last) {
  const auto d = static_cast<std::ptrdiff_t>(dilation);
  const std::ptrdiff_t lo = origin >= 0 ? 0 : (-origin + d - 1) / d;
  const std::ptrdiff_t hi =
      static_cast<std::ptrdiff_t>(size) - origin <= 0 ? 0 : (static_cast<std::ptrdiff_t>(size) - origin + d - 1) / d;
  first = static_cast<std::size_t>(std::min<std::ptrdiff_t>(lo, static_cast<std::ptrdiff_t>(taps)));
  last = static_cast<std::size_t>(
      std::clamp<std::ptrdiff_t>(hi, static_cast<std::ptrdiff_t>(first), static_cast<std::ptrdiff_t>(taps)));
}

// The pixels [first, last) of `span` consecutive output columns from column j whose tap at offset
// `offset` (= b*DW - PW) lands inside the image row: 0 <= (j + jj)*SW + offset < W.
inline void valid_pixels(const conv_geometry& g, std::size_t j, std::size_t span, std::ptrdiff_t offset, std::size_t& first,
                         std::size_t& last) {
  const auto s = static_cast<std::ptrdiff_t>(g.sw), jj = static_cast<std::ptrdiff_t>(j);
  const std::ptrdiff_t lo = offset >= 0 ? 0 : (-offset + s - 1) / s;  // first column in
  const std::ptrdiff_t hi = static_cast<std::ptrdiff_t>(g.w) - 1 - offset < 0
                                ? 0
                                : (static_cast<std::ptrdiff_t>(g.w) - 1 - offset) / s + 1;  // past the last
  first = static_cast<std::size_t>(std::clamp<std::ptrdiff_t>(lo - jj, 0, static_cast<std::ptrdiff_t>(span)));
  last = static_cast<std::size_t>(
      std::clamp<std::ptrdiff_t>(hi - jj, static_cast<std::ptrdiff_t>(first), static_cast<std::ptrdiff_t>(span)));
}

// Walks the patch matrix's rows [row0, row0 + count) a segment of one output row at a time, per filter
// tap (a, b): run(p, first, pixels, source) for `pixels` consecutive rows from r = p whose tap reads
// the image at element offset `source` (then source + SW*C, ...), and zero(p, first, pixels) for runs
// that fall in the padding; `first` is the tap's first patch column ((a*KW + b)*C). Whole segments
// keep the per-element work a bounds-free loop (C = 1 first layers have 9-column rows).
template <class Run, class Zero>
void walk_patches(const conv_geometry& g, std::size_t row0, std::size_t count, Run run, Zero zero) {
  for (std::size_t r = 0; r < count;) {
    const std::size_t row = row0 + r;
    const std::size_t n = row / (g.oh * g.ow), i = row / g.ow % g.oh, j = row % g.ow;
    const std::size_t span = std::min(g.ow - j, count - r);
    const std::size_t image = n * g.h * g.w * g.c;
    const std::ptrdiff_t top = static_cast<std::ptrdiff_t>(i * g.sh) - g.ph;
    for (std::size_t a = 0; a < g.kh; ++a) {
      const std::ptrdiff_t ih = top + static_cast<std::ptrdiff_t>(a * g.dh);
      const bool inside = ih >= 0 && ih < static_cast<std::ptrdiff_t>(g.h);
      for (std::size_t b = 0; b < g.kw; ++b) {
        const std::size_t col = (a * g.kw + b) * g.c;
        const std::ptrdiff_t offset = static_cast<std::ptrdiff_t>(b * g.dw) - g.pw;
        std::size_t first = 0, last = 0;
        if (inside) valid_pixels(g, j, span, offset, first, last);
        if (first > 0) zero(r, col, first);
        if (last > first)
          run(r + first, col, last - first,
              image + (static_cast<std::size_t>(ih) * g.w +
                       static_cast<std::size_t>(static_cast<std::ptrdiff_t>((j + first) * g.sw) + offset)) *
                          g.c);
        if (span > last) zero(r + last, col, span - last);
      }
    }
    r += span;
  }
}

// patches[r, (a, b, c)] = x[n, i*SH + a*DH - PH, j*SW + b*DW - PW, c] for rows [row0, row0 + count),
// stored row-major ([count, KH*KW*C]) or, when `transposed`, column-major ([KH*KW*C, count]). Either way
// the innermost loop writes consecutive addresses (the reads stay within one image row, in L1). The
// patches keep x's element type: a copy, exact, and a bf16 panel is half the traffic and lets the GEMM
// multiply bf16 x bf16 (vdpbf16ps where that is faster).
template <class T>
void im2col(const conv_geometry& g, const T* x, std::size_t row0, std::size_t count, T* patches, bool transposed) {
  const std::size_t c = g.c, width = g.patch(), step = g.sw * g.c;
  const T zero_value{};
  if (transposed) {
    walk_patches(
        g, row0, count,
        [&](std::size_t r, std::size_t col, std::size_t pixels, std::size_t src) {
          for (std::size_t k = 0; k < c; ++k) {
            T* d = patches + (col + k) * count + r;
            const T* s = x + src + k;
            for (std::size_t p = 0; p < pixels; ++p) d[p] = s[p * step];
          }
        },
        [&](std::size_t r, std::size_t col, std::size_t pixels) {
          for (std::size_t k = 0; k < c; ++k) std::fill_n(patches + (col + k) * count + r, pixels, zero_value);
        });
    return;
  }
  if (c == 1) {  // single elements: no per-pixel copy or fill calls
    walk_patches(
        g, row0, count,
        [&](std::size_t r, std::size_t col, std::size_t pixels, std::size_t src) {
          for (std::size_t p = 0; p < pixels; ++p) patches[(r + p) * width + col] = x[src + p * step];
        },
        [&](std::size_t r, std::size_t col, std::size_t pixels) {
          for (std::size_t p = 0; p < pixels; ++p) patches[(r + p) * width + col] = zero_value;
        });
    return;
  }
  walk_patches(
      g, row0, count,
      [&](std::size_t r, std::size_t col, std::size_t pixels, std::size_t src) {
        for (std::size_t p = 0; p < pixels; ++p) std::memcpy(patches + (r + p) * width + col, x + src + p * step, c * sizeof(T));
      },
      [&](std::size_t r, std::size_t col, std::size_t pixels) {
        for (std::size_t p = 0; p < pixels; ++p) std::fill_n(patches + (r + p) * width + col, c, zero_value);
      });
}

// The adjoint of im2col (row-major patches): dx[n, ...] += patches[r, (a, b, c)], where acc holds dx's
// elements from offset `base` on (one image).
inline void col2im_add(const conv_geometry& g, const float* patches, std::size_t row0, std::size_t count, float* acc,
                       std::size_t base) {
  const std::size_t c = g.c, width = g.patch(), step = g.sw * g.c;
  walk_patches(
      g, row0, count,
      [&](std::size_t r, std::size_t col, std::size_t pixels, std::size_t src) {
        for (std::size_t p = 0; p < pixels; ++p) {
          const float* s = patches + (r + p) * width + col;
          float* d = acc + (src - base) + p * step;
          for (std::size_t k = 0; k < c; ++k) d[k] += s[k];
        }
      },
      [](std::size_t, std::size_t, std::size_t) {});
}

inline void store(ir::dtype_code dtype, const float* src, std::size_t count, void* out) {
  if (dtype == ir::dtype_code::bf16) {
    auto* o = static_cast<bfloat16*>(out);
    for (std::size_t i = 0; i < count; ++i) o[i] = bfloat16(src[i]);
  } else {
    std::memcpy(out, src, count * sizeof(float));
  }
}

// Floats of im2col panel per item: half the thread's cache budget (the GEMM's packed panels and the
// result block take the rest).
inline std::size_t panel_floats(std::size_t cache_bytes) { return std::max<std::size_t>(cache_bytes / 8, 4096); }

// Rows per item: the panel budget, but at least a micro-kernel's worth, and leaving every thread a few
// items so the split balances.
inline std::size_t chunk_rows(std::size_t rows, std::size_t width, std::size_t threads, std::size_t cache_bytes) {
  std::size_t r = std::max<std::size_t>(panel_floats(cache_bytes) / std::max<std::size_t>(width, 1), kernels::blocking_of().mr);
  const std::size_t share = (rows + 4 * threads - 1) / (4 * threads);
  r = std::min(r, std::max<std::size_t>(share, 64));
  return std::max<std::size_t>(std::min(r, rows), 1);
}

// An item's scratch: the GEMM's packed panels, then the patch panel, then a result block.
struct scratch_layout {
  float* gemm;
  float* panel;
  float* block;
};
inline scratch_layout layout_of(float* scratch, std::size_t panel) {
  const std::size_t g = ir::aligned_floats(kernels::gemm_scratch_floats());
  return {scratch, scratch + g, scratch + g + ir::aligned_floats(panel)};
}

// Rows [r0, r0 + count) of y[rows, O] = patches(x)[rows, KH*KW*C] . w[KH*KW*C, O], to the sink as f32
// when the epilogue is fused, else into y.
template <class T>
void forward_rows(const conv_geometry& g, const T* x, const void* w, ir::dtype_code dtype, void* y, const ir::item_args& a,
                  std::size_t r0, std::size_t count, std::size_t chunk) {
  const std::size_t width = g.patch();
  const scratch_layout s = layout_of(a.scratch, chunk * width);
  T* panel = reinterpret_cast<T*>(s.panel);
  im2col(g, x, r0, count, panel, false);
  const kernels::matrix_view patches{panel, width, 1, std::is_same_v<T, bfloat16>};
  const kernels::matrix_view filter{w, g.o, 1, dtype == ir::dtype_code::bf16};
  const bool direct = a.sink == nullptr && dtype == ir::dtype_code::f32;
  float* c = direct ? static_cast<float*>(y) + r0 * g.o : s.block;
  kernels::select_gemm()(patches, filter, 0, count, g.o, width, c, g.o, s.gemm);
  if (a.sink != nullptr) a.sink->consume(a.sink->context, r0 * g.o, count * g.o, c, a.thread);
  else if (!direct) store(dtype, c, count * g.o, static_cast<bfloat16*>(y) + r0 * g.o);
}

// Image `image` of dx = col2im(ct[rows, O] . w^T[O, KH*KW*C]), `pass` rows of ct per GEMM call.
template <class T>
void input_grad_image(const conv_geometry& g, const T* ct, const void* w, ir::dtype_code dtype, void* dx, float* scratch,
                      std::size_t image, std::size_t pass) {
  const std::size_t per_image = g.oh * g.ow, width = g.patch(), size = g.h * g.w * g.c;
  const scratch_layout s = layout_of(scratch, pass * width);
  const bool f32_out = dtype == ir::dtype_code::f32;
  float* acc = f32_out ? static_cast<float*>(dx) + image * size : s.block;
  std::fill(acc, acc + size, 0.0f);
  const kernels::matrix_view filter_t{w, 1, g.o, dtype == ir::dtype_code::bf16};
  for (std::size_t done = 0; done < per_image; done += pass) {
    const std::size_t r0 = image * per_image + done, count = std::min(pass, per_image - done);
    const kernels::matrix_view a{ct + r0 * g.o, g.o, 1, dtype == ir::dtype_code::bf16};
    kernels::select_gemm()(a, filter_t, 0, count, width, g.o, s.panel, width, s.gemm);
    col2im_add(g, s.panel, r0, count, acc, image * size);
  }
  if (!f32_out) store(dtype, acc, size, static_cast<bfloat16*>(dx) + image * size);
}

// Rows [r0, r0 + count) of dw[KH*KW*C, O] = patches(x)^T . ct[rows, O], added into its share's partial sum.
template <class T>
void filter_grad_rows(const conv_geometry& g, const T* x, const void* ct, ir::dtype_code dtype, const ir::item_args& a,
                      std::size_t r0, std::size_t count, std::size_t chunk) {
  const std::size_t width = g.patch(), out = width * g.o;
  const scratch_layout s = layout_of(a.scratch, chunk * width);
  T* panel = reinterpret_cast<T*>(s.panel);
  im2col(g, x, r0, count, panel, true);  // [width, count]: the GEMM's A, read row-major
  const kernels::matrix_view patches_t{panel, count, 1, std::is_same_v<T, bfloat16>};
  const kernels::matrix_view b{static_cast<const unsigned char*>(ct) + r0 * g.o * ir::bytes_of(dtype), g.o, 1,
                               dtype == ir::dtype_code::bf16};
  kernels::select_gemm()(patches_t, b, 0, width, g.o, count, s.block, g.o, s.gemm);
  for (std::size_t i = 0; i < out; ++i) a.partial[i] += s.block[i];
}

// Calls f with a null pointer of the operands' element type (f32 or bf16); pooling's kernels use it too.
template <class F>
void typed(ir::dtype_code dtype, F f) {
  if (dtype == ir::dtype_code::bf16) f(static_cast<const bfloat16*>(nullptr));
  else f(static_cast<const float*>(nullptr));
}

}  // namespace conv_detail

// operands: x, w.
ir::item_plan conv_general_items(const ir::node& n, const ir::node* const* operands, std::size_t threads, std::size_t cache_bytes) {
  const conv_geometry g = conv_geometry_of(operands[0]->shape, operands[1]->shape, n.shape, n.attr);
  const std::size_t rows = g.rows(), width = g.patch();
  const std::size_t chunk = conv_detail::chunk_rows(rows, width, threads, cache_bytes);
  return {.items = (rows + chunk - 1) / chunk,
          .per_item = chunk,
          .scratch_floats = ir::aligned_floats(kernels::gemm_scratch_floats()) + ir::aligned_floats(chunk * width) + chunk * g.o};
}
void conv_general_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const conv_geometry g = conv_geometry_of(a.operands[0]->shape, a.operands[1]->shape, a.n->shape, a.n->attr);
  const std::size_t r0 = item * plan.per_item, count = std::min(plan.per_item, g.rows() - r0);
  conv_detail::typed(a.n->operand_dtype, [&]<class T>(const T*) {
    conv_detail::forward_rows(g, static_cast<const T*>(a.in[0]), a.in[1], a.n->dtype, a.out, a, r0, count, plan.per_item);
  });
}

// operands: ct (the forward result's shape), w; the result has the forward input's shape. One image per
// item (col2im adds into it), in passes of rows that fill the panel.
ir::item_plan conv_input_grad_items(const ir::node& n, const ir::node* const* operands, std::size_t, std::size_t cache_bytes) {
  const conv_geometry g = conv_geometry_of(n.shape, operands[1]->shape, operands[0]->shape, n.attr);
  const std::size_t width = g.patch();
  const std::size_t pass = std::max<std::size_t>(std::min(g.oh * g.ow, conv_detail::panel_floats(cache_bytes) / std::max<std::size_t>(width, 1)), 1);
  const bool f32_out = n.dtype == ir::dtype_code::f32;
  return {.items = g.n,
          .per_item = pass,
          .scratch_floats = ir::aligned_floats(kernels::gemm_scratch_floats()) + ir::aligned_floats(pass * width) +
                            (f32_out ? 0 : g.h * g.w * g.c)};
}
void conv_input_grad_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const conv_geometry g = conv_geometry_of(a.n->shape, a.operands[1]->shape, a.operands[0]->shape, a.n->attr);
  conv_detail::typed(a.n->operand_dtype, [&]<class T>(const T*) {
    conv_detail::input_grad_image(g, static_cast<const T*>(a.in[0]), a.in[1], a.n->dtype, a.out, a.scratch, item, plan.per_item);
  });
}

// operands: x, ct; the result has the filter's shape. Each share of items sums their rows into its
// partial result, which the executor adds up (ir::item_plan::sums_partials). The cut does not depend on
// the thread count: items of whole K blocks, two a share where the rows allow.
ir::item_plan conv_filter_grad_items(const ir::node& n, const ir::node* const* operands, std::size_t, std::size_t cache_bytes) {
  const conv_geometry g = conv_geometry_of(operands[0]->shape, n.shape, operands[1]->shape, n.attr);
  const std::size_t rows = g.rows(), width = g.patch();
  const std::size_t kc = kernels::blocking_of().kc;
  // Whole K blocks of the GEMM (its contraction runs over the rows here).
  std::size_t chunk = std::max<std::size_t>(conv_detail::panel_floats(cache_bytes) / std::max<std::size_t>(width, 1) / kc, 1) * kc;
  const std::size_t per_two_a_share = (rows + 2 * ir::partial_shares - 1) / (2 * ir::partial_shares);
  chunk = std::min(chunk, std::max<std::size_t>((per_two_a_share + kc - 1) / kc * kc, kc));
  chunk = std::max<std::size_t>(std::min(chunk, rows), 1);
  return {.items = (rows + chunk - 1) / chunk,
          .per_item = chunk,
          .scratch_floats = ir::aligned_floats(kernels::gemm_scratch_floats()) + ir::aligned_floats(chunk * width) + width * g.o,
          .sums_partials = true};
}
void conv_filter_grad_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const conv_geometry g = conv_geometry_of(a.operands[0]->shape, a.n->shape, a.operands[1]->shape, a.n->attr);
  const std::size_t r0 = item * plan.per_item, count = std::min(plan.per_item, g.rows() - r0);
  conv_detail::typed(a.n->operand_dtype, [&]<class T>(const T*) {
    conv_detail::filter_grad_rows(g, static_cast<const T*>(a.in[0]), a.in[1], a.n->dtype, a, r0, count, plan.per_item);
  });
}
#endif  // TESSEL_IMPLEMENTATION

// ---- value-level constructors and rules --------------------------------------------------------------

namespace build {

constexpr int conv(ir::graph_builder& g, int x, int w, const ir::attributes& a) {
  return ir::make_node(g, conv_general_p, g[x].dtype, conv_output_shape(g[x].shape, g[w].shape, a), {x, w}, a);
}
// The cotangent of conv's input: ct [N, OH, OW, O] and w back to x_shape.
constexpr int conv_input_grad(ir::graph_builder& g, int ct, int w, const ir::attributes& a, const ir::dims& x_shape) {
  return ir::make_node(g, conv_input_grad_p, g[ct].dtype, x_shape, {ct, w}, a);
}
// The cotangent of conv's filter: x and ct [N, OH, OW, O] to w_shape.
constexpr int conv_filter_grad(ir::graph_builder& g, int x, int ct, const ir::attributes& a, const ir::dims& w_shape) {
  return ir::make_node(g, conv_filter_grad_p, g[x].dtype, w_shape, {x, ct}, a);
}

}  // namespace build

// With T(x, w, c) = <c, conv(x, w)>: conv = dT/dc, conv_input_grad(c, w) = dT/dx, conv_filter_grad(x, c)
// = dT/dw. Each is linear in each operand, and its transposes are the other two.
constexpr void conv_general_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const int x = n.operands[0], w = n.operands[1];
  out[0] = build::conv_input_grad(g, ct, w, n.attr, g[x].shape);
  out[1] = build::conv_filter_grad(g, x, ct, n.attr, g[w].shape);
}
constexpr int conv_general_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  const int left = t[0] < 0 ? -1 : build::conv(g, t[0], n.operands[1], n.attr);
  const int right = t[1] < 0 ? -1 : build::conv(g, n.operands[0], t[1], n.attr);
  return build::add(g, left, right);
}

constexpr void conv_input_grad_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const int c = n.operands[0], w = n.operands[1];
  out[0] = build::conv(g, ct, w, n.attr);
  out[1] = build::conv_filter_grad(g, ct, c, n.attr, g[w].shape);
}
constexpr int conv_input_grad_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  const int left = t[0] < 0 ? -1 : build::conv_input_grad(g, t[0], n.operands[1], n.attr, n.shape);
  const int right = t[1] < 0 ? -1 : build::conv_input_grad(g, n.operands[0], t[1], n.attr, n.shape);
  return build::add(g, left, right);
}

constexpr void conv_filter_grad_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const int x = n.operands[0], c = n.operands[1];
  out[0] = build::conv_input_grad(g, c, ct, n.attr, g[x].shape);
  out[1] = build::conv(g, x, ct, n.attr);
}
constexpr int conv_filter_grad_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  const int left = t[0] < 0 ? -1 : build::conv_filter_grad(g, t[0], n.operands[1], n.attr, n.shape);
  const int right = t[1] < 0 ? -1 : build::conv_filter_grad(g, n.operands[0], t[1], n.attr, n.shape);
  return build::add(g, left, right);
}

// vmap: a batch of inputs (or of cotangents) folds into the image axis N and runs as one call; a batch
// of filters, and conv_filter_grad (whose result has no N), run once per batch element.
constexpr int conv_general_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                                 const std::array<int, ir::max_operands>& axes, int& out_axis) {
  if (axes[1] >= 0) return batching::unrolled(g, n, ops, axes, out_axis);
  return batching::fold_leading(g, n, ops, axes, {true, false, false}, out_axis);
}
constexpr int conv_input_grad_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                                    const std::array<int, ir::max_operands>& axes, int& out_axis) {
  if (axes[1] >= 0) return batching::unrolled(g, n, ops, axes, out_axis);
  return batching::fold_leading(g, n, ops, axes, {true, false, false}, out_axis);
}

// ---- export: one stablehlo.convolution each (conv_general_dilated and its two transposes, as JAX's VJP
// writes them), bf16 accumulated in f32 and rounded once ------------------------------------------------

struct hlo_convolution {
  std::string_view numbers;  // dimension_numbers: [lhs]x[rhs]->[result]
  std::array<std::int64_t, 2> strides{1, 1}, lo{}, hi{}, lhs_dilation{1, 1}, rhs_dilation{1, 1};
};
inline void lower_convolution(ir::stablehlo_writer& w, const ir::hlo_value& lhs, const ir::hlo_value& rhs, const hlo_convolution& c) {
  const ir::node& n = w.current();
  ir::hlo_properties p;
  p.i64("batch_group_count", 1)
      .add("dimension_numbers", "#stablehlo.conv<" + std::string(c.numbers) + ">")
      .i64("feature_group_count", 1)
      .i64s("lhs_dilation", c.lhs_dilation)
      .padding("padding", c.lo, c.hi)
      .add("precision_config", "[#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]")
      .i64s("rhs_dilation", c.rhs_dilation)
      .add("window_reversal", "array<i1: false, false>")
      .i64s("window_strides", c.strides);
  const ir::hlo_value r = w.emit("stablehlo.convolution", {lhs, rhs}, p, ir::hlo_type(ir::dtype_code::f32, n.shape));
  w.define(n.dtype == ir::dtype_code::f32 ? r : w.convert(r, n.dtype, n.shape));
}
inline void lower_conv_general(ir::stablehlo_writer& w) {
  const ir::attributes& a = w.current().attr;
  lower_convolution(w, w.operand(0), w.operand(1),
                    {.numbers = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]", .strides = {a.ints[0], a.ints[1]}, .lo = {a.ints[4], a.ints[5]},
                     .hi = {a.ints[6], a.ints[7]}, .rhs_dilation = {a.ints[2], a.ints[3]}});
}
// The cotangent dilated by the strides, correlated with the filter reversed and its channels swapped.
inline void lower_conv_input_grad(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const conv_geometry g = conv_geometry_of(n.shape, w.operand_node(1).shape, w.operand_node(0).shape, n.attr);
  const std::array<std::size_t, 2> k{g.kh, g.kw}, s{g.sh, g.sw}, d{g.dh, g.dw}, size{g.h, g.w}, out{g.oh, g.ow};
  hlo_convolution c{.numbers = "[b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f]"};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t p = n.attr.ints[4 + i];
    c.lo[i] = static_cast<std::int64_t>((k[i] - 1) * d[i]) - p;
    c.hi[i] = static_cast<std::int64_t>(size[i]) - static_cast<std::int64_t>((out[i] - 1) * s[i]) - 1 + p;
    c.lhs_dilation[i] = static_cast<std::int64_t>(s[i]);
    c.rhs_dilation[i] = static_cast<std::int64_t>(d[i]);
  }
  const ir::hlo_value reversed = w.emit("stablehlo.reverse", {w.operand(1)}, ir::hlo_properties{}.i64s("dimensions", std::array<std::int64_t, 2>{0, 1}),
                                        w.operand(1).type);
  lower_convolution(w, w.operand(0), reversed, c);
}
// The input's channels as the batch, its images as the features, correlated with the cotangent dilated by
// the strides, moved by the filter's dilation.
inline void lower_conv_filter_grad(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const conv_geometry g = conv_geometry_of(w.operand_node(0).shape, n.shape, w.operand_node(1).shape, n.attr);
  const std::array<std::size_t, 2> k{g.kh, g.kw}, s{g.sh, g.sw}, d{g.dh, g.dw}, size{g.h, g.w}, out{g.oh, g.ow};
  hlo_convolution c{.numbers = "[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]"};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t p = n.attr.ints[4 + i];
    c.strides[i] = static_cast<std::int64_t>(d[i]);
    c.lo[i] = p;
    c.hi[i] = static_cast<std::int64_t>((k[i] - 1) * d[i] + (out[i] - 1) * s[i] + 1) - static_cast<std::int64_t>(size[i]) - p;
    c.rhs_dilation[i] = static_cast<std::int64_t>(s[i]);
  }
  lower_convolution(w, w.operand(0), w.operand(1), c);
}

// conv_general is a contraction (its elementwise consumers fuse into its blocks, as a GEMM's do); its
// gradients are kernels of their own. All three run in work items.
// flops_per_element is per result element and conv's depends on the filter, so dump counts none.
inline constexpr ir::primitive conv_general_p{.name = "conv_general",
                                              .kind = ir::prim_kind::contraction,
                                              .plan_items = &conv_general_items,
                                              .run_item = &conv_general_item,
                                              .extent = &conv_general_extent,
                                              .vjp = &conv_general_vjp,
                                              .jvp = &conv_general_jvp,
                                              .batch = &conv_general_batch,
                                              .flops_per_element = 0, .lower = &lower_conv_general};
inline constexpr ir::primitive conv_input_grad_p{.name = "conv_input_grad",
                                                 .kind = ir::prim_kind::layout,
                                                 .plan_items = &conv_input_grad_items,
                                                 .run_item = &conv_input_grad_item,
                                                 .vjp = &conv_input_grad_vjp,
                                                 .jvp = &conv_input_grad_jvp,
                                                 .batch = &conv_input_grad_batch,
                                                 .flops_per_element = 0, .lower = &lower_conv_input_grad};
inline constexpr ir::primitive conv_filter_grad_p{.name = "conv_filter_grad",
                                                  .kind = ir::prim_kind::layout,
                                                  .plan_items = &conv_filter_grad_items,
                                                  .run_item = &conv_filter_grad_item,
                                                  .vjp = &conv_filter_grad_vjp,
                                                  .jvp = &conv_filter_grad_jvp,
                                                  .batch = &batching::unrolled,
                                                  .flops_per_element = 0, .lower = &lower_conv_filter_grad};

// ---- the type-level shape rule -----------------------------------------------------------------------

template <fixed_string Op, class X, class W, class Strides, class Padding, class Dilation>
struct conv_check {
  using xs = typename X::shape_type;
  using ws = typename W::shape_type;

  // 0: fine; 1: input rank; 2: filter rank; 3: channels differ; 4: zero stride or dilation; 5: window too large
  static constexpr int operand_problem = [] {
    if (xs::rank != 4) return 1;
    if (ws::rank != 4) return 2;
    if (xs::dims[3] != ws::dims[2]) return 3;
    for (std::size_t i = 0; i < 2; ++i)
      if (Strides::values[i] == 0 || Dilation::values[i] == 0) return 4;
    return 0;
  }();
  // Each axis's window: the dilated filter.
  static constexpr std::array<std::size_t, 2> window = [] {
    std::array<std::size_t, 2> w{};
    if constexpr (operand_problem == 0)
      for (std::size_t i = 0; i < 2; ++i) w[i] = (ws::dims[i] - 1) * Dilation::values[i] + 1;
    return w;
  }();

  // The node's attributes: strides, dilations, each axis's low padding, then its high (Padding's).
  static constexpr ir::attributes attr = [] {
    ir::attributes a;
    if constexpr (operand_problem == 0) {
      std::array<padding::pads, 2> p{};
      for (std::size_t i = 0; i < 2; ++i) p[i] = Padding::resolve(i, xs::dims[1 + i], window[i], Strides::values[i]);
      for (std::size_t v : Strides::values) a.push(static_cast<std::int64_t>(v));
      for (std::size_t v : Dilation::values) a.push(static_cast<std::int64_t>(v));
      for (const auto& s : p) a.push(static_cast<std::int64_t>(s.lo));
      for (const auto& s : p) a.push(static_cast<std::int64_t>(s.hi));
    }
    return a;
  }();

  static constexpr int problem = [] {
    if (operand_problem != 0) return operand_problem;
    for (std::size_t i = 0; i < 2; ++i)
      if (!window_fits(xs::dims[1 + i], attr.ints[4 + i], attr.ints[6 + i], window[i])) return 5;
    return 0;
  }();

  // The result's dims: the builder's rule (conv_output_shape) on the node's attributes.
  static constexpr dims_t<4> out_dims = [] {
    dims_t<4> d{};
    if constexpr (problem == 0) {
      const ir::dims out = conv_output_shape(ir::dims_of<xs>(), ir::dims_of<ws>(), attr);
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
          m << "filter ";
          append_type<W>(m) << " has rank " << static_cast<std::uint64_t>(ws::rank)
                            << " but must have rank 4 (HWIO: height, width, input channels, output channels); fix: "
                               "reshape it to [KH,KW,C,O]";
        } else if constexpr (problem == 3) {
          m << "input ";
          append_type<X>(m) << " has " << static_cast<std::uint64_t>(xs::dims[3]) << " channels but filter ";
          append_type<W>(m) << " expects " << static_cast<std::uint64_t>(ws::dims[2])
                            << "; fix: the filter is HWIO [KH,KW,C,O] with C the last axis of the NHWC input";
        } else if constexpr (problem == 4) {
          m << "strides and dilations must be at least 1 (input ";
          append_type<X>(m) << ", filter ";
          append_type<W>(m) << "); fix: use stride<1,1> and dilation<1,1> for a dense unit-step convolution";
        } else {
          m << "filter ";
          append_type<W>(m) << " spans a " << static_cast<std::uint64_t>((ws::dims[0] - 1) * Dilation::values[0] + 1) << "x"
                            << static_cast<std::uint64_t>((ws::dims[1] - 1) * Dilation::values[1] + 1)
                            << " window, larger than input ";
          append_type<X>(m) << " (" << static_cast<std::uint64_t>(xs::dims[1]) << "x" << static_cast<std::uint64_t>(xs::dims[2])
                            << ") with " << Padding::name
                            << " padding; fix: use padding::same, a smaller filter or a larger input";
        }
        return m;
      }>()>();
    }
    return problem == 0;
  }
};

}  // namespace prim

template <StrideRule Strides, PaddingRule Padding, DilationRule Dilation = dilation<1, 1>, Traced X, Traced W>
constexpr auto conv_general(X x, W w) {
  using T = typename X::value_type;
  constexpr fixed_string op = "tessel::conv_general";
  using check = prim::conv_check<op, X, W, Strides, Padding, Dilation>;
  using out_shape = shape_from<check::out_dims>;
  if constexpr (!require_same_dtype<op, X, W>() || !check::report()) {
    return tracer<T, out_shape>{x.graph, -1};
  } else if constexpr (!FloatingDType<T>) {
    raise<"tessel::conv_general: integer and pred operands are not supported; fix: convert_element_type to f32 or bf16", X>();
    return tracer<T, out_shape>{x.graph, -1};
  } else {
    return tracer<T, out_shape>{x.graph, prim::build::conv(*x.graph, x.id, w.id, check::attr)};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <StrideRule Strides, PaddingRule Padding, DilationRule Dilation = dilation<1, 1>, Tensor X, Tensor W>
auto conv_general(const X& x, const W& w) {
  return eagerly([](auto x, auto w) { return conv_general<Strides, Padding, Dilation>(x, w); }, x, w);
}

}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
