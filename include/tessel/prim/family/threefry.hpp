#pragma once
// threefry2x32 (kernels/threefry.hpp, the block function under every tessel::random key) written as
// StableHLO u32 ops on tensors, the lowering random_uniform and random_fold_in share.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessel/ir/stablehlo.hpp"

namespace tessel::prim {

// The output block of key (k0, k1) and counter (c0, c1), tensors of `shape`: 20 add/rotate/xor rounds
// and 5 key injections, as kernels::threefry2x32 computes them.
inline std::array<ir::hlo_value, 2> threefry2x32_hlo(ir::stablehlo_writer& w, const ir::hlo_value& k0, const ir::hlo_value& k1,
                                                     const ir::hlo_value& c0, const ir::hlo_value& c1, const ir::dims& shape) {
  constexpr ir::dtype_code u32 = ir::dtype_code::u32;
  const std::string t = ir::hlo_type(u32, shape);
  auto op = [&](std::string_view name, const ir::hlo_value& a, const ir::hlo_value& b) { return w.emit(name, {a, b}, {}, t); };
  auto word = [&](std::uint32_t v) { return w.constant(u32, v, shape); };
  const ir::hlo_value schedule[3] = {k0, k1, op("stablehlo.xor", op("stablehlo.xor", k0, k1), word(0x1BD11BDAu))};
  constexpr unsigned rotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  ir::hlo_value x0 = op("stablehlo.add", c0, schedule[0]), x1 = op("stablehlo.add", c1, schedule[1]);
  for (unsigned injection = 1; injection <= 5; ++injection) {
    for (unsigned r : rotations[(injection - 1) % 2]) {
      x0 = op("stablehlo.add", x0, x1);
      const ir::hlo_value rotated = op("stablehlo.or", op("stablehlo.shift_left", x1, word(r)), op("stablehlo.shift_right_logical", x1, word(32 - r)));
      x1 = op("stablehlo.xor", rotated, x0);
    }
    x0 = op("stablehlo.add", x0, schedule[injection % 3]);
    x1 = op("stablehlo.add", op("stablehlo.add", x1, schedule[(injection + 1) % 3]), word(injection));
  }
  return {x0, x1};
}

}  // namespace tessel::prim
