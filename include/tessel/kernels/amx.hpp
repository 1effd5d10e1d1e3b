#pragma once
// bf16 x bf16 GEMM on the AMX tile unit (Intel Xeon 4th generation and later): the register atom of the
// one loop nest (gemm_nest.hpp) for tdpbf16ps. A tile is 16 rows of 64 bytes; one tdpbf16ps multiplies A
// (16 rows x 32 bf16 of K) by B (16 rows of 16 pairs: 32 of K x 16 columns, the two bf16 of K 2p and
// 2p + 1 side by side) into C (16 x 16 f32). The atom's register block is 2 x 2 C tiles (32 x 32 of C),
// with two A and two B tiles: the eight tiles of palette 1.
//
// The atom is written against a tile unit, one member function per instruction:
//   hardware_tiles   the instructions themselves (inline assembly naming each tile, so no compiler flag or
//                    target attribute is needed; whoever selects it checks CPUID and the OS's permission
//                    first: kernels/implementation.hpp)
//   emulated_tiles   the same instructions in plain C++, as Intel's SDM defines them, so that the packing,
//                    the K, M and N tails and the loop nest are tested on every CPU (tests/backend)
//
// Tails are where such kernels go wrong (oneDNN's AMX matmul leaked NaNs between rows when K was not a
// multiple of 32, uxlfoundation/oneDNN#5717), so nothing is read where it lies: A and B are packed into
// whole tiles, the K tail of both zero (0 x 0 adds nothing, where 0 x inf would add a NaN), A's rows past
// M zero, B's columns past N zero; C's tiles over its edge go through a buffer and only C's own elements
// are written back. A row of C depends on its row of A alone and a column on its column of B, so a NaN or
// an infinity stays in the rows and columns it is in.
//
// Packed layouts (32-bit words, a word a pair of bf16 along K, element 2p in the low half):
//   A block (mc x kc): row tile t (16 rows), K chunk q (32 of K): 256 words at (t chunks + q) 256, row r's
//     16 pairs at r 16 (a tile load's stride: 64 bytes)
//   B panel (32 columns, every K block one after the other): in a K block, chunk q's two tiles at q 512
//     (columns 0-15) and q 512 + 256 (16-31), pair row p's 16 pairs at p 16
//
// Rounding: tdpbf16ps adds each product (exact in f32) into the f32 accumulator in turn, rounding to
// nearest even; bf16 inputs below 2^-126 count as zero and f32 results below it are flushed to zero, as
// vdpbf16ps does (kernels/gemm.hpp's bound). A K block after the first accumulates onto C as loaded.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tessel/kernels/gemm_nest.hpp"

namespace tessel::kernels::amx {

inline constexpr std::size_t tile_rows = 16;                   // rows of a tile
inline constexpr std::size_t tile_words = 16;                  // 32-bit words of a tile row (64 bytes)
inline constexpr std::size_t k_chunk = 32;                     // bf16 of K that one tdpbf16ps takes
inline constexpr std::size_t tile_size = tile_rows * tile_words;  // words of a packed tile
inline constexpr std::size_t mr = 2 * tile_rows, nr = 2 * tile_words;  // the register block: 2 x 2 C tiles

// The tiles the atom names: four accumulators, two of A, two of B.
inline constexpr int c00 = 0, c01 = 1, c10 = 2, c11 = 3, a0 = 4, a1 = 5, b0 = 6, b1 = 7;

// LDTILECFG's 64 bytes, palette 1: every tile the atom uses is 16 rows of 64 bytes.
struct alignas(64) tile_config {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};
static_assert(sizeof(tile_config) == 64);

inline tile_config block_config() {
  tile_config c;
  for (int t = 0; t < 8; ++t) {
    c.bytes_per_row[t] = tile_words * 4;
    c.rows[t] = tile_rows;
  }
  return c;
}

inline std::size_t chunks(std::size_t kc) { return (kc + k_chunk - 1) / k_chunk; }
// Words of one panel's packed K block of kc elements (both tiles of each chunk).
inline std::size_t panel_block_words(std::size_t kc) { return chunks(kc) * 2 * tile_size; }
// Words of one panel holding all of K in blocks of k_block.
inline std::size_t panel_words(std::size_t k, std::size_t k_block) {
  return k / k_block * panel_block_words(k_block) + (k % k_block ? panel_block_words(k % k_block) : 0);
}

#if defined(__x86_64__)
// The tile unit: each member one instruction. Constructing it loads the configuration on the calling
// thread (the tile state is per thread); destroying it releases the tiles.
struct hardware_tiles {
  explicit hardware_tiles(const tile_config& c) { asm volatile("ldtilecfg %0" : : "m"(c)); }
  ~hardware_tiles() { asm volatile("tilerelease" ::: "memory"); }
  hardware_tiles(const hardware_tiles&) = delete;
  hardware_tiles& operator=(const hardware_tiles&) = delete;

  template <int T>
  void zero() {
    asm volatile("tilezero %%tmm%c0" : : "i"(T));
  }
  template <int T>
  void load(const void* from, std::size_t stride_bytes) {
    asm volatile("tileloadd (%0,%1,1), %%tmm%c2" : : "r"(from), "r"(stride_bytes), "i"(T) : "memory");
  }
  template <int T>
  void store(void* to, std::size_t stride_bytes) {
    asm volatile("tilestored %%tmm%c2, (%0,%1,1)" : : "r"(to), "r"(stride_bytes), "i"(T) : "memory");
  }
  template <int C, int A, int B>
  void dpbf16() {
    asm volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" : : "i"(C), "i"(A), "i"(B));
  }
};
#endif

// The same instructions in C++ (Intel SDM, TDPBF16PS: for each row m of C, for each pair k of A's row, for
// each column n, C[m][n] += A[m][2k] B[k][2n], then += A[m][2k+1] B[k][2n+1], each addition rounded to
// f32; bf16 inputs below 2^-126 are zero and f32 results below it flushed to zero).
struct emulated_tiles {
  explicit emulated_tiles(const tile_config& c) : config(c) {}

  template <int T>
  void zero() {
    std::memset(tiles[T], 0, sizeof tiles[T]);
  }
  template <int T>
  void load(const void* from, std::size_t stride_bytes) {
    zero<T>();
    for (std::size_t r = 0; r < config.rows[T]; ++r)
      std::memcpy(tiles[T][r], static_cast<const unsigned char*>(from) + r * stride_bytes, config.bytes_per_row[T]);
  }
  template <int T>
  void store(void* to, std::size_t stride_bytes) const {
    for (std::size_t r = 0; r < config.rows[T]; ++r)
      std::memcpy(static_cast<unsigned char*>(to) + r * stride_bytes, tiles[T][r], config.bytes_per_row[T]);
  }
  template <int C, int A, int B>
  void dpbf16() {
    for (std::size_t m = 0; m < config.rows[C]; ++m)
      for (std::size_t k = 0; k < config.bytes_per_row[A] / 4u; ++k)
        for (std::size_t n = 0; n < config.bytes_per_row[C] / 4u; ++n) {
          float acc = f32_at(C, m, n);
          acc = flush(acc + bf16_at(A, m, 2 * k) * bf16_at(B, k, 2 * n));
          acc = flush(acc + bf16_at(A, m, 2 * k + 1) * bf16_at(B, k, 2 * n + 1));
          std::memcpy(&tiles[C][m][4 * n], &acc, 4);
        }
  }

 private:
  float f32_at(int t, std::size_t r, std::size_t word) const {
    float v;
    std::memcpy(&v, &tiles[t][r][4 * word], 4);
    return v;
  }
  float bf16_at(int t, std::size_t r, std::size_t half) const {
    std::uint16_t bits;
    std::memcpy(&bits, &tiles[t][r][2 * half], 2);
    if ((bits & 0x7f80u) == 0) bits &= 0x8000u;  // a subnormal input is zero
    const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
    float v;
    std::memcpy(&v, &word, 4);
    return v;
  }
  static float flush(float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if ((bits & 0x7f800000u) == 0) bits &= 0x80000000u;
    std::memcpy(&v, &bits, 4);
    return v;
  }

  tile_config config;
  alignas(64) unsigned char tiles[8][16][64] = {};
};

// B's K block [k0, k0 + kc) x columns [n0, n0 + nc) into panels of nr columns (panel q at out + q stride,
// the block's chunks as the header says), zero past K and past N.
inline void pack_b(const matrix_view& b, std::size_t k0, std::size_t kc, std::size_t n0, std::size_t nc, std::uint32_t* out,
                   std::size_t stride) {
  const std::size_t pairs = chunks(kc) * tile_rows;
  for (std::size_t j = 0; j < nc; j += nr) {
    std::uint32_t* panel = out + j / nr * stride;
    for (std::size_t p = 0; p < pairs; ++p) {
      std::uint32_t* row = panel + p / tile_rows * 2 * tile_size + p % tile_rows * tile_words;
      for (std::size_t col = 0; col < nr; ++col) {
        std::uint32_t pair = 0;
        if (j + col < nc && 2 * p < kc) {
          pair = b.bf16_word(k0 + 2 * p, n0 + j + col);
          if (2 * p + 1 < kc) pair |= b.bf16_word(k0 + 2 * p + 1, n0 + j + col) << 16;
        }
        row[col / tile_words * tile_size + col % tile_words] = pair;
      }
    }
  }
}

// A's rows [i0, i0 + mc) x K [k0, k0 + kc) into row tiles (the header's layout), zero past K and in the
// last tile's rows past mc.
inline void pack_a(const matrix_view& a, std::size_t i0, std::size_t mc, std::size_t k0, std::size_t kc, std::uint32_t* out) {
  const std::size_t n_chunks = chunks(kc), row_tiles = (mc + tile_rows - 1) / tile_rows;
  for (std::size_t t = 0; t < row_tiles; ++t)
    for (std::size_t q = 0; q < n_chunks; ++q) {
      std::uint32_t* tile = out + (t * n_chunks + q) * tile_size;
      for (std::size_t r = 0; r < tile_rows; ++r) {
        const std::size_t i = t * tile_rows + r;
        for (std::size_t w = 0; w < tile_words; ++w) {
          const std::size_t k = q * k_chunk + 2 * w;
          std::uint32_t pair = 0;
          if (i < mc && k < kc) {
            pair = a.bf16_word(i0 + i, k0 + k);
            if (k + 1 < kc) pair |= a.bf16_word(i0 + i, k0 + k + 1) << 16;
          }
          tile[r * tile_words + w] = pair;
        }
      }
    }
}

// The atom of gemm_nest (its contract is there) on tile unit Unit, with its scratch: B's block, A's block
// and a 32 x 32 buffer for C's tiles over its edge.
template <class Unit>
struct atom {
  using word = std::uint32_t;
  static constexpr std::size_t mr = amx::mr, nr = amx::nr;
  Unit& unit;
  std::uint32_t* packed_b;
  std::uint32_t* packed_a;
  float* edge;

  // Words of scratch for blocks of at most kc x nc (B) and mc x kc (A): B's, then A's, then the buffer.
  static std::size_t scratch_words(std::size_t kc, std::size_t mc, std::size_t nc) {
    return (nc + nr - 1) / nr * panel_block_words(kc) + (mc + tile_rows - 1) / tile_rows * chunks(kc) * tile_size + mr * nr;
  }
  atom(Unit& u, float* scratch, const gemm_blocking& blocks)
      : unit(u),
        packed_b(reinterpret_cast<std::uint32_t*>(scratch)),
        packed_a(packed_b + (blocks.nc + nr - 1) / nr * panel_block_words(blocks.kc)),
        edge(reinterpret_cast<float*>(packed_a + (blocks.mc + tile_rows - 1) / tile_rows * chunks(blocks.kc) * tile_size)) {}

  detail::b_panels<std::uint32_t> place_b(const matrix_view& b, std::size_t, std::size_t p0, std::size_t kc, std::size_t j0,
                                          std::size_t nc, const std::uint32_t* packed, std::size_t words_per_panel,
                                          std::size_t k_block) const {
    if (packed != nullptr) return {packed + j0 / nr * words_per_panel + p0 / k_block * panel_block_words(k_block), words_per_panel, 0, false};
    pack_b(b, p0, kc, j0, nc, packed_b, panel_block_words(kc));
    return {packed_b, panel_block_words(kc), 0, false};
  }
  detail::a_rows<std::uint32_t> place_a(const matrix_view& a, std::size_t i0, std::size_t mc, std::size_t p0, std::size_t kc,
                                        std::size_t) const {
    pack_a(a, i0, mc, p0, kc, packed_a);
    return {packed_a, nullptr, 0, false};
  }
  void tile(const matrix_view&, const detail::a_rows<std::uint32_t>& ar, const detail::b_panels<std::uint32_t>& bp, std::size_t i,
            std::size_t mc, std::size_t kc, std::size_t j, std::size_t cols, float* c, std::size_t ldc, bool first) const {
    const std::size_t rows = std::min(mr, mc - i);
    const std::uint32_t* a = ar.packed + i / tile_rows * chunks(kc) * tile_size;
    const std::uint32_t* b = bp.first + j / nr * bp.stride;
    if (rows > tile_rows) multiply<2>(a, b, kc, c, ldc, rows, cols, first);
    else multiply<1>(a, b, kc, c, ldc, rows, cols, first);
  }

 private:
  // RowTiles (1 or 2) x 2 C tiles over K: C's rows [0, rows) and columns [0, cols) of c.
  template <int RowTiles>
  void multiply(const std::uint32_t* a, const std::uint32_t* b, std::size_t kc, float* c, std::size_t ldc, std::size_t rows,
                std::size_t cols, bool first) const {
    const bool whole = rows == RowTiles * tile_rows && cols == nr;
    float* at = whole ? c : edge;
    const std::size_t stride = (whole ? ldc : nr) * 4;
    if (!whole && !first) {
      std::fill_n(at, mr * nr, 0.0f);
      for (std::size_t r = 0; r < rows; ++r) std::copy_n(c + r * ldc, cols, at + r * nr);
    }
    if (first) {
      unit.template zero<c00>(), unit.template zero<c01>();
      if constexpr (RowTiles == 2) unit.template zero<c10>(), unit.template zero<c11>();
    } else {
      unit.template load<c00>(at, stride), unit.template load<c01>(at + tile_words, stride);
      if constexpr (RowTiles == 2)
        unit.template load<c10>(at + tile_rows * stride / 4, stride), unit.template load<c11>(at + tile_rows * stride / 4 + tile_words, stride);
    }
    const std::size_t n_chunks = chunks(kc), tile_stride = tile_words * 4;  // a packed tile's rows are contiguous
    for (std::size_t q = 0; q < n_chunks; ++q) {
      unit.template load<b0>(b + q * 2 * tile_size, tile_stride);
      unit.template load<b1>(b + q * 2 * tile_size + tile_size, tile_stride);
      unit.template load<a0>(a + q * tile_size, tile_stride);
      unit.template dpbf16<c00, a0, b0>();
      unit.template dpbf16<c01, a0, b1>();
      if constexpr (RowTiles == 2) {
        unit.template load<a1>(a + (n_chunks + q) * tile_size, tile_stride);
        unit.template dpbf16<c10, a1, b0>();
        unit.template dpbf16<c11, a1, b1>();
      }
    }
    unit.template store<c00>(at, stride), unit.template store<c01>(at + tile_words, stride);
    if constexpr (RowTiles == 2)
      unit.template store<c10>(at + tile_rows * stride / 4, stride), unit.template store<c11>(at + tile_rows * stride / 4 + tile_words, stride);
    if (!whole)
      for (std::size_t r = 0; r < rows; ++r) std::copy_n(at + r * nr, cols, c + r * ldc);
  }
};

// C[0 : m1 - m0, 0 : n] = A[m0 : m1, :] B (both bf16; kernels/gemm.hpp's contract) in blocks of KC, MC and
// NC on tile unit Unit, with `scratch` of scratch_floats floats; B from its packed form (pack_b_whole, with
// K blocks of blocks.kc and NC a multiple of NR) where `packed` is not null, at panel c0 / NR of B.
template <class Unit>
void multiply(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n, std::size_t k, float* c,
              std::size_t ldc, float* scratch, std::size_t scratch_floats, const gemm_blocking& blocks,
              const std::uint32_t* packed = nullptr, std::size_t words_per_panel = 0) {
  if (!a.bf16 || (!b.bf16 && packed == nullptr))
    throw std::invalid_argument("tessel::kernels::amx::multiply: the tile unit multiplies bf16 by bf16; widen f32 operands elsewhere");
  if (atom<Unit>::scratch_words(blocks.kc, blocks.mc, blocks.nc) > scratch_floats)
    throw std::invalid_argument("tessel::kernels::amx::multiply: blocks KC " + std::to_string(blocks.kc) + ", MC " +
                                std::to_string(blocks.mc) + ", NC " + std::to_string(blocks.nc) + " need " +
                                std::to_string(atom<Unit>::scratch_words(blocks.kc, blocks.mc, blocks.nc)) +
                                " floats of scratch, more than the " + std::to_string(scratch_floats) + " given");
  Unit unit(block_config());
  detail::gemm_nest(atom<Unit>(unit, scratch, blocks), a, b, m0, m1, n, k, c, ldc, blocks, packed, words_per_panel);
}

// Panels [first, last) of B's (k x n) packed form for multiply, K blocks of k_block: panel q at
// out + q words_per_panel (panel_words(k, k_block)).
inline void pack_b_whole(const matrix_view& b, std::size_t n, std::size_t k, std::size_t k_block, std::size_t first, std::size_t last,
                         std::uint32_t* out) {
  const std::size_t n0 = first * nr;
  if (n0 >= n) return;
  const std::size_t nc = std::min(n, last * nr) - n0, stride = panel_words(k, k_block);
  for (std::size_t p0 = 0; p0 < k; p0 += k_block)
    pack_b(b, p0, std::min(k_block, k - p0), n0, nc, out + first * stride + p0 / k_block * panel_block_words(k_block), stride);
}

}  // namespace tessel::kernels::amx
