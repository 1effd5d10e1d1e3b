// The elementwise unary primitives (every row of the unary table, on its near range) against lax's: values on random inputs (within each function's domain)
// and on every edge value, in f32 and bf16; vjp, jvp and vmap in f32.
#include "oracle.hpp"
#include "unary_table.hpp"

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
  std::uint32_t seed = 0;
#define TESSEL_ORACLE_UNARY(op, ref, lo, hi, log_spaced, scalar_ulp, xsimd_ulp, hwy_ulp, near_lo, near_hi, smooth) \
  unary(s, #op, [](auto x) { return tessel::op(x); }, near_lo, near_hi, ++seed);
  TESSEL_UNARY_TABLE(TESSEL_ORACLE_UNARY)
#undef TESSEL_ORACLE_UNARY
}
}  // namespace tessel::oracle
