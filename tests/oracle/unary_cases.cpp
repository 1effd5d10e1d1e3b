// The elementwise unary primitives against lax's: values on random inputs (within each function's domain)
// and on every edge value, in f32 and bf16; vjp, jvp and vmap in f32.
#include "oracle.hpp"

namespace tessel::oracle {
namespace {
using F = tensor<float, shape<3, 4>>;
using E = tensor<float, shape<16>>;
using H = tensor<bfloat16, shape<16>>;

// One unary function: random f32 inputs in [lo, hi] with all transforms; the edge values in f32 and bf16;
// random bf16 inputs.
template <class Fn>
void unary(suite& s, const std::string& name, Fn f, double lo, double hi, std::uint32_t seed) {
  check(s, name, name, f, options{lo, hi}, uniform<F>(seed, lo, hi));
  check(s, name, name + "@edge", f, options{.transforms = false}, edges<E>());
  check(s, name, name + "@edge_bf16", f, options{.transforms = false}, edges<H>());
  check(s, name, name + "@bf16", f, options{.transforms = false}, uniform<H>(seed + 1, lo, hi));
}
}  // namespace

void unary_cases(suite& s) {
  unary(s, "abs", [](auto x) { return tessel::abs(x); }, -3, 3, 1);
  unary(s, "cbrt", [](auto x) { return tessel::cbrt(x); }, 0.1, 8, 2);
  unary(s, "cos", [](auto x) { return tessel::cos(x); }, -6, 6, 3);
  unary(s, "erf", [](auto x) { return tessel::erf(x); }, -3, 3, 4);
  unary(s, "erf_inv", [](auto x) { return tessel::erf_inv(x); }, -0.99, 0.99, 5);
  unary(s, "exp", [](auto x) { return tessel::exp(x); }, -10, 10, 6);
  unary(s, "expm1", [](auto x) { return tessel::expm1(x); }, -3, 3, 7);
  unary(s, "floor", [](auto x) { return tessel::floor(x); }, -5, 5, 8);
  unary(s, "log", [](auto x) { return tessel::log(x); }, 0.01, 10, 9);
  unary(s, "log1p", [](auto x) { return tessel::log1p(x); }, -0.9, 5, 10);
  unary(s, "logistic", [](auto x) { return tessel::logistic(x); }, -8, 8, 11);
  unary(s, "neg", [](auto x) { return tessel::neg(x); }, -3, 3, 12);
  unary(s, "rsqrt", [](auto x) { return tessel::rsqrt(x); }, 0.05, 10, 13);
  unary(s, "sign", [](auto x) { return tessel::sign(x); }, -3, 3, 14);
  unary(s, "sin", [](auto x) { return tessel::sin(x); }, -6, 6, 15);
  unary(s, "sqrt", [](auto x) { return tessel::sqrt(x); }, 0.01, 10, 16);
  unary(s, "tanh", [](auto x) { return tessel::tanh(x); }, -5, 5, 17);
}
}  // namespace tessel::oracle
