#pragma once
// The one data movement behind slice, pad and concatenate: copy a box of elements between two
// row-major buffers, each side walked from its own start with its own step per axis.
//
//   slice:        box = result shape, source from `start` by `stride`, destination dense
//   pad:          box = the operand elements that land inside the result, destination by interior + 1
//   concatenate:  box = one operand, destination offset along the joined axis

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

#include "tessel/ir/graph.hpp"

namespace tessel::prim {

struct box_side {
  ir::dims shape{};                                  // the buffer's shape
  std::array<std::ptrdiff_t, ir::max_rank> start{};  // index of the box's first element, per axis
  std::array<std::ptrdiff_t, ir::max_rank> step{};   // index step per box step, per axis
};

// Rows [row_begin, row_end) of the box (a row: its last axis), or every row when row_end is past them.
template <std::size_t Bytes>
void copy_box_typed(const std::array<std::size_t, ir::max_rank>& extent, std::size_t rank, const box_side& from,
                    const unsigned char* src, const box_side& to, unsigned char* dst, std::size_t row_begin,
                    std::size_t row_end) {
  std::array<std::ptrdiff_t, ir::max_rank> src_step{}, dst_step{};
  std::ptrdiff_t src_at = 0, dst_at = 0, src_stride = 1, dst_stride = 1;
  std::size_t total = 1;
  for (std::size_t a = rank; a-- > 0;) {
    src_step[a] = from.step[a] * src_stride;
    dst_step[a] = to.step[a] * dst_stride;
    src_at += from.start[a] * src_stride;
    dst_at += to.start[a] * dst_stride;
    src_stride *= static_cast<std::ptrdiff_t>(from.shape.d[a]);
    dst_stride *= static_cast<std::ptrdiff_t>(to.shape.d[a]);
    total *= extent[a];
  }
  if (total == 0) return;
  const std::size_t inner = rank ? extent[rank - 1] : 1;
  const std::ptrdiff_t si = rank ? src_step[rank - 1] : 0, di = rank ? dst_step[rank - 1] : 0;
  const bool dense_rows = si == 1 && di == 1;
  std::array<std::size_t, ir::max_rank> index{};
  row_end = std::min(row_end, total / inner);
  for (std::size_t a = rank > 0 ? rank - 1 : 0, rest = row_begin; a-- > 0;) {  // the odometer at row_begin
    index[a] = rest % extent[a];
    rest /= extent[a];
    src_at += src_step[a] * static_cast<std::ptrdiff_t>(index[a]);
    dst_at += dst_step[a] * static_cast<std::ptrdiff_t>(index[a]);
  }
  for (std::size_t row = row_begin; row < row_end; ++row) {
    if (dense_rows) {
      std::memcpy(dst + dst_at * static_cast<std::ptrdiff_t>(Bytes), src + src_at * static_cast<std::ptrdiff_t>(Bytes), inner * Bytes);
    } else {
      for (std::size_t j = 0; j < inner; ++j)
        std::memcpy(dst + (dst_at + static_cast<std::ptrdiff_t>(j) * di) * static_cast<std::ptrdiff_t>(Bytes),
                    src + (src_at + static_cast<std::ptrdiff_t>(j) * si) * static_cast<std::ptrdiff_t>(Bytes), Bytes);
    }
    for (std::size_t a = rank > 0 ? rank - 1 : 0; a-- > 0;) {  // advance the odometer over the outer axes
      src_at += src_step[a];
      dst_at += dst_step[a];
      if (++index[a] < extent[a]) break;
      src_at -= src_step[a] * static_cast<std::ptrdiff_t>(index[a]);
      dst_at -= dst_step[a] * static_cast<std::ptrdiff_t>(index[a]);
      index[a] = 0;
    }
  }
}

// Elements are moved as raw bytes (bf16 as its 16 bits, pred as one byte), so one kernel serves all dtypes.
inline void copy_box(ir::dtype_code dtype, const std::array<std::size_t, ir::max_rank>& extent, std::size_t rank,
                     const box_side& from, const void* src, const box_side& to, void* dst, std::size_t row_begin = 0,
                     std::size_t row_end = static_cast<std::size_t>(-1)) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  switch (ir::bytes_of(dtype)) {
    case 1: copy_box_typed<1>(extent, rank, from, s, to, d, row_begin, row_end); break;
    case 2: copy_box_typed<2>(extent, rank, from, s, to, d, row_begin, row_end); break;
    default: copy_box_typed<4>(extent, rank, from, s, to, d, row_begin, row_end); break;
  }
}

// A layout kernel that writes its result row by row (a row: the last axis) as work items of about an
// eighth of the thread's cache budget each, so large copies split over the threads and small ones stay
// one item, run on the calling thread.
inline ir::item_plan row_items(const ir::node& n, std::size_t cache_bytes) {
  const std::size_t rank = n.shape.rank, inner = rank ? n.shape.d[rank - 1] : 1, total = n.shape.size();
  const std::size_t rows = inner == 0 ? 0 : total / inner;
  const std::size_t row_bytes = std::max<std::size_t>(inner * ir::bytes_of(n.dtype), 1);
  const std::size_t per_item = std::max<std::size_t>(cache_bytes / 8 / row_bytes, 1);
  return {.items = (rows + per_item - 1) / per_item, .per_item = per_item};
}
// Rows [first, last) of item `item`.
inline std::pair<std::size_t, std::size_t> rows_of(const ir::node& n, const ir::item_plan& plan, std::size_t item) {
  const std::size_t rank = n.shape.rank, inner = rank ? n.shape.d[rank - 1] : 1;
  const std::size_t rows = inner == 0 ? 0 : n.shape.size() / inner, first = item * plan.per_item;
  return {first, std::min(rows, first + plan.per_item)};
}

// A box side covering a whole dense buffer from its origin.
inline box_side dense_side(const ir::dims& shape) {
  box_side s;
  s.shape = shape;
  for (std::size_t a = 0; a < shape.rank; ++a) s.step[a] = 1;
  return s;
}

}  // namespace tessel::prim
