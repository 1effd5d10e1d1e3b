#pragma once
// dot_general (lax.dot_general): contracts lhs axes Lc with rhs axes Rc, batching over Lb / Rb.
// The result's axes are: the batch axes, then lhs's free axes, then rhs's free axes (lax's order).
// Takes f32 and bf16 (accumulated in f32; the result has the operands' dtype).
//
//   dot_general<axes<1>, axes<0>>(x, w)                   // [M,K] x [K,N] -> [M,N]
//   dot_general<axes<2>, axes<1>, axes<0>, axes<0>>(a, b) // [B,M,K] x [B,K,N] -> [B,M,N]
//
// Operands are kept in a layout the GEMM reads through strides ([batch, free, contracting] or
// [batch, contracting, free] for lhs, the mirror for rhs); any other order gets a transpose first.

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <new>

#include "tessel/kernels/gemm.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/prim/transpose.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel {

template <std::size_t... Axes>
struct axes {
  static constexpr std::size_t count = sizeof...(Axes);
  static constexpr std::array<std::size_t, sizeof...(Axes)> values{Axes...};
};

namespace prim {

// attr: [nb, nc, lhs batch..., rhs batch..., lhs contracting..., rhs contracting...]
constexpr ir::gemm_extent dot_general_extent(const ir::node& n, const ir::node& lhs, const ir::node& rhs) {
  ir::gemm_extent d;
  const auto nb = static_cast<std::size_t>(n.attr.ints[0]), nc = static_cast<std::size_t>(n.attr.ints[1]);
  for (std::size_t i = 0; i < nb; ++i) d.batch *= lhs.shape.d[i];
  // lhs is [b, free, contracting] when its first contracting axis is its last axes; else [b, contracting, free].
  const bool lhs_k_last = nc == 0 || static_cast<std::size_t>(n.attr.ints[2 + 2 * nb]) == lhs.shape.rank - nc;
  const std::size_t lhs_k_begin = lhs_k_last ? lhs.shape.rank - nc : nb;
  for (std::size_t i = nb; i < lhs.shape.rank; ++i) {
    if (i >= lhs_k_begin && i < lhs_k_begin + nc) d.k *= lhs.shape.d[i];
    else d.m *= lhs.shape.d[i];
  }
  d.n = 1;
  for (std::size_t i = nb; i < rhs.shape.rank; ++i) d.n *= rhs.shape.d[i];
  for (std::size_t i = 0; i < nc; ++i) d.n /= lhs.shape.d[lhs_k_begin + i] == 0 ? 1 : lhs.shape.d[lhs_k_begin + i];
  d.lhs_batch_stride = d.m * d.k;
  d.rhs_batch_stride = d.n * d.k;
  d.lhs.row = lhs_k_last ? d.k : 1;
  d.lhs.col = lhs_k_last ? 1 : d.m;
  const bool rhs_k_first = nc == 0 || static_cast<std::size_t>(n.attr.ints[2 + 2 * nb + nc]) == nb;
  d.rhs.row = rhs_k_first ? d.n : 1;
  d.rhs.col = rhs_k_first ? 1 : d.k;
  d.bf16 = n.operand_dtype == ir::dtype_code::bf16;
  return d;
}

// The whole contraction on one thread (the executor splits rows between threads itself).
inline void run_dot_general(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  const ir::gemm_extent d = dot_general_extent(n, *operands[0], *operands[1]);
  const std::size_t elem = ir::bytes_of(n.operand_dtype);
  auto* scratch = static_cast<float*>(::operator new(kernels::gemm_scratch_floats() * sizeof(float), std::align_val_t{64}));
  auto* c = static_cast<float*>(::operator new(d.m * d.n * sizeof(float) + 64, std::align_val_t{64}));
  for (std::size_t b = 0; b < d.batch; ++b) {
    const kernels::matrix_view lhs{static_cast<const unsigned char*>(in[0]) + b * d.lhs_batch_stride * elem, d.lhs.row, d.lhs.col, d.bf16};
    const kernels::matrix_view rhs{static_cast<const unsigned char*>(in[1]) + b * d.rhs_batch_stride * elem, d.rhs.row, d.rhs.col, d.bf16};
    kernels::select_gemm()(lhs, rhs, 0, d.m, d.n, d.k, c, d.n, scratch);
    if (n.dtype == ir::dtype_code::bf16) {
      auto* o = static_cast<bfloat16*>(out) + b * d.m * d.n;
      for (std::size_t i = 0; i < d.m * d.n; ++i) o[i] = bfloat16(c[i]);
    } else {
      std::copy_n(c, d.m * d.n, static_cast<float*>(out) + b * d.m * d.n);
    }
  }
  ::operator delete(c, std::align_val_t{64});
  ::operator delete(scratch, std::align_val_t{64});
}

// Reverse mode (JAX's transpose rules): each operand's cotangent is a dot_general of the result's
// cotangent with the other operand, contracting the other operand's free axes. The cotangent goes on
// the same side as the operand it is for, so that for a matmul both come out in the operand's layout
// (dx = ct . w^T, dw = x^T . ct) and need no transpose.
constexpr int dot_cotangent(ir::graph_builder& g, int ct, int other, const build::dot_dims& d, bool for_lhs,
                            std::size_t own_rank) {
  const ir::dims other_shape = g[other].shape;
  const auto& own_c = for_lhs ? d.lc : d.rc;
  const auto& own_b = for_lhs ? d.lb : d.rb;
  const auto& other_c = for_lhs ? d.rc : d.lc;
  const auto& other_b = for_lhs ? d.rb : d.lb;
  // ct's axes: [batch (nb), lhs free, rhs free]; the other operand's free axes start here:
  const std::size_t lhs_free = for_lhs ? own_rank - d.nb - d.nc : other_shape.rank - d.nb - d.nc;
  const std::size_t other_free_begin = for_lhs ? d.nb + lhs_free : d.nb;
  build::dot_dims e;  // in (ct, other) terms first
  e.nb = d.nb;
  std::array<std::size_t, ir::max_rank> ct_b{}, ot_b{}, ct_c{}, ot_c{};
  for (std::size_t i = 0; i < d.nb; ++i) {
    ct_b[i] = i;
    ot_b[i] = other_b[i];
  }
  std::size_t j = 0;
  for (std::size_t a = 0; a < other_shape.rank; ++a) {
    if (build::contains(other_c, d.nc, a) || build::contains(other_b, d.nb, a)) continue;
    ct_c[j] = other_free_begin + j;
    ot_c[j] = a;
    ++j;
  }
  e.nc = j;
  if (for_lhs) {
    e.lb = ct_b, e.rb = ot_b, e.lc = ct_c, e.rc = ot_c;
  } else {
    e.lb = ot_b, e.rb = ct_b, e.lc = ot_c, e.rc = ct_c;
  }
  const int r = for_lhs ? build::dot_general(g, ct, other, e) : build::dot_general(g, other, ct, e);
  // r's axes: [batch, then (lhs) own free, other's contracting sorted | (rhs) other's contracting sorted, own free].
  std::array<std::size_t, ir::max_rank> position{};  // own axis -> r axis
  for (std::size_t i = 0; i < d.nb; ++i) position[own_b[i]] = i;
  const std::size_t own_free_begin = for_lhs ? d.nb : d.nb + d.nc;
  const std::size_t contracted_begin = for_lhs ? d.nb + (own_rank - d.nb - d.nc) : d.nb;
  std::size_t next = own_free_begin;
  for (std::size_t a = 0; a < own_rank; ++a)
    if (!build::contains(own_c, d.nc, a) && !build::contains(own_b, d.nb, a)) position[a] = next++;
  for (std::size_t i = 0; i < d.nc; ++i) {
    std::size_t rank_in_sorted = 0;  // other_c[i]'s place among the other's contracting axes, sorted
    for (std::size_t k = 0; k < d.nc; ++k) rank_in_sorted += other_c[k] < other_c[i];
    position[own_c[i]] = contracted_begin + rank_in_sorted;
  }
  return build::transpose(g, r, position);
}

constexpr void dot_general_vjp(ir::graph_builder& g, int node, int ct, std::array<int, ir::max_operands>& out) {
  const ir::node n = g[node];
  const build::dot_dims d = build::dims_of_dot(n);
  const int lhs = n.operands[0], rhs = n.operands[1];
  const std::size_t lhs_rank = g[lhs].shape.rank, rhs_rank = g[rhs].shape.rank;
  out[0] = dot_cotangent(g, ct, rhs, d, true, lhs_rank);
  out[1] = dot_cotangent(g, ct, lhs, d, false, rhs_rank);
}

// Bilinear: d(a.b) = da.b + a.db.
constexpr int dot_general_jvp(ir::graph_builder& g, int node, const std::array<int, ir::max_operands>& t) {
  const ir::node n = g[node];
  const build::dot_dims d = build::dims_of_dot(n);
  const int left = t[0] < 0 ? -1 : build::dot_general(g, t[0], n.operands[1], d);
  const int right = t[1] < 0 ? -1 : build::dot_general(g, n.operands[0], t[1], d);
  return build::add(g, left, right);
}

// vmap: a batch axis on both operands becomes a (leading) batch dimension of the contraction; on one
// operand only, it is one more free axis of that operand (x[B,K] . w[K,N] is a plain matmul).
constexpr int dot_general_batch(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                                const std::array<int, ir::max_operands>& axes, int& out_axis) {
  const build::dot_dims d = build::dims_of_dot(n);
  const int bl = axes[0], br = axes[1];
  auto shift = [](std::size_t a, int b) { return b >= 0 && a >= static_cast<std::size_t>(b) ? a + 1 : a; };
  build::dot_dims e;
  e.nc = d.nc;
  for (std::size_t i = 0; i < d.nc; ++i) {
    e.lc[i] = shift(d.lc[i], bl);
    e.rc[i] = shift(d.rc[i], br);
  }
  const std::size_t extra = bl >= 0 && br >= 0 ? 1 : 0;
  e.nb = d.nb + extra;
  if (extra) {
    e.lb[0] = static_cast<std::size_t>(bl);
    e.rb[0] = static_cast<std::size_t>(br);
  }
  for (std::size_t i = 0; i < d.nb; ++i) {
    e.lb[i + extra] = shift(d.lb[i], bl);
    e.rb[i + extra] = shift(d.rb[i], br);
  }
  const std::size_t lr = g[ops[0]].shape.rank;
  auto free_before = [&](const std::array<std::size_t, ir::max_rank>& c, const std::array<std::size_t, ir::max_rank>& bt,
                         std::size_t axis) {
    std::size_t k = 0;
    for (std::size_t a = 0; a < axis; ++a) k += !build::contains(c, e.nc, a) && !build::contains(bt, e.nb, a);
    return k;
  };
  if (extra) out_axis = 0;
  else if (bl >= 0) out_axis = static_cast<int>(e.nb + free_before(e.lc, e.lb, static_cast<std::size_t>(bl)));
  else out_axis = static_cast<int>(e.nb + (lr - e.nb - e.nc) + free_before(e.rc, e.rb, static_cast<std::size_t>(br)));
  return build::dot_general(g, ops[0], ops[1], e);
}

// The sum over steps of dot(a_i, b_i) is dot(A, B) with the step axis (0 of both) contracted as well.
constexpr int dot_general_sum_over_steps(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& stacked) {
  const build::dot_dims d = build::dims_of_dot(n);
  build::dot_dims e;
  e.nb = d.nb;
  e.nc = d.nc + 1;
  for (std::size_t i = 0; i < d.nb; ++i) {
    e.lb[i] = d.lb[i] + 1;
    e.rb[i] = d.rb[i] + 1;
  }
  e.lc[0] = e.rc[0] = 0;
  for (std::size_t i = 0; i < d.nc; ++i) {
    e.lc[i + 1] = d.lc[i] + 1;
    e.rc[i + 1] = d.rc[i] + 1;
  }
  return build::dot_general(g, stacked[0], stacked[1], e);
}

// StableHLO: attr [nb, nc, lhs batch..., rhs batch..., lhs contracting..., rhs contracting...]; bf16
// operands give an f32 product (the kernels accumulate in f32), rounded once to bf16.
inline void lower_dot_general(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const auto nb = static_cast<std::size_t>(n.attr.ints[0]), nc = static_cast<std::size_t>(n.attr.ints[1]);
  auto list = [&](std::size_t first, std::size_t count) {
    std::string s = "[";
    for (std::size_t i = 0; i < count; ++i) s += (i ? ", " : "") + std::to_string(n.attr.ints[first + i]);
    return s + "]";
  };
  std::string numbers = "#stablehlo.dot<";
  if (nb) numbers += "lhs_batching_dimensions = " + list(2, nb) + ", rhs_batching_dimensions = " + list(2 + nb, nb) + ", ";
  numbers += "lhs_contracting_dimensions = " + list(2 + 2 * nb, nc) + ", rhs_contracting_dimensions = " + list(2 + 2 * nb + nc, nc) + ">";
  ir::hlo_properties p;
  p.add("dot_dimension_numbers", numbers).add("precision_config", "[#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]");
  const ir::hlo_value product = w.emit("stablehlo.dot_general", {w.operand(0), w.operand(1)}, p, ir::hlo_type(ir::dtype_code::f32, n.shape));
  w.define(n.dtype == ir::dtype_code::f32 ? product : w.convert(product, n.dtype, n.shape));
}
inline constexpr ir::primitive dot_general_p{.name = "dot_general",
                                             .kind = ir::prim_kind::contraction,
                                             .run = &run_dot_general,
                                             .extent = &dot_general_extent,
                                             .vjp = &dot_general_vjp,
                                             .jvp = &dot_general_jvp,
                                             .batch = &dot_general_batch,
                                             .sum_over_steps = &dot_general_sum_over_steps, .lower = &lower_dot_general};

template <fixed_string Op, class L, class R, class Lc, class Rc, class Lb, class Rb>
struct dot_check {
  using ls = typename L::shape_type;
  using rs = typename R::shape_type;
  static constexpr std::size_t nb = Lb::count, nc = Lc::count;

  // The axes as the value-level rule takes them (lhs's counts; problem 1 when rhs names other counts).
  static constexpr build::dot_dims axes = [] {
    build::dot_dims d;
    d.nc = Lc::count;
    d.nb = Lb::count;
    for (std::size_t i = 0; i < Lc::count && i < ir::max_rank; ++i) d.lc[i] = Lc::values[i];
    for (std::size_t i = 0; i < Rc::count && i < ir::max_rank; ++i) d.rc[i] = Rc::values[i];
    for (std::size_t i = 0; i < Lb::count && i < ir::max_rank; ++i) d.lb[i] = Lb::values[i];
    for (std::size_t i = 0; i < Rb::count && i < ir::max_rank; ++i) d.rb[i] = Rb::values[i];
    return d;
  }();

  // 0: fine; 1: counts differ; 2: axis out of range or repeated; 3: contracting sizes differ; 4: batch sizes
  // differ (build::dot_problem, the rule the value-level builder follows).
  static constexpr int problem = Lc::count != Rc::count || Lb::count != Rb::count ? 1
                                 : Lc::count + Lb::count > ls::rank || Rc::count + Rb::count > rs::rank
                                     ? 2  // more axes than the operand has: one is out of range or named twice
                                     : build::dot_problem(ir::dims_of<ls>(), ir::dims_of<rs>(), axes);

  static consteval bool report() {
    if constexpr (problem != 0) {
      raise<fit<[] {
        message_builder m;
        m << Op << ": ";
        if (problem == 1) m << "lhs and rhs name different numbers of contracting or batch axes for ";
        if (problem == 2) m << "an axis is out of range or named twice for ";
        if (problem == 3) m << "contracting dimensions differ: ";
        if (problem == 4) m << "batch dimensions differ: ";
        m << "lhs ";
        append_type<L>(m) << " and rhs ";
        append_type<R>(m);
        if (problem == 3) {
          for (std::size_t i = 0; i < Lc::count; ++i)
            if (ls::dims[Lc::values[i]] != rs::dims[Rc::values[i]]) {
              m << " (lhs axis " << static_cast<std::uint64_t>(Lc::values[i]) << " has "
                << static_cast<std::uint64_t>(ls::dims[Lc::values[i]]) << ", rhs axis "
                << static_cast<std::uint64_t>(Rc::values[i]) << " has " << static_cast<std::uint64_t>(rs::dims[Rc::values[i]])
                << ")";
              break;
            }
          m << "; fix: contract axes of equal size (transpose an operand, or check the order of the operands)";
        } else {
          m << "; fix: name each axis once, the same number of lhs and rhs axes, of equal sizes";
        }
        return m;
      }>()>();
    }
    return problem == 0;
  }

  // The result's dims: batch, lhs free, rhs free (build::dot_result_shape).
  static constexpr auto out_dims = [] {
    dims_t<ls::rank + rs::rank - 2 * nc - nb> d{};
    if constexpr (problem == 0) {
      const ir::dims out = build::dot_result_shape(ir::dims_of<ls>(), ir::dims_of<rs>(), axes);
      for (std::size_t j = 0; j < d.size(); ++j) d[j] = out.d[j];
    }
    return d;
  }();
};

}  // namespace prim

template <class Lc, class Rc, class Lb = axes<>, class Rb = axes<>, fixed_string Op = "tessel::dot_general", Traced L,
          Traced R>
constexpr auto dot_general(L lhs, R rhs) {
  using T = typename L::value_type;
  using check = prim::dot_check<Op, L, R, Lc, Rc, Lb, Rb>;
  using out_shape = shape_from<check::out_dims>;
  if constexpr (!require_same_dtype<Op, L, R>() || !check::report()) {
    return tracer<T, out_shape>{lhs.graph, -1};
  } else if constexpr (!FloatingDType<T>) {
    raise<"tessel::dot_general: integer and pred operands are not supported; fix: convert_element_type to f32", L>();
    return tracer<T, out_shape>{lhs.graph, -1};
  } else {
    prim::build::dot_dims d;
    d.nb = Lb::count;
    d.nc = Lc::count;
    for (std::size_t i = 0; i < Lb::count; ++i) d.lb[i] = Lb::values[i];
    for (std::size_t i = 0; i < Rb::count; ++i) d.rb[i] = Rb::values[i];
    for (std::size_t i = 0; i < Lc::count; ++i) d.lc[i] = Lc::values[i];
    for (std::size_t i = 0; i < Rc::count; ++i) d.rc[i] = Rc::values[i];
    return tracer<T, out_shape>{lhs.graph, prim::build::dot_general(*lhs.graph, lhs.id, rhs.id, d)};
  }
}

// Concrete tensors: evaluated at once, as a one-op jit (core/eager.hpp).
template <class Lc, class Rc, class Lb = axes<>, class Rb = axes<>, fixed_string Op = "tessel::dot_general", Tensor L, Tensor R>
auto dot_general(const L& lhs, const R& rhs) {
  return eagerly([](auto lhs, auto rhs) { return dot_general<Lc, Rc, Lb, Rb, Op>(lhs, rhs); }, lhs, rhs);
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
