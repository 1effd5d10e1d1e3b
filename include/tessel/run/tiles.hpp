#pragma once
// Values between storage and a kernel's tiles: loads and stores (bf16 widens to f32), literals splat,
// broadcasts and pads gathered from their operand's storage (or read where they lie).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tessel/core/bfloat16.hpp"
#include "tessel/ir/graph.hpp"

namespace tessel::run {

// Storage <-> tile: bf16 widens to float; other dtypes are the same bytes.
inline void load_tile(ir::dtype_code dtype, const void* storage, std::size_t n, void* tile) {
  if (dtype == ir::dtype_code::bf16) {
    const auto* s = static_cast<const std::uint16_t*>(storage);
    auto* t = static_cast<std::uint32_t*>(tile);
    for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::uint32_t>(s[i]) << 16;
  } else {
    std::memcpy(tile, storage, n * ir::bytes_of(dtype));
  }
}
inline void store_tile(ir::dtype_code dtype, const void* tile, std::size_t n, void* storage) {
  if (dtype == ir::dtype_code::bf16) {
    const auto* t = static_cast<const float*>(tile);
    auto* s = static_cast<std::uint16_t*>(storage);
    for (std::size_t i = 0; i < n; ++i) s[i] = bfloat16::round_to_bits(t[i]);
  } else {
    std::memcpy(storage, tile, n * ir::bytes_of(dtype));
  }
}

// A literal's value over n values of a tile. A switch, not visit_dtype: written with visit_dtype, g++ 12
// inlined it into run_rows and the softmax row kernel ran 12-19% slower (AMD EPYC, bench_elementwise).
inline void splat(const ir::node& literal, ir::dtype_code dtype, std::size_t n, void* tile) {
  const double v = literal.attr.scalar;
  switch (dtype) {
    case ir::dtype_code::f32:
    case ir::dtype_code::bf16: std::fill_n(static_cast<float*>(tile), n, static_cast<float>(v)); break;
    case ir::dtype_code::s32: std::fill_n(static_cast<std::int32_t*>(tile), n, static_cast<std::int32_t>(v)); break;
    case ir::dtype_code::u32: std::fill_n(static_cast<std::uint32_t*>(tile), n, static_cast<std::uint32_t>(v)); break;
    case ir::dtype_code::pred: std::fill_n(static_cast<bool*>(tile), n, v != 0); break;
  }
}

// How broadcast_in_dim node b's result walks its operand: the stride of each result axis into the
// operand (0 where the axis is broadcast), and the runs of its trailing axes: `run` elements that the
// operand holds contiguously (`copies`) or that repeat one of its values, as the attention bias [B,1,T,T]
// spread over heads, within the axes from `inner` on.
struct broadcast_walk {
  std::array<std::size_t, ir::max_rank> stride_of_axis{};
  std::size_t run = 1, inner = 0;
  bool copies = false;

  // The operand element where the run holding result element `at` starts: a few divisions a run instead
  // of an index walk per element.
  std::size_t run_source(const ir::node& b, std::size_t at) const {
    std::size_t rest = at / run, source = 0;
    for (std::size_t axis = inner; axis-- > 0;) {
      source += rest % b.shape.d[axis] * stride_of_axis[axis];
      rest /= b.shape.d[axis];
    }
    return source;
  }
};

inline broadcast_walk walk_of(const ir::node& b, const ir::node& operand) {
  broadcast_walk w;
  std::array<std::size_t, ir::max_rank> operand_strides{};
  std::size_t s = 1;
  for (std::size_t i = operand.shape.rank; i-- > 0;) {
    operand_strides[i] = s;
    s *= operand.shape.d[i];
  }
  for (std::size_t i = 0; i < operand.shape.rank; ++i)
    if (operand.shape.d[i] != 1) w.stride_of_axis[static_cast<std::size_t>(b.attr.ints[i])] = operand_strides[i];
  const std::size_t rank = b.shape.rank;
  w.copies = rank > 0 && w.stride_of_axis[rank - 1] == 1;
  w.inner = rank;
  for (std::size_t axis = rank; axis-- > 0; w.inner = axis) {
    if (b.shape.d[axis] == 1) continue;
    if (w.stride_of_axis[axis] != (w.copies ? w.run : 0)) break;
    w.run *= b.shape.d[axis];
  }
  return w;
}

// Where elements [first, first + n) of broadcast b are one contiguous run of its operand in storage
// (stored as a tile holds it: not bf16 or pred), that run, to be read where it lies; else null. A tile of
// the attention's scores within one head reads the bias [B,1,T,T] so, instead of copying it.
inline const void* broadcast_in_place(const ir::node& b, const ir::node& operand, const void* storage, std::size_t first,
                                      std::size_t n) {
  if (operand.dtype == ir::dtype_code::bf16 || operand.dtype == ir::dtype_code::pred || n == 0) return nullptr;
  const broadcast_walk w = walk_of(b, operand);
  if (!w.copies || first % w.run + n > w.run) return nullptr;
  return static_cast<const unsigned char*>(storage) + (w.run_source(b, first) + first % w.run) * ir::bytes_of(operand.dtype);
}

// Elements [first, first + n) of broadcast_in_dim node b, read from its operand's storage.
inline void gather_broadcast(const ir::node& b, const ir::node& operand, const void* storage, std::size_t first,
                             std::size_t n, void* tile) {
  const std::size_t elem = ir::bytes_of(operand.dtype);
  const std::size_t osize = operand.shape.size();
  const auto* src = static_cast<const unsigned char*>(storage);
  auto put = [&](std::size_t i, std::size_t source) {
    if (operand.dtype == ir::dtype_code::bf16) {
      std::uint16_t h;
      std::memcpy(&h, src + source * 2, 2);
      const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
      std::memcpy(static_cast<unsigned char*>(tile) + i * 4, &w, 4);
    } else {
      std::memcpy(static_cast<unsigned char*>(tile) + i * elem, src + source * elem, elem);
    }
  };
  // Fills tile[i, i + count) with operand element `source` (widened to the tile's type).
  auto fill = [&](std::size_t i, std::size_t count, std::size_t source) {
    if (operand.dtype == ir::dtype_code::pred) {
      std::memset(static_cast<unsigned char*>(tile) + i, src[source], count);
      return;
    }
    std::uint32_t v;
    if (operand.dtype == ir::dtype_code::bf16) {
      std::uint16_t h;
      std::memcpy(&h, src + source * 2, 2);
      v = static_cast<std::uint32_t>(h) << 16;
    } else {
      std::memcpy(&v, src + source * 4, 4);
    }
    std::fill_n(static_cast<std::uint32_t*>(tile) + i, count, v);
  };
  if (osize == 1) {
    fill(0, n, 0);
    return;
  }
  // The two common cases, done with contiguous copies and runs: the operand is the result's trailing
  // dims (a bias over rows) or its leading dims (a per-row value over each row).
  const std::size_t r = operand.shape.rank, rank_out = b.shape.rank;
  bool suffix = true, prefix = true;
  for (std::size_t i = 0; i < r; ++i) {
    const auto axis = static_cast<std::size_t>(b.attr.ints[i]);
    suffix = suffix && axis == rank_out - r + i && operand.shape.d[i] == b.shape.d[axis];
    prefix = prefix && axis == i && operand.shape.d[i] == b.shape.d[axis];
  }
  auto* dst = static_cast<unsigned char*>(tile);
  const std::size_t tile_elem = ir::tile_bytes(operand.dtype);
  if (suffix) {  // runs of the whole operand (bf16 widened a run at a time: the bf16 CNN's bias)
    for (std::size_t i = 0; i < n;) {
      const std::size_t at = (first + i) % osize;
      const std::size_t run = std::min(n - i, osize - at);
      load_tile(operand.dtype, src + at * elem, run, dst + i * tile_elem);
      i += run;
    }
    return;
  }
  if (prefix) {
    const std::size_t inner = b.shape.size() / osize;
    for (std::size_t i = 0; i < n;) {
      const std::size_t at = (first + i) / inner;
      const std::size_t run = std::min(n - i, inner - (first + i) % inner);
      fill(i, run, at);
      i += run;
    }
    return;
  }
  const broadcast_walk w = walk_of(b, operand);
  if (w.run >= 16) {
    for (std::size_t i = 0; i < n;) {
      const std::size_t at = first + i, within = at % w.run;
      const std::size_t len = std::min(n - i, w.run - within);
      const std::size_t source = w.run_source(b, at);
      if (!w.copies) fill(i, len, source);
      else load_tile(operand.dtype, src + (source + within) * elem, len, dst + i * tile_elem);
      i += len;
    }
    return;
  }
  const std::size_t rank = b.shape.rank;
  const auto& stride_of_axis = w.stride_of_axis;
  std::array<std::size_t, ir::max_rank> index{};
  std::size_t rest = first, source = 0;
  for (std::size_t axis = rank; axis-- > 0;) {
    index[axis] = rest % b.shape.d[axis];
    rest /= b.shape.d[axis];
    source += index[axis] * stride_of_axis[axis];
  }
  for (std::size_t i = 0; i < n; ++i) {
    put(i, source);
    for (std::size_t axis = rank; axis-- > 0;) {
      source += stride_of_axis[axis];
      if (++index[axis] < b.shape.d[axis]) break;
      source -= stride_of_axis[axis] * index[axis];
      index[axis] = 0;
    }
  }
}

// Elements [first, first + n) of pad node p (lax.pad: lo, then interior per axis in attr; a negative lo
// crops) into a tile, its operand read from `storage` and the padding value `fill_bits` as a tile holds
// it. Runs along the last axis: outside the operand's box a run is the padding value; inside, the
// operand's row is copied (no interior padding) or placed every step elements.
inline void gather_pad(const ir::node& p, const ir::node& operand, const void* storage, std::uint32_t fill_bits, std::size_t first,
                       std::size_t n, void* tile) {
  const std::size_t rank = p.shape.rank, width = ir::tile_bytes(p.dtype), elem = ir::bytes_of(operand.dtype);
  auto* dst = static_cast<unsigned char*>(tile);
  const auto* src = static_cast<const unsigned char*>(storage);
  auto fill = [&](std::size_t i, std::size_t count) {
    if (width == 1) std::memset(dst + i, static_cast<int>(fill_bits & 0xFFu), count);
    else std::fill_n(reinterpret_cast<std::uint32_t*>(dst + i * 4), count, fill_bits);
  };
  if (rank == 0) {
    load_tile(operand.dtype, src, n, dst);
    return;
  }
  const std::size_t row = p.shape.d[rank - 1];
  const auto lo_last = static_cast<std::ptrdiff_t>(p.attr.ints[rank - 1]);
  const auto step_last = static_cast<std::ptrdiff_t>(p.attr.ints[2 * rank - 1]) + 1;
  const auto size_last = static_cast<std::ptrdiff_t>(operand.shape.d[rank - 1]);
  for (std::size_t i = 0; i < n;) {
    const std::size_t at = first + i, col = at % row, len = std::min(n - i, row - col);
    // The operand row this result row reads, if its outer indices land on operand elements.
    std::size_t rest = at / row, source = 0, stride = static_cast<std::size_t>(size_last);
    bool inside = true;
    for (std::size_t a = rank - 1; a-- > 0;) {
      const auto index = static_cast<std::ptrdiff_t>(rest % p.shape.d[a]);
      rest /= p.shape.d[a];
      const std::ptrdiff_t j = index - static_cast<std::ptrdiff_t>(p.attr.ints[a]), step = static_cast<std::ptrdiff_t>(p.attr.ints[rank + a]) + 1;
      if (j < 0 || j % step != 0 || j / step >= static_cast<std::ptrdiff_t>(operand.shape.d[a])) inside = false;
      else source += static_cast<std::size_t>(j / step) * stride;
      stride *= operand.shape.d[a];
    }
    if (!inside) {
      fill(i, len);
    } else if (step_last == 1) {  // [col, col + len) = padding, then operand elements [begin, end), then padding
      const std::ptrdiff_t c0 = static_cast<std::ptrdiff_t>(col), c1 = c0 + static_cast<std::ptrdiff_t>(len);
      const std::ptrdiff_t begin = std::clamp<std::ptrdiff_t>(lo_last, c0, c1), end = std::clamp<std::ptrdiff_t>(lo_last + size_last, begin, c1);
      fill(i, static_cast<std::size_t>(begin - c0));
      load_tile(operand.dtype, src + (source + static_cast<std::size_t>(begin - lo_last)) * elem, static_cast<std::size_t>(end - begin),
                dst + (i + static_cast<std::size_t>(begin - c0)) * width);
      fill(i + static_cast<std::size_t>(end - c0), static_cast<std::size_t>(c1 - end));
    } else {
      for (std::size_t c = 0; c < len; ++c) {
        const std::ptrdiff_t j = static_cast<std::ptrdiff_t>(col + c) - lo_last;
        if (j < 0 || j % step_last != 0 || j / step_last >= size_last) fill(i + c, 1);
        else load_tile(operand.dtype, src + (source + static_cast<std::size_t>(j / step_last)) * elem, 1, dst + (i + c) * width);
      }
    }
    i += len;
  }
}

}  // namespace tessel::run
