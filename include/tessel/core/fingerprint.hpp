#pragma once
// A 64-bit fingerprint (FNV-1a) of values and strings: what identifies a program, its mesh and the build
// that runs it between the processes of one run (ir::add_program, kernels::add_build, shard_map.hpp).

#include <cstdint>
#include <string_view>

namespace tessel {

struct fingerprint {
  std::uint64_t value = 14695981039346656037ull;

  void add(std::uint64_t v) {
    for (int b = 0; b < 8; ++b, v >>= 8) value = (value ^ (v & 0xff)) * 1099511628211ull;
  }
  void add(std::string_view s) {
    add(s.size());
    for (char c : s) value = (value ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
};

}  // namespace tessel
