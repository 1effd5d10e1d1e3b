#pragma once
// pow (lax.pow): a^b elementwise with NumPy broadcasting, for f32 and bf16 (C's powf semantics:
// pow(x, 0) = 1 even for NaN x; a negative base with a non-integer exponent gives NaN).

#include <cmath>

#include "tessel/prim/family/elementwise.hpp"

namespace tessel {
namespace prim {
struct pow_rule {
  static constexpr fixed_string name = "tessel::pow";
  static constexpr accepts domain = accepts::floating;
  static float apply(float a, float b) { return std::pow(a, b); }
};
inline constexpr ir::primitive pow_p = binary_primitive<pow_rule>("pow", 20);
}  // namespace prim

template <class A, class B>
  requires(Traced<A> || Traced<B>)
constexpr auto pow(A a, B b) {
  return prim::binary<prim::pow_p, prim::pow_rule>(a, b);
}
}  // namespace tessel
