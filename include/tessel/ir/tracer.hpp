#pragma once
// tracer<T, S>: the symbolic tensor a traced function receives. Its type carries the dtype and the
// static shape (so shape rules run, and fail, at the user's call); its value names a node of the
// graph being built. Tracers exist only during constant evaluation inside jit and the transforms.

#include <cstddef>
#include <initializer_list>
#include <type_traits>

#include "tessel/core/shape.hpp"
#include "tessel/ir/graph.hpp"

namespace tessel {

template <class T, class S>
struct tracer {
  using value_type = T;
  using shape_type = S;
  static constexpr std::size_t rank = S::rank;
  static constexpr std::size_t size = S::size;

  ir::graph_builder* graph = nullptr;
  int id = -1;
};

template <class X>
inline constexpr bool is_tracer_v = false;
template <class T, class S>
inline constexpr bool is_tracer_v<tracer<T, S>> = true;

template <class X>
concept Traced = is_tracer_v<std::remove_cvref_t<X>>;

// A scalar written in the program (`x * 0.5f`): weakly typed, it takes the tensor's dtype.
template <class X>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<X>> || std::is_same_v<std::remove_cvref_t<X>, bfloat16>;

namespace ir {

template <class S>
constexpr dims dims_of() {
  return dims::from<S::rank>(S::dims);
}

// Appends a node producing a T[S] and returns its tracer.
template <class T, class S>
constexpr tracer<T, S> emit(graph_builder* g, const primitive& p, std::initializer_list<int> operands,
                            const attributes& attr = {}, dtype_code operand_dtype = code_of<T>()) {
  node n;
  n.prim = &p;
  n.dtype = code_of<T>();
  n.operand_dtype = operand_dtype;
  n.shape = dims_of<S>();
  for (int o : operands) n.operands[n.arity++] = o;
  n.attr = attr;
  return tracer<T, S>{g, g->add(n)};
}

}  // namespace ir
}  // namespace tessel
