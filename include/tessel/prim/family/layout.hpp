#pragma once
// The one data movement behind slice, pad and concatenate: copy a box of elements between two
// row-major buffers, each side walked from its own start with its own step per axis.
//
//   slice:        box = result shape, source from `start` by `stride`, destination dense
//   pad:          box = the operand elements that land inside the result, destination by interior + 1
//   concatenate:  box = one operand, destination offset along the joined axis

#include <array>
#include <cstddef>
#include <cstring>

#include "tessel/ir/graph.hpp"

namespace tessel::prim {

struct box_side {
  ir::dims shape{};                                  // the buffer's shape
  std::array<std::ptrdiff_t, ir::max_rank> start{};  // index of the box's first element, per axis
  std::array<std::ptrdiff_t, ir::max_rank> step{};   // index step per box step, per axis
};

template <std::size_t Bytes>
void copy_box_typed(const std::array<std::size_t, ir::max_rank>& extent, std::size_t rank, const box_side& from,
                    const unsigned char* src, const box_side& to, unsigned char* dst) {
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
  for (std::size_t done = 0; done < total; done += inner) {
    if (dense_rows) {
      std::memcpy(dst + dst_at * static_cast<std::ptrdiff_t>(Bytes), src + src_at * static_cast<std::ptrdiff_t>(Bytes), inner * Bytes);
    } else {
      for (std::size_t j = 0; j < inner; ++j)
        std::memcpy(dst + (dst_at + static_cast<std::ptrdiff_t>(j) * di) * static_cast<std::ptrdiff_t>(Bytes),
                    src + (src_at + static_cast<std::ptrdiff_t>(j) * si) * static_cast<std::ptrdiff_t>(Bytes), Bytes);
    }
    for (std::size_t a = rank - 1; a-- > 0;) {  // advance the odometer over the outer axes
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
                     const box_side& from, const void* src, const box_side& to, void* dst) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  switch (ir::bytes_of(dtype)) {
    case 1: copy_box_typed<1>(extent, rank, from, s, to, d); break;
    case 2: copy_box_typed<2>(extent, rank, from, s, to, d); break;
    default: copy_box_typed<4>(extent, rank, from, s, to, d); break;
  }
}

// A box side covering a whole dense buffer from its origin.
inline box_side dense_side(const ir::dims& shape) {
  box_side s;
  s.shape = shape;
  for (std::size_t a = 0; a < shape.rank; ++a) s.step[a] = 1;
  return s;
}

}  // namespace tessel::prim
