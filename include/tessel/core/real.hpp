#pragma once
// A floating-point number as a template argument: g++ 12 takes double template arguments but clang 16
// does not, so hyper-parameters (learning rates, dropout rates) travel as their bits and read back as
// doubles: template <tessel::real Rate> ... static_cast<double>(Rate). Write the argument as a double
// (`dropout<0.1>`): clang 16 does not convert a float literal (`0.1f`) here.

#include <bit>
#include <cstdint>

namespace tessel {

struct real {
  std::uint64_t bits = 0;
  constexpr real() = default;
  constexpr real(double value) : bits(std::bit_cast<std::uint64_t>(value)) {}  // NOLINT: implicit on purpose
  constexpr operator double() const { return std::bit_cast<double>(bits); }    // NOLINT: implicit on purpose
};

}  // namespace tessel
