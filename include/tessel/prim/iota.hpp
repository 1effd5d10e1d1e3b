#pragma once
// iota (lax.broadcasted_iota): a T[S] whose value at each index is that index's position along axis
// Dimension. It is computed from the index alone, so it fuses into any loop and costs no memory.
//
//   broadcasted_iota<std::int32_t, shape<4, 10>, 1>(x)   // x: any tracer of the program (names the graph)

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/family/elementwise.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {
namespace prim {

template <class V>
void iota_as(const ir::node& n, std::size_t first, std::size_t count, void* out) {
  const auto axis = static_cast<std::size_t>(n.attr.ints[0]);
  std::size_t stride = 1;
  for (std::size_t i = axis + 1; i < n.shape.rank; ++i) stride *= n.shape.d[i];
  const std::size_t size = n.shape.d[axis];
  V* y = static_cast<V*>(out);
  // Element p holds (p / stride) % size: runs of `stride` equal values, counting up and wrapping at size.
  // Two divisions per tile, not per element.
  std::size_t value = (first / stride) % size;
  if (stride == 1) {
    for (std::size_t i = 0; i < count; ++i) {
      y[i] = static_cast<V>(value);
      if (++value == size) value = 0;
    }
    return;
  }
  for (std::size_t i = 0, within = first % stride; i < count; within = 0) {
    const std::size_t run = std::min(count - i, stride - within);
    std::fill_n(y + i, run, static_cast<V>(value));
    i += run;
    if (++value == size) value = 0;
  }
}

inline void generate_iota(const ir::node& n, std::size_t first, std::size_t count, void* out) {
  visit_dtype(n.dtype, [&]<class T>(T) { iota_as<tile_t<T>>(n, first, count, out); });
}

inline void lower_iota(ir::stablehlo_writer& w) {
  w.lower_as("stablehlo.iota", ir::hlo_properties{}.i64("iota_dimension", w.current().attr.ints[0]));
}
inline constexpr ir::primitive iota_p{.name = "iota", .kind = ir::prim_kind::generator, .generate = &generate_iota,
                                      .differentiable = false, .flops_per_element = 0, .lower = &lower_iota};
}  // namespace prim

template <class T, class S, long Dimension, Traced Anchor>
constexpr auto broadcasted_iota(Anchor anchor) {
  require_dtype<T, "tessel::broadcasted_iota">();
  constexpr std::size_t axis = normalize_axis<"tessel::broadcasted_iota", S, Dimension>();
  ir::attributes a;
  a.push(static_cast<std::int64_t>(axis));
  return ir::emit<T, S>(anchor.graph, prim::iota_p, {}, a);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
