// The AMX bf16 GEMM (kernels/amx.hpp). Its packing, tails and loop nest are plain code: here they run on
// the emulated tile unit (Intel SDM's TDPBF16PS in C++) on every CPU, against the exact product within
// kernels/gemm.hpp's bound, for every M, N and K from 1 to past a tile (K 1 ... 97, 1023, 1025), transposed
// and strided operands, blocks of several K and N blocks, B packed whole, and NaN and infinity in one row
// or column that must stay there. Where the CPU has AMX-BF16 and Linux grants the tile state, the same
// products run on the tile unit itself; elsewhere those tests skip, naming the missing feature.
#include "tessel/kernels/amx.hpp"
#include "tessel/kernels/gemm.hpp"
#include "tessel/kernels/machine.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace {
using tessel::bfloat16;
using namespace tessel::kernels;

// An operand of rows x cols bf16, row-major or transposed, with `pad` more elements in each stored row (the
// gap a K tail must not read); the padding holds NaN.
struct operand {
  std::vector<bfloat16> data;
  matrix_view view;
  std::size_t rows, cols;
  operand(std::size_t r, std::size_t c, bool transposed, std::size_t pad, std::mt19937& rng) : rows(r), cols(c) {
    const std::size_t stored_rows = transposed ? c : r, stored_cols = (transposed ? r : c) + pad;
    data.assign(stored_rows * stored_cols, bfloat16(std::numeric_limits<float>::quiet_NaN()));
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    view = transposed ? matrix_view{data.data(), 1, stored_cols, true} : matrix_view{data.data(), stored_cols, 1, true};
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) set(i, j, bfloat16(u(rng)));
  }
  void set(std::size_t i, std::size_t j, bfloat16 v) {
    data[i * view.row_stride + j * view.col_stride] = v;
  }
};

struct scratch_buffer {
  std::size_t floats;
  float* p;
  explicit scratch_buffer(std::size_t n) : floats(n), p(static_cast<float*>(::operator new(n * sizeof(float), std::align_val_t{64}))) {}
  ~scratch_buffer() { ::operator delete(p, std::align_val_t{64}); }
};

// C = A B on Unit with these blocks (B packed whole first when `packed`), into an ldc = n + 3 buffer whose
// extra columns must stay untouched.
template <class Unit>
std::vector<float> product(const operand& a, const operand& b, const gemm_blocking& blocks, bool packed = false, std::size_t m0 = 0) {
  const std::size_t m = a.rows - m0, n = b.cols, k = a.cols, ldc = n + 3;
  std::vector<float> c(m * ldc, -7.0f);
  scratch_buffer scratch(amx::atom<Unit>::scratch_words(blocks.kc, blocks.mc, blocks.nc));
  if (packed) {
    std::vector<std::uint32_t> whole((n + amx::nr - 1) / amx::nr * amx::panel_words(k, blocks.kc), 0xdeadbeefu);
    amx::pack_b_whole(b.view, n, k, blocks.kc, 0, (n + amx::nr - 1) / amx::nr, whole.data());
    amx::multiply<Unit>(a.view, matrix_view{nullptr, 0, 0, true}, m0, a.rows, n, k, c.data(), ldc, scratch.p, scratch.floats, blocks,
                        whole.data(), amx::panel_words(k, blocks.kc));
  } else {
    amx::multiply<Unit>(a.view, b.view, m0, a.rows, n, k, c.data(), ldc, scratch.p, scratch.floats, blocks);
  }
  return c;
}

// Every element of c against the exact product within 2 k u sum|a b| (u = 2^-24), and the padding
// columns untouched.
void expect_product(const operand& a, const operand& b, const std::vector<float>& c, const std::string& what, std::size_t m0 = 0) {
  const std::size_t n = b.cols, k = a.cols, ldc = n + 3;
  int reported = 0;
  for (std::size_t i = m0; i < a.rows; ++i)
    for (std::size_t j = 0; j < ldc; ++j) {
      const float got = c[(i - m0) * ldc + j];
      if (j >= n) {
        if (got != -7.0f && reported++ < 3) ADD_FAILURE() << what << ": wrote past column " << n << " in row " << i;
        continue;
      }
      double exact = 0, magnitude = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double t = static_cast<double>(a.view.at(i, p)) * static_cast<double>(b.view.at(p, j));
        exact += t;
        magnitude += std::fabs(t);
      }
      const double bound = 2.0 * static_cast<double>(k) * std::ldexp(1.0, -24) * magnitude;
      if (!(std::fabs(got - exact) <= bound) && reported++ < 3)
        ADD_FAILURE() << what << ": C[" << i << "][" << j << "] = " << got << ", exact " << exact << ", bound " << bound;
    }
}

constexpr gemm_blocking own{.mr = amx::mr, .nr = amx::nr, .kc = 1024, .mc = 96, .nc = 960};
constexpr gemm_blocking small{.mr = amx::mr, .nr = amx::nr, .kc = 64, .mc = 48, .nc = 64};  // several K, M and N blocks

TEST(AmxTiles, EmulatedInstructionFollowsTheSdm) {
  amx::emulated_tiles unit(amx::block_config());
  std::vector<std::uint32_t> a(256, 0), b(256, 0);
  std::vector<float> c(256, 0.0f);
  auto bits = [](float v) { return static_cast<std::uint32_t>(bfloat16(v).bits()); };
  a[0] = bits(1.5f) | bits(2.0f) << 16;       // A[0][0], A[0][1]
  a[1] = bits(-1.0f) | bits(0.5f) << 16;      // A[0][2], A[0][3]
  b[0] = bits(4.0f) | bits(3.0f) << 16;       // B pair row 0, column 0: K 0 and 1
  b[16] = bits(8.0f) | bits(1e-39f) << 16;    // pair row 1, column 0: K 2, and a subnormal K 3
  c[0] = 0.25f;
  unit.load<amx::c00>(c.data(), 64);
  unit.load<amx::a0>(a.data(), 64);
  unit.load<amx::b0>(b.data(), 64);
  unit.dpbf16<amx::c00, amx::a0, amx::b0>();
  unit.store<amx::c00>(c.data(), 64);
  EXPECT_EQ(c[0], 0.25f + 6.0f + 6.0f - 8.0f + 0.0f);  // the subnormal counts as zero
  EXPECT_EQ(c[1], 0.0f);
  EXPECT_EQ(c[16], 0.0f);
}

TEST(AmxTiles, PackingPlacesEveryElementAndZeroesTheTails) {
  std::mt19937 rng(1);
  const operand a(37, 45, false, 3, rng), b(45, 50, true, 2, rng);
  std::vector<std::uint32_t> packed_a(3 * 2 * amx::tile_size, 0xffffffffu);
  amx::pack_a(a.view, 0, 37, 0, 45, packed_a.data());
  std::vector<std::uint32_t> packed_b(2 * amx::panel_block_words(45), 0xffffffffu);
  amx::pack_b(b.view, 0, 45, 0, 50, packed_b.data(), amx::panel_block_words(45));
  auto half = [](std::uint32_t w, std::size_t k) { return static_cast<std::uint16_t>(k % 2 ? w >> 16 : w & 0xffffu); };
  for (std::size_t i = 0; i < 48; ++i)
    for (std::size_t k = 0; k < 64; ++k) {
      const std::uint32_t w = packed_a[(i / 16 * 2 + k / 32) * amx::tile_size + i % 16 * 16 + k % 32 / 2];
      const std::uint16_t want = i < 37 && k < 45 ? a.data[i * a.view.row_stride + k].bits() : 0;
      ASSERT_EQ(half(w, k), want) << "A(" << i << ", " << k << ")";
    }
  for (std::size_t k = 0; k < 64; ++k)
    for (std::size_t j = 0; j < 64; ++j) {
      const std::size_t q = k / 32, p = k % 32 / 2, col = j % 32;
      const std::uint32_t w = packed_b[j / 32 * amx::panel_block_words(45) + q * 2 * amx::tile_size + col / 16 * amx::tile_size + p * 16 + col % 16];
      const std::uint16_t want = k < 45 && j < 50 ? b.data[k * b.view.row_stride + j * b.view.col_stride].bits() : 0;
      ASSERT_EQ(half(w, k), want) << "B(" << k << ", " << j << ")";
    }
}

TEST(AmxTiles, EveryShapeAndKTailOnTheEmulatedUnit) {
  std::mt19937 rng(2);
  for (std::size_t m : {1, 15, 16, 17, 33})
    for (std::size_t n : {1, 16, 31, 32, 45})
      for (std::size_t k = 1; k <= 97; ++k) {
        const operand a(m, k, false, 1, rng), b(k, n, false, 2, rng);
        expect_product(a, b, product<amx::emulated_tiles>(a, b, own),
                       "M " + std::to_string(m) + " N " + std::to_string(n) + " K " + std::to_string(k));
      }
  for (std::size_t k : {1023, 1025}) {
    const operand a(19, k, false, 5, rng), b(k, 35, false, 0, rng);
    expect_product(a, b, product<amx::emulated_tiles>(a, b, own), "K " + std::to_string(k));
  }
}

TEST(AmxTiles, StridesBlocksAndPackedBOnTheEmulatedUnit) {
  std::mt19937 rng(3);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const operand a(101, 131, ta, 3, rng), b(131, 70, tb, 1, rng);
      const std::string what = std::string(ta ? "A^T" : "A") + (tb ? " B^T" : " B");
      const std::vector<float> c = product<amx::emulated_tiles>(a, b, small);
      expect_product(a, b, c, what + ", small blocks");
      EXPECT_EQ(product<amx::emulated_tiles>(a, b, small, true), c) << what << ": B packed whole is bit-identical";
      expect_product(a, b, product<amx::emulated_tiles>(a, b, small, false, 29), what + ", rows from 29", 29);
    }
}

TEST(AmxTiles, NanAndInfinityStayInTheirRowAndColumn) {
  std::mt19937 rng(4);
  operand a(40, 45, false, 19, rng), b(45, 40, false, 7, rng);  // the NaN padding sits right after K and N
  a.set(20, 3, bfloat16(std::numeric_limits<float>::infinity()));
  b.set(44, 33, bfloat16(std::numeric_limits<float>::quiet_NaN()));
  for (const gemm_blocking& blocks : {own, small}) {
    const std::vector<float> c = product<amx::emulated_tiles>(a, b, blocks);
    for (std::size_t i = 0; i < 40; ++i)
      for (std::size_t j = 0; j < 40; ++j) {
        const float v = c[i * 43 + j];
        if (j == 33) EXPECT_TRUE(std::isnan(v)) << i;
        else if (i == 20) EXPECT_FALSE(std::isfinite(v)) << j;
        else EXPECT_TRUE(std::isfinite(v)) << "C[" << i << "][" << j << "] = " << v;
      }
  }
}

TEST(AmxTiles, ScratchTooSmallIsRefused) {
  std::mt19937 rng(5);
  const operand a(4, 4, false, 0, rng), b(4, 4, false, 0, rng);
  std::vector<float> c(16), scratch(64);
  EXPECT_THROW(amx::multiply<amx::emulated_tiles>(a.view, b.view, 0, 4, 4, 4, c.data(), 4, scratch.data(), scratch.size(), own),
               std::invalid_argument);
}

// TESSEL_BF16_PRODUCTS=amx (or the setting) takes the tile unit only where the CPU and the OS allow it; the
// library's kernel is right either way, and names its path.
TEST(AmxTiles, ChosenOnlyWhereTheMachineAllowsIt) {
  const bf16_products before = hwy_gemm_set_bf16_products(bf16_products::amx);
  EXPECT_EQ(hwy_gemm_uses_amx(), this_machine().amx_bf16);
  EXPECT_EQ(std::string(hwy_gemm_bf16_path()) == "amx", this_machine().amx_bf16);
  std::mt19937 rng(7);
  const operand a(50, 77, false, 0, rng), b(77, 41, false, 0, rng);
  std::vector<float> c(50 * 44, -7.0f);
  scratch_buffer scratch(gemm_scratch_floats());
  hwy_gemm_rows(a.view, b.view, 0, 50, 41, 77, c.data(), 44, scratch.p);
  expect_product(a, b, c, std::string("hwy_gemm_rows on the ") + hwy_gemm_bf16_path() + " path");
  hwy_gemm_set_bf16_products(bf16_products::widened);
  EXPECT_FALSE(hwy_gemm_uses_amx());
  EXPECT_STREQ(hwy_gemm_bf16_path(), "widened");
  hwy_gemm_set_bf16_products(before);
}

#if defined(__x86_64__)
TEST(AmxTiles, TheTileUnitAgreesWithItsEmulation) {
  if (!this_machine().amx_bf16)
    GTEST_SKIP() << "this CPU has no AMX-BF16 and AMX-TILE (lscpu: amx_bf16, amx_tile), or Linux did not grant the tile state: "
                    "the tile unit's products are tested on the emulated unit only";
  std::mt19937 rng(6);
  for (std::size_t k : {1, 31, 32, 33, 97, 1023, 1025}) {
    const operand a(45, k, false, 3, rng), b(k, 50, true, 1, rng);
    const std::vector<float> c = product<amx::hardware_tiles>(a, b, own);
    expect_product(a, b, c, "tile unit, K " + std::to_string(k));
    EXPECT_EQ(c, product<amx::emulated_tiles>(a, b, own)) << "K " << k << ": the unit rounds as the SDM says";
    EXPECT_EQ(product<amx::hardware_tiles>(a, b, small, true), product<amx::emulated_tiles>(a, b, small, true)) << "K " << k;
  }
}
#endif

}  // namespace
