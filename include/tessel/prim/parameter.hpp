#pragma once
// parameter: an argument of the traced function. Its value comes from the caller's tensor at run time.

#include <cstdint>

#include "tessel/ir/tracer.hpp"

namespace tessel::prim {

inline constexpr ir::primitive parameter_p{.name = "parameter", .kind = ir::prim_kind::parameter, .flops_per_element = 0};

// Argument `index` of the traced function, typed T[S]; inside shard_map it varies along the mesh axes
// its in_spec splits it over (`varying`).
template <class T, class S>
constexpr tracer<T, S> parameter(ir::graph_builder* g, int index, std::uint8_t varying = 0) {
  ir::node n;
  n.varying = varying;
  n.prim = &parameter_p;
  n.dtype = n.operand_dtype = ir::code_of<T>();
  n.shape = ir::dims_of<S>();
  n.attr.push(index);
  return tracer<T, S>{g, g->add_parameter(n)};
}

}  // namespace tessel::prim

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
