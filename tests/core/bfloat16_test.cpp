// bfloat16 conversions against an independent reference, on all 65,536 bit patterns.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tessel/core/bfloat16.hpp"

namespace {
using tessel::bfloat16;

// The value a bf16 pattern denotes, in double; infinity counts as 2^128, where IEEE's overflow
// rule places it (a float rounds to infinity exactly when it is nearer 2^128 than the largest finite value).
double reference_value(std::uint16_t bits) {
  const bool negative = bits & 0x8000;
  const int exponent = (bits >> 7) & 0xff;
  const int mantissa = bits & 0x7f;
  double magnitude;
  if (exponent == 0xff) {
    magnitude = std::ldexp(1.0, 128);
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -133);
  } else {
    magnitude = std::ldexp(128 + mantissa, exponent - 134);
  }
  return negative ? -magnitude : magnitude;
}

// Round to nearest, ties to even, by comparing distances in double between the two bf16 neighbours.
std::uint16_t reference_round(float f) {
  if (std::isnan(f)) return std::signbit(f) ? 0xffc0 : 0x7fc0;
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double target = std::abs(static_cast<double>(f));
  std::uint16_t below = 0;  // largest magnitude pattern <= target (patterns are monotonic in magnitude)
  std::uint16_t lo = 0, hi = 0x7f80;
  while (lo <= hi) {
    const std::uint16_t mid = static_cast<std::uint16_t>((lo + hi) / 2);
    if (reference_value(mid) <= target) {
      below = mid;
      lo = static_cast<std::uint16_t>(mid + 1);
    } else {
      hi = static_cast<std::uint16_t>(mid - 1);
    }
  }
  if (below == 0x7f80 || reference_value(below) == target) return sign | below;
  const std::uint16_t above = static_cast<std::uint16_t>(below + 1);
  const double down = target - reference_value(below), up = reference_value(above) - target;
  const std::uint16_t chosen = down < up ? below : up < down ? above : ((below & 1) ? above : below);
  return sign | chosen;
}

TEST(BFloat16, WideningIsExactForEveryPattern) {
  for (std::uint32_t p = 0; p < 65536; ++p) {
    const float f = bfloat16::from_bits(static_cast<std::uint16_t>(p));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), p << 16) << "pattern " << p;
    if (std::isfinite(f)) {
      ASSERT_EQ(static_cast<double>(f), reference_value(static_cast<std::uint16_t>(p))) << "pattern " << p;
    }
  }
}

TEST(BFloat16, EveryPatternRoundTripsAndNaNStaysNaN) {
  for (std::uint32_t p = 0; p < 65536; ++p) {
    const auto bits = static_cast<std::uint16_t>(p);
    const float f = bfloat16::from_bits(bits);
    const bfloat16 back(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(back))) << "pattern " << p;
      ASSERT_EQ(back.bits(), (bits & 0x8000) ? 0xffc0 : 0x7fc0) << "pattern " << p;
    } else {
      ASSERT_EQ(back.bits(), bits) << "pattern " << p;
    }
  }
}

// Every gap between neighbouring patterns: its midpoint (a tie), one float either side of it, and one
// float inside each end, against the reference.
TEST(BFloat16, RoundsToNearestEvenInEveryGap) {
  int checked = 0;
  for (std::uint32_t p = 0; p < 65536; ++p) {
    const auto bits = static_cast<std::uint16_t>(p);
    if ((bits & 0x7fff) >= 0x7f80) continue;  // infinities and NaNs have no gap above
    const std::uint32_t lo = static_cast<std::uint32_t>(bits) << 16;
    const std::uint32_t mid = lo | 0x8000u;
    for (std::uint32_t u : {lo + 1, mid - 1, mid, mid + 1, lo + 0xffffu}) {
      const float f = std::bit_cast<float>(u);
      ASSERT_EQ(bfloat16(f).bits(), reference_round(f)) << "float bits 0x" << std::hex << u;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 * (65536 - 2 * 128));  // all but the 256 patterns with an all-ones exponent
}

TEST(BFloat16, EdgeFloats) {
  const std::uint32_t edges[] = {
      0x00000000, 0x80000000,  // ±0
      0x00000001, 0x80000001,  // smallest f32 subnormals -> ±0
      0x00008000, 0x00008001, 0x00018000,  // ties at the bottom of the bf16 subnormals
      0x007fffff, 0x00800000,  // largest subnormal, smallest normal
      0x3f800000, 0x3f808000, 0x3f818000,  // 1, 1 + half ulp (tie to even: 1), 1 + 1.5 ulp (tie up)
      0x7f7f7fff, 0x7f7f8000, 0x7f7fffff,  // near the largest finite bf16; FLT_MAX rounds to infinity
      0x7f800000, 0xff800000,  // ±infinity
      0x7f800001, 0x7fc00000, 0xffffffff, 0x7fbfffff,  // NaNs, signalling and quiet
  };
  for (std::uint32_t u : edges) {
    const float f = std::bit_cast<float>(u);
    EXPECT_EQ(bfloat16(f).bits(), reference_round(f)) << "float bits 0x" << std::hex << u;
  }
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).bits(), 0x7f80);
  EXPECT_EQ(bfloat16(std::bit_cast<float>(0x7f800001u)).bits(), 0x7fc0);  // never becomes infinity
  EXPECT_EQ(bfloat16(1.00390625f).bits(), 0x3f80);  // 1 + 2^-8 is a tie: stays even
}

TEST(BFloat16, NumericLimitsMatchMlDtypes) {
  using limits = std::numeric_limits<bfloat16>;
  EXPECT_EQ(static_cast<float>(limits::max()), 3.3895313892515355e38f);
  EXPECT_EQ(static_cast<float>(limits::min()), 1.1754943508222875e-38f);
  EXPECT_EQ(static_cast<float>(limits::epsilon()), 0.0078125f);
  EXPECT_EQ(static_cast<float>(limits::denorm_min()), 9.183549615799121e-41f);
  EXPECT_TRUE(std::isinf(static_cast<float>(limits::infinity())));
  EXPECT_TRUE(std::isnan(static_cast<float>(limits::quiet_NaN())));
}

static_assert(bfloat16(1.0f).bits() == 0x3f80);
static_assert(static_cast<float>(bfloat16::from_bits(0xc000)) == -2.0f);
}  // namespace
