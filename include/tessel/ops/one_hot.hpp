#pragma once
// one_hot<Classes>(labels): s32[...] labels -> T[..., Classes] with 1 at each label and 0 elsewhere
// (labels outside [0, Classes) give an all-zero row, as jax.nn.one_hot).

#include "tessel/prim/broadcast_in_dim.hpp"
#include "tessel/prim/convert_element_type.hpp"
#include "tessel/prim/eq.hpp"
#include "tessel/prim/iota.hpp"

namespace tessel {
namespace ops_detail {
template <class S, Traced L, std::size_t... I>
constexpr auto broadcast_leading(L labels, std::index_sequence<I...>) {
  return broadcast_in_dim<S, I...>(labels);
}
}  // namespace ops_detail

template <std::size_t Classes, class T = float, Traced L>
constexpr auto one_hot(L labels) {
  using S = insert_axis_t<typename L::shape_type, -1, Classes>;
  auto spread = ops_detail::broadcast_leading<S>(labels, std::make_index_sequence<L::rank>{});
  auto classes = broadcasted_iota<typename L::value_type, S, -1>(labels);
  return convert_element_type<T>(spread == classes);
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <std::size_t Classes, class T = float, Tensor L>
auto one_hot(const L& labels) {
  return eagerly([](auto labels) { return one_hot<Classes, T>(labels); }, labels);
}

}  // namespace tessel
