#pragma once
// tracer<T, S>: the symbolic tensor a traced function receives. Its type carries the dtype and the
// static shape (so shape rules run, and fail, at the user's call); its value names a node of the
// graph being built (ir/graph.hpp). Tracers exist only during constant evaluation inside jit and the
// transforms. This is the tracer's vocabulary that trees and ops name; ir/tracer.hpp appends nodes.

#include <cstddef>
#include <type_traits>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/shape.hpp"

namespace tessel {
namespace ir {
class graph_builder;
}

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

}  // namespace tessel
