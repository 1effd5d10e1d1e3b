#pragma once
// pad (lax.pad): the operand spread out with a padding value before, after and between its elements,
// per axis. A negative `lo` or `hi` crops instead.
//
//   pad<std::array{pad_axis{1, 2}, pad_axis{0, 0}}>(x, 0.0f)        // f32[2,3] -> f32[5,3]
//   pad<std::array{pad_axis{0, 0, 1}}>(v, -1.0f)                   // f32[3] -> f32[5]: v0 -1 v1 -1 v2
//
// The padding value is a scalar (a literal, or an f32[] of the program). VJP: the operand gets the
// cotangent cropped and strided back (a slice); the padding value gets the sum of everything else.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/prim/family/elementwise.hpp"
#include "tessel/prim/family/layout.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {

// Padding of one axis: `lo` elements before, `hi` after, `interior` between each pair.
struct pad_axis {
  long lo = 0;
  long hi = 0;
  long interior = 0;
};

namespace prim {

// attr: lo[0..rank), interior[0..rank); hi follows from the result's shape.
inline void run_pad(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  const std::size_t bytes = ir::bytes_of(n.dtype);
  auto* dst = static_cast<unsigned char*>(out);
  const std::size_t total = n.shape.size();
  // The padding value everywhere first, filled as whole values (a byte-count memcpy per element was
  // most of the cost of the slice's transpose, a pad of the cotangent).
  if (bytes == 4) {
    std::uint32_t v;
    std::memcpy(&v, in[1], 4);
    std::fill_n(reinterpret_cast<std::uint32_t*>(dst), total, v);
  } else if (bytes == 2) {
    std::uint16_t v;
    std::memcpy(&v, in[1], 2);
    std::fill_n(reinterpret_cast<std::uint16_t*>(dst), total, v);
  } else {
    std::memset(dst, *static_cast<const unsigned char*>(in[1]), total);
  }

  const ir::node& operand = *operands[0];
  const std::size_t rank = n.shape.rank;
  std::array<std::size_t, ir::max_rank> extent{};
  box_side from = dense_side(operand.shape), to;
  to.shape = n.shape;
  for (std::size_t a = 0; a < rank; ++a) {
    const auto lo = static_cast<std::ptrdiff_t>(n.attr.ints[a]);
    const auto step = static_cast<std::ptrdiff_t>(n.attr.ints[rank + a]) + 1;
    const auto size = static_cast<std::ptrdiff_t>(operand.shape.d[a]);
    const auto result = static_cast<std::ptrdiff_t>(n.shape.d[a]);
    // Operand elements [first, last) land inside the result.
    const std::ptrdiff_t first = lo >= 0 ? 0 : (-lo + step - 1) / step;
    const std::ptrdiff_t last = result - 1 - lo < 0 ? 0 : std::min(size, (result - 1 - lo) / step + 1);
    extent[a] = last > first ? static_cast<std::size_t>(last - first) : 0;
    from.start[a] = first;
    to.start[a] = lo + first * step;
    to.step[a] = step;
  }
  copy_box(n.dtype, extent, rank, from, in[0], to, out);
}

constexpr void pad_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const ir::dims in = g[n.operands[0]].shape;
  const std::size_t rank = n.shape.rank;
  build::offsets crop{}, none{}, start{}, stride{};
  ir::dims spread = in;  // the operand with its interior padding, inside the result
  for (std::size_t a = 0; a < rank; ++a) {
    crop[a] = -n.attr.ints[a];
    stride[a] = n.attr.ints[rank + a] + 1;
    spread.d[a] = in.d[a] == 0 ? 0 : in.d[a] + (in.d[a] - 1) * static_cast<std::size_t>(n.attr.ints[rank + a]);
  }
  const int zero = build::literal(g, n.dtype, 0.0);
  const int inner = build::pad(g, ct, zero, crop, none, spread);
  out[0] = build::slice(g, inner, start, stride, in);
  std::array<bool, ir::max_rank> all{};
  for (std::size_t a = 0; a < rank; ++a) all[a] = true;
  out[1] = build::sub(g, build::reduce(g, reduce_sum_p, ct, all), build::reduce(g, reduce_sum_p, out[0], all));
}
constexpr int pad_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  if (t[0] < 0 && t[1] < 0) return -1;
  const ir::node n = g[node];
  const std::size_t rank = n.shape.rank;
  build::offsets lo{}, interior{};
  for (std::size_t a = 0; a < rank; ++a) {
    lo[a] = n.attr.ints[a];
    interior[a] = n.attr.ints[rank + a];
  }
  const int x = t[0] >= 0 ? t[0] : build::zeros_like(g, n.operands[0]);
  const int v = t[1] >= 0 ? t[1] : build::literal(g, n.dtype, 0.0);
  return build::pad(g, x, v, lo, interior, n.shape);
}

// vmap: a batched operand gets no padding along its batch axis; a batched padding value (one scalar
// per element) pads each element separately.
constexpr int pad_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                        const std::array<int, ir::max_operands>& axes, int& out_axis) {
  if (axes[1] >= 0) return batching::unrolled(g, n, ops, axes, out_axis);
  const auto b = static_cast<std::size_t>(axes[0]);
  const std::size_t rank = n.shape.rank;
  build::offsets lo{}, interior{};
  for (std::size_t a = 0; a <= rank; ++a) {
    if (a == b) continue;
    const std::size_t i = a < b ? a : a - 1;
    lo[a] = n.attr.ints[i];
    interior[a] = n.attr.ints[rank + i];
  }
  out_axis = static_cast<int>(b);
  return build::pad(g, ops[0], ops[1], lo, interior, batching::insert_axis(n.shape, b, g[ops[0]].shape.d[b]));
}

// hi follows from the shapes: out = lo + in + (in - 1) * interior + hi.
inline void lower_pad(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const ir::node& in = w.operand_node(0);
  const std::size_t rank = n.shape.rank;
  std::array<std::int64_t, ir::max_rank> hi{};
  for (std::size_t a = 0; a < rank; ++a) {
    const auto d = static_cast<std::int64_t>(in.shape.d[a]);
    const std::int64_t spread = d == 0 ? 0 : d + (d - 1) * n.attr.ints[rank + a];
    hi[a] = static_cast<std::int64_t>(n.shape.d[a]) - n.attr.ints[a] - spread;
  }
  w.lower_as("stablehlo.pad", ir::hlo_properties{}
                                  .i64s("edge_padding_high", {hi.data(), rank})
                                  .i64s("edge_padding_low", {n.attr.ints.data(), rank})
                                  .i64s("interior_padding", {n.attr.ints.data() + rank, rank}));
}
inline constexpr ir::primitive pad_p{.name = "pad",
                                     .kind = ir::prim_kind::layout,
                                     .run = &run_pad,
                                     .vjp = &pad_vjp,
                                     .jvp = &pad_jvp,
                                     .batch = &pad_batch,
                                     .flops_per_element = 0, .lower = &lower_pad};

template <class X, auto Config>
consteval auto pad_dims() {
  using S = typename X::shape_type;
  constexpr std::size_t rank = S::rank;
  if constexpr (Config.size() != rank) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::pad: ";
      append_type<X>(m) << " has rank " << static_cast<std::uint64_t>(rank) << " but "
                        << static_cast<std::uint64_t>(Config.size())
                        << " paddings were given; fix: give one tessel::pad_axis{lo, hi, interior} per axis";
      return m;
    }>()>();
    return dims_t<rank>{};
  } else {
    constexpr long bad = [] {
      for (std::size_t a = 0; a < rank; ++a) {
        const long in = static_cast<long>(S::dims[a]);
        const pad_axis p = Config[a];
        if (p.interior < 0 || p.lo + p.hi + in + (in > 0 ? (in - 1) * p.interior : 0) < 0) return static_cast<long>(a);
      }
      return -1L;
    }();
    if constexpr (bad >= 0) {
      raise<fit<[] {
        constexpr auto a = static_cast<std::size_t>(bad);
        message_builder m;
        m << "tessel::pad: on axis " << static_cast<std::uint64_t>(a) << " of ";
        append_type<X>(m) << " the padding lo " << static_cast<std::int64_t>(Config[a].lo) << ", hi "
                          << static_cast<std::int64_t>(Config[a].hi) << ", interior "
                          << static_cast<std::int64_t>(Config[a].interior)
                          << " leaves a negative size or has a negative interior; fix: crop at most the axis "
                             "length and keep interior >= 0";
        return m;
      }>()>();
      return dims_t<rank>{};
    } else {
      dims_t<rank> out{};
      for (std::size_t a = 0; a < rank; ++a) {
        const long in = static_cast<long>(S::dims[a]);
        const pad_axis p = Config[a];
        out[a] = static_cast<std::size_t>(p.lo + p.hi + in + (in > 0 ? (in - 1) * p.interior : 0));
      }
      return out;
    }
  }
}
}  // namespace prim

template <auto Config, Traced X, class V>
constexpr auto pad(X x, V value) {
  using T = typename X::value_type;
  using S = shape_from<prim::pad_dims<X, Config>()>;
  auto v = prim::as_tracer<T>(x.graph, value);
  static_assert(decltype(v)::rank == 0, "tessel::pad: the padding value must be a scalar (a number or a T[] tracer)");
  if constexpr (Config.size() != X::rank || !require_same_dtype<"tessel::pad", X, decltype(v)>()) {
    return tracer<T, S>{x.graph, -1};
  } else {
    prim::build::offsets lo{}, interior{};
    for (std::size_t a = 0; a < X::rank; ++a) {
      lo[a] = Config[a].lo;
      interior[a] = Config[a].interior;
    }
    return tracer<T, S>{x.graph, prim::build::pad(*x.graph, x.id, v.id, lo, interior, ir::dims_of<S>())};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <auto Config, Tensor X, class V>
auto pad(const X& x, const V& value) {
  return eagerly([](auto x, auto value) { return pad<Config>(x, value); }, x, value);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
