#pragma once
// matmul (jnp.matmul for these cases): [..., M, K] x [K, N] -> [..., M, N] and, with equal leading
// batch dims, [B, M, K] x [B, K, N] -> [B, M, N]. Built on dot_general; errors name tessel::matmul.

#include "tessel/prim/dot_general.hpp"

namespace tessel {

template <Traced A, Traced B>
constexpr auto matmul(A a, B b) {
  constexpr std::size_t ra = A::rank, rb = B::rank;
  if constexpr (rb == 2 || rb == 1) {
    return dot_general<axes<ra - 1>, axes<0>, axes<>, axes<>, "tessel::matmul">(a, b);
  } else if constexpr (ra == 3 && rb == 3) {
    return dot_general<axes<2>, axes<1>, axes<0>, axes<0>, "tessel::matmul">(a, b);
  } else {
    raise<"tessel::matmul: supported forms are [..., M, K] x [K, N] and [B, M, K] x [B, K, N]; fix: use dot_general", A>();
    return a;
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <Tensor A, Tensor B>
auto matmul(const A& a, const B& b) {
  return eagerly([](auto a, auto b) { return matmul(a, b); }, a, b);
}

}  // namespace tessel
