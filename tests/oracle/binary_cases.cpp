// The elementwise binary primitives and comparisons on floats against lax's: values on random inputs, a
// broadcast operand and every pair of edge values (f32, bf16); vjp, jvp and vmap in f32.

#include "oracle.hpp"

namespace tessel::oracle {
namespace {
using F = tensor<float, shape<3, 4>>;
using Row = tensor<float, shape<4>>;
using EA = tensor<float, shape<16, 16>>;
using HA = tensor<bfloat16, shape<16, 16>>;

// One float binary function: random inputs in [lo, hi] with all transforms, a broadcast row operand, every
// pair of f32 and of bf16 edge values.
template <class Fn>
void binary(suite& s, const std::string& name, Fn f, double lo, double hi, std::uint32_t seed) {
  check(s, name, name, f, options{lo, hi}, uniform<F>(seed, lo, hi), uniform<F>(seed + 1, lo, hi));
  check(s, name, name + "@broadcast", f, options{lo, hi}, uniform<F>(seed + 2, lo, hi), uniform<Row>(seed + 3, lo, hi));
  check(s, name, name + "@edge", f, options{.transforms = false}, edges<EA, 16>(), edges<EA>());
  check(s, name, name + "@edge_bf16", f, options{.transforms = false}, edges<HA, 16>(), edges<HA>());
}
}  // namespace

void binary_cases(suite& s) {
  binary(s, "add", [](auto a, auto b) { return tessel::add(a, b); }, -3, 3, 1);
  binary(s, "sub", [](auto a, auto b) { return tessel::sub(a, b); }, -3, 3, 2);
  binary(s, "mul", [](auto a, auto b) { return tessel::mul(a, b); }, -3, 3, 3);
  binary(s, "div", [](auto a, auto b) { return tessel::div(a, b); }, 0.5, 3, 4);
  binary(s, "max", [](auto a, auto b) { return tessel::max(a, b); }, -3, 3, 5);
  binary(s, "min", [](auto a, auto b) { return tessel::min(a, b); }, -3, 3, 6);
  binary(s, "pow", [](auto a, auto b) { return tessel::pow(a, b); }, 0.2, 3, 7);
  binary(s, "eq", [](auto a, auto b) { return tessel::eq(a, b); }, -2, 2, 8);
  binary(s, "ne", [](auto a, auto b) { return tessel::ne(a, b); }, -2, 2, 9);
  binary(s, "lt", [](auto a, auto b) { return tessel::lt(a, b); }, -2, 2, 10);
  binary(s, "le", [](auto a, auto b) { return tessel::le(a, b); }, -2, 2, 11);
  binary(s, "gt", [](auto a, auto b) { return tessel::gt(a, b); }, -2, 2, 12);
  binary(s, "ge", [](auto a, auto b) { return tessel::ge(a, b); }, -2, 2, 13);
}
}  // namespace tessel::oracle
