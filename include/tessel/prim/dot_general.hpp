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

#include "tessel/backend/gemm.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/transpose.hpp"

namespace tessel {

template <std::size_t... Axes>
struct axes {
  static constexpr std::size_t count = sizeof...(Axes);
  static constexpr std::array<std::size_t, sizeof...(Axes)> values{Axes...};
};

namespace prim {

// The strided view of a dot_general node: sizes of the merged batch, M, N, K and operand strides.
struct dot_layout {
  std::size_t batch = 1, m = 1, n = 1, k = 1;
  std::size_t lhs_batch_stride = 0, rhs_batch_stride = 0;
  backend::matrix_view lhs, rhs;
};

// attr: [nb, nc, lhs batch..., rhs batch..., lhs contracting..., rhs contracting...]
constexpr dot_layout layout_of(const ir::node& n, const ir::node& lhs, const ir::node& rhs) {
  dot_layout d;
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
  d.lhs.row_stride = lhs_k_last ? d.k : 1;
  d.lhs.col_stride = lhs_k_last ? 1 : d.m;
  const bool rhs_k_first = nc == 0 || static_cast<std::size_t>(n.attr.ints[2 + 2 * nb + nc]) == nb;
  d.rhs.row_stride = rhs_k_first ? d.n : 1;
  d.rhs.col_stride = rhs_k_first ? 1 : d.k;
  d.lhs.bf16 = d.rhs.bf16 = n.operand_dtype == ir::dtype_code::bf16;
  return d;
}

// The whole contraction on one thread (the executor splits rows between threads itself).
inline void run_dot_general(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  dot_layout d = layout_of(n, *operands[0], *operands[1]);
  const std::size_t elem = n.operand_dtype == ir::dtype_code::bf16 ? 2 : 4;
  auto* scratch = static_cast<float*>(::operator new(backend::gemm_scratch::bytes, std::align_val_t{64}));
  auto* c = static_cast<float*>(::operator new(d.m * d.n * sizeof(float) + 64, std::align_val_t{64}));
  for (std::size_t b = 0; b < d.batch; ++b) {
    d.lhs.data = static_cast<const unsigned char*>(in[0]) + b * d.lhs_batch_stride * elem;
    d.rhs.data = static_cast<const unsigned char*>(in[1]) + b * d.rhs_batch_stride * elem;
    backend::gemm_rows(d.lhs, d.rhs, 0, d.m, d.n, d.k, c, d.n, scratch);
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

inline constexpr ir::primitive dot_general_p{.name = "dot_general", .kind = ir::prim_kind::contraction, .run = &run_dot_general};

template <fixed_string Op, class L, class R, class Lc, class Rc, class Lb, class Rb>
struct dot_check {
  using ls = typename L::shape_type;
  using rs = typename R::shape_type;
  static constexpr std::size_t nb = Lb::count, nc = Lc::count;

  // 0: fine; 1: counts differ; 2: axis out of range or repeated; 3: contracting sizes differ; 4: batch sizes differ
  static constexpr int problem = [] {
    if (Lc::count != Rc::count || Lb::count != Rb::count) return 1;
    std::array<bool, ir::max_rank> lu{}, ru{};
    auto use = [](auto& used, std::size_t axis, std::size_t rank) {
      if (axis >= rank || used[axis]) return false;
      used[axis] = true;
      return true;
    };
    for (std::size_t a : Lc::values) if (!use(lu, a, ls::rank)) return 2;
    for (std::size_t a : Lb::values) if (!use(lu, a, ls::rank)) return 2;
    for (std::size_t a : Rc::values) if (!use(ru, a, rs::rank)) return 2;
    for (std::size_t a : Rb::values) if (!use(ru, a, rs::rank)) return 2;
    for (std::size_t i = 0; i < Lc::count; ++i) if (ls::dims[Lc::values[i]] != rs::dims[Rc::values[i]]) return 3;
    for (std::size_t i = 0; i < Lb::count; ++i) if (ls::dims[Lb::values[i]] != rs::dims[Rb::values[i]]) return 4;
    return 0;
  }();

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

  // The result's dims: batch, lhs free, rhs free.
  static constexpr auto out_dims = [] {
    dims_t<ls::rank + rs::rank - 2 * nc - nb> d{};
    std::size_t j = 0;
    if constexpr (problem == 0) {
      for (std::size_t a : Lb::values) d[j++] = ls::dims[a];
      for (std::size_t a = 0; a < ls::rank; ++a)
        if (std::find(Lc::values.begin(), Lc::values.end(), a) == Lc::values.end() &&
            std::find(Lb::values.begin(), Lb::values.end(), a) == Lb::values.end())
          d[j++] = ls::dims[a];
      for (std::size_t a = 0; a < rs::rank; ++a)
        if (std::find(Rc::values.begin(), Rc::values.end(), a) == Rc::values.end() &&
            std::find(Rb::values.begin(), Rb::values.end(), a) == Rb::values.end())
          d[j++] = rs::dims[a];
    }
    return d;
  }();
};

// The permutation that puts an operand in [batch..., first..., second...] order, where first/second
// are its free and contracting axes in the order the GEMM needs.
template <std::size_t Rank, class Batch, class Contract, bool ContractLast>
constexpr std::array<std::size_t, Rank> canonical_order() {
  std::array<std::size_t, Rank> order{};
  std::size_t j = 0;
  for (std::size_t a : Batch::values) order[j++] = a;
  auto free_axes = [&] {
    for (std::size_t a = 0; a < Rank; ++a)
      if (std::find(Contract::values.begin(), Contract::values.end(), a) == Contract::values.end() &&
          std::find(Batch::values.begin(), Batch::values.end(), a) == Batch::values.end())
        order[j++] = a;
  };
  if (ContractLast) free_axes();
  for (std::size_t a : Contract::values) order[j++] = a;
  if (!ContractLast) free_axes();
  return order;
}

template <std::size_t Rank>
constexpr bool is_identity(const std::array<std::size_t, Rank>& p) {
  for (std::size_t i = 0; i < Rank; ++i)
    if (p[i] != i) return false;
  return true;
}

template <auto Order, Traced X, std::size_t... I>
constexpr auto apply_order(X x, std::index_sequence<I...>) {
  return transpose<Order[I]...>(x);
}

// Where axes of the original operand went after gemm_ready's transpose.
template <auto Order, class A>
constexpr auto moved_axes() {
  constexpr auto moved = [] {
    std::array<std::size_t, A::count> out{};
    for (std::size_t i = 0; i < A::count; ++i)
      for (std::size_t p = 0; p < Order.size(); ++p)
        if (Order[p] == A::values[i]) out[i] = p;
    return out;
  }();
  return moved;
}

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
    raise<"tessel::dot_general: integer and pred operands are not supported; fix: convert_element_type to f32">();
    return tracer<T, out_shape>{lhs.graph, -1};
  } else {
    // Bring each operand into a stride-readable layout; axes are then renumbered by position.
    constexpr auto lhs_order = [] {
      constexpr auto p = prim::canonical_order<L::rank, Lb, Lc, true>();
      constexpr auto q = prim::canonical_order<L::rank, Lb, Lc, false>();
      return prim::is_identity(q) ? q : p;
    }();
    constexpr auto rhs_order = [] {
      constexpr auto p = prim::canonical_order<R::rank, Rb, Rc, false>();
      constexpr auto q = prim::canonical_order<R::rank, Rb, Rc, true>();
      return prim::is_identity(q) ? q : p;
    }();
    auto l = prim::apply_order<lhs_order>(lhs, std::make_index_sequence<L::rank>{});
    auto r = prim::apply_order<rhs_order>(rhs, std::make_index_sequence<R::rank>{});
    constexpr auto lb = prim::moved_axes<lhs_order, Lb>();
    constexpr auto rb = prim::moved_axes<rhs_order, Rb>();
    constexpr auto lc = prim::moved_axes<lhs_order, Lc>();
    constexpr auto rc = prim::moved_axes<rhs_order, Rc>();
    ir::attributes a;
    a.push(static_cast<std::int64_t>(Lb::count));
    a.push(static_cast<std::int64_t>(Lc::count));
    for (std::size_t v : lb) a.push(static_cast<std::int64_t>(v));
    for (std::size_t v : rb) a.push(static_cast<std::int64_t>(v));
    for (std::size_t v : lc) a.push(static_cast<std::int64_t>(v));
    for (std::size_t v : rc) a.push(static_cast<std::int64_t>(v));
    return ir::emit<T, out_shape>(lhs.graph, prim::dot_general_p, {l.id, r.id}, a);
  }
}
}  // namespace tessel
