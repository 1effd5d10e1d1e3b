// The GEMM paths agree: hwy_gemm_rows on every Highway target compiled here (and, on AVX-512 targets,
// with and without vdpbf16ps), xsimd's gemm_rows and the scalar gemm_reference, each against the exact
// product (double) within the documented bound 2 k u sum|a b|. Random matrices in every layout the
// kernels read through strides (row-major, transposed, both strides > 1), f32, bf16 and mixed operands,
// sizes that hit full tiles, edges and several K/N blocks, and row sub-ranges; B packed once for a whole
// product against the kernel that packs it per block.

// Compile every target Highway can attain (not only those better than -march=native's baseline) so
// that each one's kernel is tested on this CPU.
#define HWY_COMPILE_ALL_ATTAINABLE
#define HWY_WANT_AVX3_DL 1  // as the tessel library is built (CMakeLists.txt)
#include "tessel/kernels/gemm.hpp"

#include <hwy/targets.h>

#include <gtest/gtest.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <random>
#include <string>
#include <vector>

namespace hwy_gemm_second_tu {  // hwy_gemm_second_tu.cpp
const char* target();
void gemm(const tessel::kernels::matrix_view& a, const tessel::kernels::matrix_view& b, std::size_t m, std::size_t n,
          std::size_t k, float* c, float* scratch);
}  // namespace hwy_gemm_second_tu

namespace {
using tessel::bfloat16;
using namespace tessel::kernels;

struct scratch_buffer {
  float* p = static_cast<float*>(::operator new(gemm_scratch_floats() * sizeof(float), std::align_val_t{64}));
  ~scratch_buffer() { ::operator delete(p, std::align_val_t{64}); }
};

enum class dtype { f32, bf16 };

// One operand: logical values (rows x cols) and their storage in a chosen layout and dtype.
struct operand {
  std::size_t rows = 0, cols = 0;
  std::vector<float> value;  // row-major logical values (bf16-representable when stored as bf16)
  std::vector<float> f32;
  std::vector<bfloat16> b16;
  matrix_view view;

  float operator()(std::size_t r, std::size_t c) const { return value[r * cols + c]; }
};

enum class layout { row_major, transposed, strided };

operand make_operand(std::size_t rows, std::size_t cols, dtype t, layout l, std::mt19937& gen) {
  operand o;
  o.rows = rows;
  o.cols = cols;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  o.value.resize(rows * cols);
  for (float& v : o.value) v = t == dtype::bf16 ? static_cast<float>(bfloat16(dist(gen))) : dist(gen);
  // Leading dimensions with padding, so that strides differ from the logical extents.
  std::size_t rs = 0, cs = 0, size = 0;
  switch (l) {
    case layout::row_major: rs = cols + 3, cs = 1, size = rows * rs; break;
    case layout::transposed: rs = 1, cs = rows + 5, size = cols * cs; break;
    case layout::strided: cs = 2, rs = 2 * cols + 1, size = rows * rs; break;
  }
  const float poison = std::nanf("");  // padding must never be read
  if (t == dtype::bf16) o.b16.assign(size, bfloat16(poison));
  else o.f32.assign(size, poison);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t i = r * rs + c * cs;
      if (t == dtype::bf16) o.b16[i] = bfloat16(o(r, c));
      else o.f32[i] = o(r, c);
    }
  o.view = {t == dtype::bf16 ? static_cast<const void*>(o.b16.data()) : o.f32.data(), rs, cs, t == dtype::bf16};
  return o;
}

// Exact A*B (double; products of floats are exact in double and k is small) and sum |a||b| per element.
struct exact_product {
  std::vector<double> c, abs;
};

exact_product exact(const operand& a, const operand& b) {
  const std::size_t m = a.rows, k = a.cols, n = b.cols;
  exact_product e{std::vector<double>(m * n), std::vector<double>(m * n)};
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p) {
      const double x = a(i, p);
      for (std::size_t j = 0; j < n; ++j) {
        e.c[i * n + j] += x * b(p, j);
        e.abs[i * n + j] += std::abs(x * b(p, j));
      }
    }
  return e;
}

struct shape3 {
  std::size_t m, n, k;
};

std::string describe(const char* path, const shape3& s, std::size_t m0, const matrix_view& a, const matrix_view& b) {
  return std::string(path) + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
         " rows from " + std::to_string(m0) + " A strides (" + std::to_string(a.row_stride) + "," +
         std::to_string(a.col_stride) + (a.bf16 ? ") bf16" : ") f32") + " B strides (" + std::to_string(b.row_stride) +
         "," + std::to_string(b.col_stride) + (b.bf16 ? ") bf16" : ") f32");
}

// Runs `fn` on rows [m0, m) and checks every element against the exact product.
void run_and_check(gemm_rows_fn fn, const char* path, const shape3& s, std::size_t m0, const operand& a,
                                 const operand& b, const exact_product& e) {
  static scratch_buffer scratch;
  const std::size_t ldc = s.n + 5;
  std::vector<float> c((s.m - m0) * ldc, 12345.0f);  // stale values must be overwritten, not accumulated
  fn(a.view, b.view, m0, s.m, s.n, s.k, c.data(), ldc, scratch.p);
  constexpr double u = 1.0 / (1 << 24);
  for (std::size_t i = m0; i < s.m; ++i)
    for (std::size_t j = 0; j < s.n; ++j) {
      const double want = e.c[i * s.n + j], got = c[(i - m0) * ldc + j];
      const double bound = 2.0 * static_cast<double>(s.k) * u * e.abs[i * s.n + j] + 1e-30;
      if (!(std::abs(got - want) <= bound)) {
        ADD_FAILURE() << describe(path, s, m0, a.view, b.view) << ": C(" << i << "," << j << ") = " << got
                      << ", exact " << want << ", bound " << bound;
        return;
      }
    }
}

std::vector<shape3> shapes() {
  std::vector<shape3> s = {
      {1, 1, 1},    {1, 1, 2},     {2, 3, 1},     {1, 300, 1},    {300, 1, 7},  {6, 16, 7},    {7, 17, 9},
      {12, 32, 256}, {13, 33, 257}, {11, 31, 255}, {24, 64, 512}, {25, 65, 513}, {49, 40, 1025}, {100, 300, 70},
      {97, 130, 600}, {300, 7, 300}, {5, 2100, 3},  // N past one NC block
  };
  std::mt19937 gen(7);
  std::uniform_int_distribution<std::size_t> dim(1, 300);
  for (int i = 0; i < 6; ++i) s.push_back({dim(gen), dim(gen), dim(gen)});
  return s;
}

// Every shape x dtype pair x layout pair through `paths`; each element checked against the exact product.
template <class Paths>
void for_all_cases(Paths&& paths) {
  std::mt19937 gen(2024);
  const layout layouts[] = {layout::row_major, layout::transposed, layout::strided};
  const std::pair<dtype, dtype> dtypes[] = {
      {dtype::f32, dtype::f32}, {dtype::bf16, dtype::bf16}, {dtype::bf16, dtype::f32}, {dtype::f32, dtype::bf16}};
  for (const shape3& s : shapes())
    for (const auto& [ta, tb] : dtypes) {
      std::vector<operand> as, bs;
      const std::uint32_t seed_a = gen(), seed_b = gen();
      for (layout l : layouts) {
        std::mt19937 ga(seed_a), gb(seed_b);
        as.push_back(make_operand(s.m, s.k, ta, l, ga));
        bs.push_back(make_operand(s.k, s.n, tb, l, gb));
      }
      // The same logical matrices in each layout (same seeds), so one exact product serves all.
      const exact_product e = exact(as[0], bs[0]);
      int index = 0;
      for (const operand& a : as)
        for (const operand& b : bs) {
          const std::size_t m0 = (index++ % 2 == 1 && s.m > 2) ? s.m / 3 : 0;
          paths(s, m0, a, b, e);
        }
    }
}

TEST(HwyGemm, EveryTargetAgreesWithExactProduct) {
  const std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (std::int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    ASSERT_STREQ(hwy_gemm_target(), hwy::TargetName(target));
    SCOPED_TRACE(hwy::TargetName(target));
    std::printf("target %s\n", hwy::TargetName(target));
    const bf16_products before = hwy_gemm_set_bf16_products(bf16_products::dpbf16);
    for (bool allow_dpbf16 : {true, false}) {
      hwy_gemm_set_bf16_products(allow_dpbf16 ? bf16_products::dpbf16 : bf16_products::widened);
      if (!allow_dpbf16) {
        EXPECT_FALSE(hwy_gemm_uses_dpbf16());
      }
      const std::string path = std::string("hwy ") + hwy::TargetName(target) +
                               (hwy_gemm_uses_dpbf16() ? " (vdpbf16ps)" : " (widened)");
      for_all_cases([&](const shape3& s, std::size_t m0, const operand& a, const operand& b, const exact_product& e) {
        // The f32 path does not depend on the switch: run it once.
        if (!allow_dpbf16 && !(a.view.bf16 && b.view.bf16)) return;
        run_and_check(&hwy_gemm_rows, path.c_str(), s, m0, a, b, e);
      });
      if (::testing::Test::HasFailure()) break;
    }
    hwy_gemm_set_bf16_products(before);
  }
  hwy::SetSupportedTargetsForTest(0);
}

// B packed once (hwy_gemm_pack_b, in two ranges of panels as two threads would) and multiplied block by
// block of rows and of NR-aligned columns, as the executor does: bit for bit the blocked kernel's result
// with the same blocks (a K block of 37 elements makes an odd one for vdpbf16ps' pairs), and within the
// exact product's bound.
void check_packed_against_blocked(const char* path, const shape3& s, std::size_t m0, const operand& a,
                                  const operand& b, const exact_product& e) {
  static scratch_buffer scratch;
  const gemm_blocking own = blocking_of();
  gemm_blocking blocks = own;
  blocks.kc = 37;
  blocks.mc = 2 * own.mr;
  blocks.nc = 3 * own.nr;
  const packed_b_layout layout = hwy_gemm_packed_b_layout(a.view, b.view, s.n, s.k, blocks);
  ASSERT_GT(layout.nr, 0u);  // this target's NR (blocking_of() keeps the best target's)
  ASSERT_EQ(layout.panels, (s.n + layout.nr - 1) / layout.nr);
  EXPECT_EQ(layout.pairs, a.view.bf16 && b.view.bf16 && (hwy_gemm_uses_dpbf16() || hwy_gemm_uses_amx()));
  EXPECT_EQ(layout.tiles, a.view.bf16 && b.view.bf16 && hwy_gemm_uses_amx());
  const std::size_t words = layout.floats();
  float* packed = static_cast<float*>(::operator new((words + 1) * sizeof(float), std::align_val_t{64}));
  packed[words] = 4321.0f;  // a word past the layout must stay untouched
  const std::size_t half = layout.panels / 2;
  hwy_gemm_pack_b(b.view, s.n, s.k, blocks, layout, half, layout.panels, packed);
  hwy_gemm_pack_b(b.view, s.n, s.k, blocks, layout, 0, half, packed);
  EXPECT_EQ(packed[words], 4321.0f);
  const std::size_t elem = b.view.bf16 ? 2 : 4, width = 2 * layout.nr, rows = s.m - m0;
  std::vector<float> got(rows * s.n), want(rows * s.n);
  for (std::size_t r0 = m0; r0 < s.m; r0 += blocks.mc)
    for (std::size_t c0 = 0; c0 < s.n; c0 += width) {
      const std::size_t r1 = std::min(s.m, r0 + blocks.mc), w = std::min(width, s.n - c0);
      float* g = got.data() + (r0 - m0) * s.n + c0;
      hwy_gemm_rows_packed(a.view, packed + c0 / layout.nr * layout.panel_floats, layout, r0, r1, w, s.k, g, s.n,
                           scratch.p, blocks);
      matrix_view columns = b.view;
      columns.data = static_cast<const unsigned char*>(b.view.data) + c0 * b.view.col_stride * elem;
      select_blocked_gemm()(a.view, columns, r0, r1, w, s.k, want.data() + (r0 - m0) * s.n + c0, s.n, scratch.p, blocks);
    }
  ::operator delete(packed, std::align_val_t{64});
  constexpr double u = 1.0 / (1 << 24);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < s.n; ++j) {
      const float x = got[i * s.n + j], y = want[i * s.n + j];
      const double exact_c = e.c[(m0 + i) * s.n + j];
      const double bound = 2.0 * static_cast<double>(s.k) * u * e.abs[(m0 + i) * s.n + j] + 1e-30;
      if (std::memcmp(&x, &y, sizeof x) != 0 || !(std::abs(x - exact_c) <= bound)) {
        ADD_FAILURE() << describe(path, s, m0, a.view, b.view) << ": packed C(" << m0 + i << "," << j << ") = " << x
                      << ", blocked " << y << ", exact " << exact_c << ", bound " << bound;
        return;
      }
    }
}

TEST(HwyGemm, PackedBIsTheBlockedKernelBitForBit) {
  const std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
  const bf16_products before = hwy_gemm_set_bf16_products(bf16_products::dpbf16);
  for (std::int64_t target : {targets.front(), targets.back()}) {  // the best and the least capable
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (bf16_products how : {bf16_products::dpbf16, bf16_products::widened}) {
      hwy_gemm_set_bf16_products(how);
      const std::string path = std::string("packed ") + hwy::TargetName(target) +
                               (hwy_gemm_uses_dpbf16() ? " (vdpbf16ps)" : " (widened)");
      for_all_cases([&](const shape3& s, std::size_t m0, const operand& a, const operand& b, const exact_product& e) {
        if (how == bf16_products::widened && !(a.view.bf16 && b.view.bf16)) return;  // f32: once
        check_packed_against_blocked(path.c_str(), s, m0, a, b, e);
      });
      if (::testing::Test::HasFailure()) break;
    }
  }
  hwy_gemm_set_bf16_products(before);
  hwy::SetSupportedTargetsForTest(0);
}

// An A whose block of columns feeds few panels of B (hwy_gemm-inl.hpp, blocking::a_in_place_panels: 8) is
// read where it is instead of packed: the same products in the same order, so the result is the packed
// path's bit for bit. Blocks of one panel read A in place (f32: rows of A and A^T; bf16 with vdpbf16ps:
// rows of A, whose stride here is odd, so pairs lie 2 bytes from a 4-byte boundary; the last 5 rows,
// short of a register block, packed, but for f32 rows of A ending in 2/3 or 1/3 of one (m0 below), read
// in place by a kernel of that many rows); one block of all 24 packs it. K of 301 in blocks of 100 ends
// with an odd block, which vdpbf16ps packs (its last pair would read past the row). A last block of 10
// columns (n + 10) runs the narrow kernel where A is packed, the wide one on a last panel read in place.
// The operands' NaN padding must not be read.
TEST(HwyGemm, AReadInPlaceIsPackedABitForBit) {
  static scratch_buffer scratch;
  const gemm_blocking own = blocking_of();
  const std::size_t m = 3 * own.mr + 5, k = 301;
  const std::size_t two_thirds = own.mr + 5 - own.mr / 3 * 2, one_third = 5 - own.mr / 3;  // m - m0: 2 MR + 2/3, 3 MR + 1/3
  const bf16_products before = hwy_gemm_set_bf16_products(bf16_products::dpbf16);
  std::mt19937 gen(11);
  for (const std::size_t n : {24 * own.nr, 24 * own.nr + 10}) {
    for (dtype t : {dtype::f32, dtype::bf16}) {
      ASSERT_GE(own.nc, n);
      const operand b = make_operand(k, n, t, layout::row_major, gen);
      for (layout l : {layout::row_major, layout::transposed}) {
        const operand a = make_operand(m, k, t, l, gen);
        gemm_blocking in_place = own, packed = own;
        in_place.nc = own.nr;
        packed.nc = n;
        in_place.kc = packed.kc = 100;
        for (std::size_t m0 : {std::size_t{0}, std::size_t{7}, two_thirds, one_third}) {
          std::vector<float> x((m - m0) * n), y((m - m0) * n);
          select_blocked_gemm()(a.view, b.view, m0, m, n, k, x.data(), n, scratch.p, in_place);
          select_blocked_gemm()(a.view, b.view, m0, m, n, k, y.data(), n, scratch.p, packed);
          for (std::size_t i = 0; i < x.size(); ++i)
            ASSERT_EQ(0, std::memcmp(&x[i], &y[i], sizeof(float)))
                << (t == dtype::bf16 ? "bf16 " : "f32 ") << (l == layout::row_major ? "A" : "A^T") << ", n " << n << ", m0 " << m0
                << ", C(" << m0 + i / n << "," << i % n << ") " << x[i] << " against " << y[i];
        }
      }
    }
  }
  hwy_gemm_set_bf16_products(before);
}

// An f32 B that feeds few rows of A (hwy_gemm-inl.hpp, blocking::b_in_place_rows: 12 MR) is read where it
// is, each panel's K steps a row of B apart: the same products in the same order as from B packed, so the
// result is the packed path's bit for bit. Calls of 6 MR and 7 MR + 5 rows read it in place, one call
// of all 13 MR + 5 packs it; K of 301 in blocks of 100. B's rows are 3 floats longer than its 4 panels
// (NaN there must not be read); B^T and a bf16 B are packed whatever the rows.
TEST(HwyGemm, BReadInPlaceIsPackedBBitForBit) {
  static scratch_buffer scratch;
  const gemm_blocking own = blocking_of();
  const std::size_t m = 13 * own.mr + 5, n = 4 * own.nr, k = 301, split = 6 * own.mr;
  ASSERT_GE(own.nc, n);
  std::mt19937 gen(12);
  const operand a = make_operand(m, k, dtype::f32, layout::row_major, gen);
  const operand b = make_operand(k, n, dtype::f32, layout::row_major, gen);
  EXPECT_TRUE(hwy_gemm_reads_b_in_place(b.view, split, n));
  EXPECT_TRUE(hwy_gemm_reads_b_in_place(b.view, m - split, n));
  EXPECT_FALSE(hwy_gemm_reads_b_in_place(b.view, m, n));
  EXPECT_FALSE(hwy_gemm_reads_b_in_place(b.view, split, n - 1));
  EXPECT_FALSE(hwy_gemm_reads_b_in_place(make_operand(k, n, dtype::f32, layout::transposed, gen).view, split, n));
  EXPECT_FALSE(hwy_gemm_reads_b_in_place(make_operand(k, n, dtype::bf16, layout::row_major, gen).view, split, n));
  gemm_blocking blocks = own;
  blocks.kc = 100;
  std::vector<float> x(m * n), y(m * n);
  select_blocked_gemm()(a.view, b.view, 0, split, n, k, x.data(), n, scratch.p, blocks);
  select_blocked_gemm()(a.view, b.view, split, m, n, k, x.data() + split * n, n, scratch.p, blocks);
  select_blocked_gemm()(a.view, b.view, 0, m, n, k, y.data(), n, scratch.p, blocks);
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(0, std::memcmp(&x[i], &y[i], sizeof(float))) << "C(" << i / n << "," << i % n << ") " << x[i] << " against " << y[i];
}

// C of at most one vector's columns (a classifier's logits) runs a narrow micro-kernel, with the bits the
// full-width kernel gives those columns when C is wider: the same FMAs in the same order, on every target
// (but SCALAR, which keeps the full-width kernels), over K blocks, rows in place and packed, and a C that
// accumulates.
TEST(HwyGemm, NarrowCIsTheWideKernelsColumnsBitForBit) {
  static scratch_buffer scratch;
  const std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
  for (std::int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    gemm_blocking blocks = blocking_of();
    blocks.kc = 100;
    const std::size_t m = 5 * blocks.mr + 7, k = 233, wide = 3 * blocks.nr;
    std::mt19937 gen(13);
    const operand a = make_operand(m, k, dtype::f32, layout::row_major, gen);
    const operand b = make_operand(k, wide, dtype::f32, layout::row_major, gen);
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{10}, std::size_t{16}}) {
      SCOPED_TRACE(n);
      std::vector<float> x(m * n, 0.5f), y(m * wide, 0.5f);
      select_blocked_gemm()(a.view, b.view, 0, m, n, k, x.data(), n, scratch.p, blocks);
      select_blocked_gemm()(a.view, b.view, 0, m, wide, k, y.data(), wide, scratch.p, blocks);
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j)
          ASSERT_EQ(0, std::memcmp(&x[i * n + j], &y[i * wide + j], sizeof(float))) << "C(" << i << "," << j << ") " << x[i * n + j] << " against " << y[i * wide + j];
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(HwyGemm, PackingOutsideTheLayoutIsRefused) {
  hwy::SetSupportedTargetsForTest(0);
  const float a = 1.0f, b = 2.0f;
  const matrix_view va{&a, 1, 1, false}, vb{&b, 1, 1, false};
  const packed_b_layout layout = hwy_gemm_packed_b_layout(va, vb, 1, 1, blocking_of());
  EXPECT_EQ(layout.panels, 1u);
  std::vector<float> out(layout.floats() + 16);
  EXPECT_THROW(hwy_gemm_pack_b(vb, 1, 1, blocking_of(), layout, 0, 2, out.data()), std::invalid_argument);
  gemm_blocking too_big = blocking_of();
  too_big.kc *= 2;
  EXPECT_THROW(hwy_gemm_packed_b_layout(va, vb, 1, 1, too_big), std::invalid_argument);
}

TEST(HwyGemm, XsimdScalarAndHwyAgree) {
  hwy::SetSupportedTargetsForTest(0);
  for_all_cases([](const shape3& s, std::size_t m0, const operand& a, const operand& b, const exact_product& e) {
    // Each within the bound of the exact product, hence within twice it of each other. (Not bit for
    // bit: clang and GCC contract and order xsimd's first products differently.)
    run_and_check(select_gemm(gemm_kernel::xsimd), "xsimd", s, m0, a, b, e);
    run_and_check(select_gemm(gemm_kernel::hwy), "hwy", s, m0, a, b, e);
    if (s.m * s.n * s.k <= 1'000'000) run_and_check(select_gemm(gemm_kernel::scalar), "scalar", s, m0, a, b, e);
  });
}

TEST(HwyGemm, DispatchesToTheBestTarget) {
  hwy::SetSupportedTargetsForTest(0);
  // SupportedAndGeneratedTargets lists the best (lowest bit) first.
  EXPECT_STREQ(hwy_gemm_target(), hwy::TargetName(hwy::SupportedAndGeneratedTargets().front()));
  std::printf("hwy_gemm_rows runs on %s, bf16 x bf16 with %s\n", hwy_gemm_target(),
              hwy_gemm_uses_dpbf16() ? "vdpbf16ps" : "widening to f32");
}

TEST(HwyGemm, Bf16ProductsAreMeasuredOnceAndCanBeSet) {
  hwy::SetSupportedTargetsForTest(0);
  const bf16_products before = hwy_gemm_set_bf16_products(bf16_products::measured);
  const bool measured = hwy_gemm_uses_dpbf16();  // the first call under `measured` times both paths
  for (int i = 0; i < 3; ++i) EXPECT_EQ(hwy_gemm_uses_dpbf16(), measured) << "the measured choice is made once";
  hwy_gemm_set_bf16_products(bf16_products::widened);
  EXPECT_FALSE(hwy_gemm_uses_dpbf16());
  hwy_gemm_set_bf16_products(bf16_products::dpbf16);
  bool cpu_has_bf16 = false;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  cpu_has_bf16 = __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 5) & 1u) != 0;
#endif
  const std::string target = hwy_gemm_target();
  EXPECT_EQ(hwy_gemm_uses_dpbf16(), cpu_has_bf16 && target.rfind("AVX3", 0) == 0) << target;
  if (!cpu_has_bf16) {
    EXPECT_FALSE(measured);
  }
  EXPECT_EQ(hwy_gemm_set_bf16_products(before), bf16_products::dpbf16);
}

TEST(HwyGemm, SecondTranslationUnitDispatchesAlike) {
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_STREQ(hwy_gemm_second_tu::target(), hwy_gemm_target());
  const std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
  hwy::SetSupportedTargetsForTest(targets.back());  // the least capable: a switch made here is seen there
  EXPECT_STREQ(hwy_gemm_second_tu::target(), hwy::TargetName(targets.back()));
  std::mt19937 gen(5);
  const operand a = make_operand(13, 40, dtype::f32, layout::row_major, gen);
  const operand b = make_operand(40, 35, dtype::bf16, layout::transposed, gen);
  const exact_product e = exact(a, b);
  scratch_buffer scratch;
  std::vector<float> c(13 * 35);
  hwy_gemm_second_tu::gemm(a.view, b.view, 13, 35, 40, c.data(), scratch.p);
  for (std::size_t i = 0; i < c.size(); ++i)
    EXPECT_NEAR(c[i], e.c[i], 2.0 * 40 / (1 << 24) * e.abs[i]) << i;
  hwy::SetSupportedTargetsForTest(0);
}

TEST(HwyGemm, EmptyKGivesZero) {
  scratch_buffer scratch;
  const float a = 1.0f, b = 2.0f;
  const matrix_view va{&a, 0, 0, false}, vb{&b, 0, 0, false};
  for (gemm_kernel kind : {gemm_kernel::scalar, gemm_kernel::xsimd, gemm_kernel::hwy}) {
    std::vector<float> c(3 * 4, 7.0f);
    select_gemm(kind)(va, vb, 0, 3, 4, 0, c.data(), 4, scratch.p);
    for (float v : c) EXPECT_EQ(v, 0.0f);
  }
}

TEST(HwyGemm, SelectGemm) {
  EXPECT_EQ(select_gemm(gemm_kernel::scalar), &gemm_reference);
  EXPECT_EQ(select_gemm(gemm_kernel::xsimd), &gemm_rows);
  EXPECT_EQ(select_gemm(gemm_kernel::hwy), &hwy_gemm_rows);
  EXPECT_EQ(select_gemm(), select_gemm(default_gemm_kernel));
}

}  // namespace
