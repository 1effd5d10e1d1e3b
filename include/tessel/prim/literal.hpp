#pragma once
// literal: a scalar written in the traced program (`x * 0.5f`). Its value is part of the node, so two
// different literals are never merged, and the value is known when the plan is made.

#include "tessel/ir/tracer.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel::prim {

inline void lower_literal(ir::stablehlo_writer& w) { w.define(w.constant(w.current().dtype, w.current().attr.scalar)); }
inline constexpr ir::primitive literal_p{.name = "literal", .kind = ir::prim_kind::literal, .flops_per_element = 0, .lower = &lower_literal};

// A T[] holding value (a double holds every f32, bf16, s32, u32 and pred value exactly).
template <class T>
constexpr tracer<T, shape<>> literal(ir::graph_builder* g, double value) {
  ir::attributes a;
  if constexpr (std::is_same_v<T, bool>) {
    a.scalar = value != 0 ? 1.0 : 0.0;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    a.scalar = static_cast<float>(bfloat16(static_cast<float>(value)));
  } else if constexpr (std::is_same_v<T, float>) {
    a.scalar = static_cast<float>(value);
  } else {
    a.scalar = static_cast<double>(static_cast<T>(value));
  }
  return ir::emit<T, shape<>>(g, literal_p, {}, a);
}

}  // namespace tessel::prim

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
