#pragma once
// A softmax over a row kernel's rows (ops/softmax.hpp) run as one routine instead of member by member,
// as XLA's GPU backend rewrites the softmax "diamond" into one kernel. Member by member, a row of 1024
// floats went through eight calls and five passes (the shift, the exp, the sum and the division each
// store or load the row once more), and the shift's tile was stored only to be read back: 1.24 ms for
// 4096 x 1024 on two threads (AMD EPYC, Zen 4). Here each row is read for its maximum, then e^(x - max)
// is computed and stored in one pass, summed, and divided in place.
//
// The bits are the members': the maximum and the sum are the reduce members' own row function
// (prim/family/reduce-inl.hpp), the shift, e^x and the division their rules on the same SIMD batches,
// which is why it runs only where the members would take those batches: rows a whole number of 16-float
// vectors long (no scalar tail), e^x on its xsimd path (kernels::forced_math_path or default_path).
//
// The pattern and the routine name primitives, so they live here, among the primitives; the executor
// (run/loops.hpp) asks for the span and runs it without naming any. Included only where the executor is
// compiled (it parses xsimd).

#include <cstddef>
#include <string_view>

#include <xsimd/xsimd.hpp>

#include "tessel/kernels/hwy_math.hpp"
#include "tessel/prim/all.hpp"
#include "tessel/prim/family/elementwise-inl.hpp"

namespace tessel::prim {

// Members [first, last] of a row kernel that are a softmax of member or value x:
//   r1 = reduce_max(x), [stop_gradient(r1),] b1 = broadcast(.), s = sub(x, b1), e = exp(s),
//   r2 = reduce_sum(e), b2 = broadcast(r2), y = div(e, b2)
// x the operand both the maximum and the shift read; y the last.
struct softmax_span {
  int first = -1, last = -1;
  int x = -1;    // node id
  int sum = -1;  // member index of r2
  bool found() const { return first >= 0; }
};

// The softmax among a row kernel's `count` members (member(j): the j-th member's node id; node(id): a node
// of the program), if they hold one the routine can run: all f32, rows of `row_shape` a multiple of 16
// floats long (`inner`), and `fits(span)`, what the plan must allow besides (x's tile holding its rows
// whole; r1 .. b2 read by nothing but each other, neither stored nor the kernel's root).
template <class Member, class Node, class Fits>
softmax_span find_softmax(int count, Member member, Node node, const ir::dims& row_shape, std::size_t inner, Fits fits) {
  if (inner == 0 || inner % 16 != 0) return {};
  auto is = [&](int j, std::string_view name, bool full) {  // full: of the row kernel's shape, else one value per row
    if (j >= count) return false;
    const ir::node& n = node(member(j));
    if (n.prim->name != name || n.dtype != ir::dtype_code::f32 || (n.shape == row_shape) != full) return false;
    for (std::size_t a = 0; a < n.arity; ++a)
      if (node(n.operand(a)).dtype != ir::dtype_code::f32) return false;
    return true;
  };
  auto reads = [&](int j, std::size_t a, int k) { return node(member(j)).operand(a) == member(k); };
  for (int m = 0; m < count; ++m) {
    if (!is(m, "reduce_max", false)) continue;
    const int x = node(member(m)).operand(0);
    if (node(x).shape != row_shape) continue;
    int j = m + 1;
    if (is(j, "stop_gradient", false) && reads(j, 0, j - 1)) ++j;
    const int b1 = j, s = j + 1, e = j + 2, r2 = j + 3, b2 = j + 4, y = j + 5;
    if (!is(b1, "broadcast_in_dim", true) || !reads(b1, 0, b1 - 1)) continue;
    if (!is(s, "sub", true) || node(member(s)).operand(0) != x || !reads(s, 1, b1)) continue;
    if (!is(e, "exp", true) || !reads(e, 0, s)) continue;
    if (!is(r2, "reduce_sum", false) || !reads(r2, 0, e)) continue;
    if (!is(b2, "broadcast_in_dim", true) || !reads(b2, 0, r2)) continue;
    if (!is(y, "div", true) || !reads(y, 0, e) || !reads(y, 1, b2)) continue;
    const softmax_span span{m, y, x, r2};
    if (fits(span)) return span;
  }
  return {};
}

// Whether e^x takes its xsimd path now, as the routine computes it.
inline bool softmax_rows_applies() {
  kernels::math_path path = kernels::forced_math_path();
  if (path == kernels::math_path::automatic) path = default_path<exp_rule>();
  return path == kernels::math_path::xsimd;
}

// y = the softmax of each of `rows` rows of `inner` floats at x (inner a multiple of 16; y may be x), where
// max and sum are the softmax's reduce members: the maximum, e^(x - max) stored, its sum, the division in
// place. (Summing e^(x - max) in the pass that computes it, in the reduction's order, took 5% longer on
// AMD EPYC: the registers of four partial sums and of e^x's constants spill. The reductions called
// inlined here, not through the members' functions, took 3% longer.)
inline void softmax_rows(const ir::node& max, const ir::node& sum, const float* x, float* y, std::size_t rows,
                         std::size_t inner) {
  using batch = xsimd::batch<float>;
  for (std::size_t r = 0; r < rows; ++r, x += inner, y += inner) {
    float most = 0, total = 0;
    max.prim->init(max, &most, 1);
    max.prim->reduce_row(max, x, inner, &most);
    const batch shift(most);
    for (std::size_t i = 0; i < inner; i += batch::size)
      exp_rule::apply(sub_rule::apply(batch::load_unaligned(x + i), shift)).store_unaligned(y + i);
    sum.prim->init(sum, &total, 1);
    sum.prim->reduce_row(sum, y, inner, &total);
    const batch divisor(total);
    for (std::size_t i = 0; i < inner; i += batch::size)
      div_rule::apply(batch::load_unaligned(y + i), divisor).store_unaligned(y + i);
  }
}

}  // namespace tessel::prim
