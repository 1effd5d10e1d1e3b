#pragma once
// Appending nodes to the graph being traced: emit makes a node and returns its tracer
// (core/tracer.hpp).

#include <cstddef>
#include <initializer_list>
#include <type_traits>

#include "tessel/core/shape.hpp"
#include "tessel/core/eager.hpp"  // every op's overload for concrete tensors
#include "tessel/core/tracer.hpp"
#include "tessel/ir/graph.hpp"

namespace tessel {
namespace ir {

template <class S>
constexpr dims dims_of() {
  return dims::from<S::rank>(S::dims);
}

// Appends a node producing a T[S] and returns its tracer.
template <class T, class S>
constexpr tracer<T, S> emit(graph_builder* g, const primitive& p, std::initializer_list<int> operands,
                            const attributes& attr = {}, dtype_code operand_dtype = code_of<T>()) {
  return tracer<T, S>{g, make_node(*g, p, code_of<T>(), dims_of<S>(), operands, attr, operand_dtype)};
}

}  // namespace ir
}  // namespace tessel
