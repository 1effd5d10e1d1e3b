#pragma once
// bfloat16: the top 16 bits of an IEEE binary32.
//
// float -> bfloat16 rounds to nearest, ties to even, exactly as JAX / ml_dtypes (Eigen's
// float_to_bfloat16_rtne): subnormals round like normals, overflow rounds to infinity, and a NaN
// becomes the quiet NaN 0x7fc0 (0xffc0 when its sign bit is set). bfloat16 -> float is exact.
// Arithmetic goes through float; a bfloat16 is stored and moved as its 16 bits.

#include <bit>
#include <cstdint>
#include <limits>

namespace tessel {

class bfloat16 {
 public:
  // Left unset, as a float is (bfloat16{} is zero): fresh storage for results is not written twice.
  constexpr bfloat16() = default;
  constexpr explicit bfloat16(float value) : bits_(round_to_bits(value)) {}

  static constexpr bfloat16 from_bits(std::uint16_t bits) {
    bfloat16 b;
    b.bits_ = bits;
    return b;
  }
  constexpr std::uint16_t bits() const { return bits_; }
  constexpr operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits_) << 16); }

  static constexpr std::uint16_t round_to_bits(float value) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u & 0x80000000u) ? 0xffc0 : 0x7fc0;  // NaN stays NaN
    const std::uint32_t lsb = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
  }

  friend constexpr bool operator==(bfloat16 a, bfloat16 b) { return float(a) == float(b); }

 private:
  std::uint16_t bits_;
};

}  // namespace tessel

template <>
class std::numeric_limits<tessel::bfloat16> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static constexpr int radix = 2;
  static constexpr tessel::bfloat16 min() noexcept { return tessel::bfloat16::from_bits(0x0080); }
  static constexpr tessel::bfloat16 lowest() noexcept { return tessel::bfloat16::from_bits(0xff7f); }
  static constexpr tessel::bfloat16 max() noexcept { return tessel::bfloat16::from_bits(0x7f7f); }
  static constexpr tessel::bfloat16 epsilon() noexcept { return tessel::bfloat16::from_bits(0x3c00); }
  static constexpr tessel::bfloat16 infinity() noexcept { return tessel::bfloat16::from_bits(0x7f80); }
  static constexpr tessel::bfloat16 quiet_NaN() noexcept { return tessel::bfloat16::from_bits(0x7fc0); }
  static constexpr tessel::bfloat16 denorm_min() noexcept { return tessel::bfloat16::from_bits(0x0001); }
};
