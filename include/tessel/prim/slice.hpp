#pragma once
// slice (lax.slice): elements start, start + stride, ... below limit, on every axis.
//
//   slice<std::array{1, 0}, std::array{3, 4}>(x)              // f32[4,5] -> f32[2,4]
//   slice<std::array{0, 0}, std::array{4, 5}, std::array{2, 2}>(x)   // every other row and column: f32[2,3]
//   slice_in_dim<1, 2, 5>(x)                                   // columns 2, 3, 4 of every row
//
// Its VJP pads the cotangent back into the operand's shape with zeros (pad is slice's transpose).

#include <array>
#include <cstddef>
#include <cstdint>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/prim/family/layout.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {

// attr: start[0..rank), stride[0..rank).
inline box_side slice_source(const ir::node& n, const ir::node& operand) {
  box_side s;
  s.shape = operand.shape;
  for (std::size_t a = 0; a < n.shape.rank; ++a) {
    s.start[a] = static_cast<std::ptrdiff_t>(n.attr.ints[a]);
    s.step[a] = static_cast<std::ptrdiff_t>(n.attr.ints[n.shape.rank + a]);
  }
  return s;
}

// Work items of result rows (family/layout.hpp's row_items).
inline ir::item_plan slice_items(const ir::node& n, const ir::node* const*, std::size_t, std::size_t cache_bytes) {
  return row_items(n, cache_bytes);
}
inline void slice_item(const ir::item_args& a, const ir::item_plan& plan, std::size_t item) {
  const auto [first, last] = rows_of(*a.n, plan, item);
  copy_box(a.n->dtype, a.n->shape.d, a.n->shape.rank, slice_source(*a.n, *a.operands[0]), a.in[0], dense_side(a.n->shape), a.out,
           first, last);
}

constexpr void slice_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const std::size_t rank = n.shape.rank;
  build::offsets lo{}, interior{};
  for (std::size_t a = 0; a < rank; ++a) {
    lo[a] = n.attr.ints[a];
    interior[a] = n.attr.ints[rank + a] - 1;
  }
  out[0] = build::pad(g, ct, build::literal(g, n.dtype, 0.0), lo, interior, g[n.operands[0]].shape);
}
constexpr int slice_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  if (t[0] < 0) return -1;
  const ir::node n = g[node];
  build::offsets start{}, stride{};
  for (std::size_t a = 0; a < n.shape.rank; ++a) {
    start[a] = n.attr.ints[a];
    stride[a] = n.attr.ints[n.shape.rank + a];
  }
  return build::slice(g, t[0], start, stride, n.shape);
}

// vmap: the whole batch axis is kept (start 0, stride 1); the other axes are sliced as before.
constexpr int slice_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                          const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const auto b = static_cast<std::size_t>(axes[0]);
  const std::size_t rank = n.shape.rank;
  build::offsets start{}, stride{};
  for (std::size_t a = 0; a <= rank; ++a) {
    if (a == b) {
      stride[a] = 1;
      continue;
    }
    const std::size_t i = a < b ? a : a - 1;
    start[a] = n.attr.ints[i];
    stride[a] = n.attr.ints[rank + i];
  }
  out_axis = static_cast<int>(b);
  return build::slice(g, ops[0], start, stride, batching::insert_axis(n.shape, b, g[ops[0]].shape.d[b]));
}

inline void lower_slice(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const std::size_t rank = n.shape.rank;
  std::array<std::int64_t, ir::max_rank> limit{};
  for (std::size_t a = 0; a < rank; ++a)
    limit[a] = n.shape.d[a] == 0 ? n.attr.ints[a] : n.attr.ints[a] + (static_cast<std::int64_t>(n.shape.d[a]) - 1) * n.attr.ints[rank + a] + 1;
  w.lower_as("stablehlo.slice", ir::hlo_properties{}
                                    .i64s("limit_indices", {limit.data(), rank})
                                    .i64s("start_indices", {n.attr.ints.data(), rank})
                                    .i64s("strides", {n.attr.ints.data() + rank, rank}));
}
inline constexpr ir::primitive slice_p{.name = "slice",
                                       .kind = ir::prim_kind::layout,
                                       .plan_items = &slice_items,
                                       .run_item = &slice_item,
                                       .vjp = &slice_vjp,
                                       .jvp = &slice_jvp,
                                       .batch = &slice_batch,
                                       .flops_per_element = 0, .lower = &lower_slice};

// The result dims, or a compile error naming the first axis whose bounds are wrong.
template <class X, auto Starts, auto Limits, auto Strides>
consteval auto slice_dims() {
  using S = typename X::shape_type;
  constexpr std::size_t rank = S::rank;
  constexpr bool unit_strides = Strides.size() == 0;
  if constexpr (Starts.size() != rank || Limits.size() != rank || (!unit_strides && Strides.size() != rank)) {
    raise<fit<[] {
      message_builder m;
      m << "tessel::slice: ";
      append_type<X>(m) << " has rank " << static_cast<std::uint64_t>(rank) << " but "
                        << static_cast<std::uint64_t>(Starts.size()) << " starts, " << static_cast<std::uint64_t>(Limits.size())
                        << " limits and " << static_cast<std::uint64_t>(Strides.size())
                        << " strides were given; fix: give one start and one limit (and stride, or none) per axis";
      return m;
    }>()>();
    return dims_t<rank>{};
  } else {
    constexpr long bad = [] {
      for (std::size_t a = 0; a < rank; ++a) {
        const long start = static_cast<long>(Starts[a]), limit = static_cast<long>(Limits[a]);
        const long stride = unit_strides ? 1 : static_cast<long>(Strides[a]);
        if (start < 0 || start > limit || limit > static_cast<long>(S::dims[a]) || stride < 1) return static_cast<long>(a);
      }
      return -1L;
    }();
    if constexpr (bad >= 0) {
      raise<fit<[] {
        constexpr auto a = static_cast<std::size_t>(bad);
        message_builder m;
        m << "tessel::slice: on axis " << static_cast<std::uint64_t>(a) << " of ";
        append_type<X>(m) << " the slice start " << static_cast<std::int64_t>(Starts[a]) << ", limit "
                          << static_cast<std::int64_t>(Limits[a]) << ", stride "
                          << static_cast<std::int64_t>(unit_strides ? 1 : static_cast<long>(Strides[a]))
                          << " breaks 0 <= start <= limit <= " << static_cast<std::uint64_t>(S::dims[a])
                          << " with stride >= 1; fix: keep the slice inside the axis";
        return m;
      }>()>();
      return dims_t<rank>{};
    } else {
      dims_t<rank> out{};
      for (std::size_t a = 0; a < rank; ++a) {
        const std::size_t stride = unit_strides ? 1 : static_cast<std::size_t>(Strides[a]);
        const auto length = static_cast<std::size_t>(Limits[a] - Starts[a]);
        out[a] = (length + stride - 1) / stride;
      }
      return out;
    }
  }
}

}  // namespace prim

// Unit strides, for slice's third argument.
inline constexpr std::array<long, 0> unit_strides{};

template <auto Starts, auto Limits, auto Strides = unit_strides, Traced X>
constexpr auto slice(X x) {
  using T = typename X::value_type;
  constexpr auto out = prim::slice_dims<X, Starts, Limits, Strides>();
  using S = shape_from<out>;
  if constexpr (Starts.size() != X::rank) {
    return tracer<T, S>{x.graph, -1};
  } else {
    prim::build::offsets start{}, stride{};
    for (std::size_t a = 0; a < X::rank; ++a) {
      start[a] = static_cast<std::int64_t>(Starts[a]);
      stride[a] = Strides.size() == 0 ? 1 : static_cast<std::int64_t>(Strides[a]);
    }
    return tracer<T, S>{x.graph, prim::build::slice(*x.graph, x.id, start, stride, ir::dims_of<S>())};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <auto Starts, auto Limits, auto Strides = unit_strides, Tensor X>
auto slice(const X& x) {
  return eagerly([](auto x) { return slice<Starts, Limits, Strides>(x); }, x);
}

// Elements [Start, Limit) (every Stride-th) along one axis, all of the others (lax.slice_in_dim).
template <long Axis, long Start, long Limit, long Stride = 1, Traced X>
constexpr auto slice_in_dim(X x) {
  constexpr std::size_t axis = normalize_axis<"tessel::slice_in_dim", X, Axis>();
  constexpr auto bounds = [] {
    std::array<std::array<long, X::rank>, 3> b{};
    for (std::size_t a = 0; a < X::rank; ++a) {
      b[0][a] = a == axis ? Start : 0;
      b[1][a] = a == axis ? Limit : static_cast<long>(X::shape_type::dims[a]);
      b[2][a] = a == axis ? Stride : 1;
    }
    return b;
  }();
  return slice<bounds[0], bounds[1], bounds[2]>(x);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <long Axis, long Start, long Limit, long Stride = 1, Tensor X>
auto slice_in_dim(const X& x) {
  return eagerly([](auto x) { return slice_in_dim<Axis, Start, Limit, Stride>(x); }, x);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
