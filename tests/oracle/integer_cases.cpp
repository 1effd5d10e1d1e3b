// Integers, select and conversions against lax's: the binary primitives on random s32 (with vmap) and on
// every pair of s32 and u32 edge values; abs, neg and sign of s32; select (vjp, jvp, vmap); every
// convert_element_type the library has, on edge values.
#include <limits>

#include "oracle.hpp"

namespace tessel::oracle {
namespace {
using F = tensor<float, shape<3, 4>>;
using EA = tensor<float, shape<16, 16>>;
using I = tensor<std::int32_t, shape<3, 4>>;
using IE = tensor<std::int32_t, shape<9, 9>>;
using UE = tensor<std::uint32_t, shape<9, 9>>;
using P = tensor<bool, shape<3, 4>>;

// The s32 edge values, and every pair of them over a [9,9] (rows the first operand, columns the second).
constexpr std::array<std::int64_t, 9> int_edges{0, 1, -1, 7, -7, 100, std::numeric_limits<std::int32_t>::max(),
                                                std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::min() + 1};
template <class X, bool Rows>
X int_pairs() {
  X t;
  for (std::size_t i = 0; i < 81; ++i) t[i] = static_cast<typename X::value_type>(int_edges[Rows ? i / 9 : i % 9]);
  return t;
}

// One integer binary function: random s32 with vmap, every pair of s32 and of u32 edge values.
template <class Fn>
void integer(suite& s, const std::string& name, Fn f, std::uint32_t seed) {
  check(s, name, name + "@s32", f, options{-50, 50}, uniform<I>(seed, -50, 50), uniform<I>(seed + 1, -50, 50));
  check(s, name, name + "@edge_s32", f, options{.transforms = false}, int_pairs<IE, true>(), int_pairs<IE, false>());
  check(s, name, name + "@edge_u32", f, options{.transforms = false}, int_pairs<UE, true>(), int_pairs<UE, false>());
}
}  // namespace

void integer_cases(suite& s) {
  integer(s, "add", [](auto a, auto b) { return tessel::add(a, b); }, 21);
  integer(s, "sub", [](auto a, auto b) { return tessel::sub(a, b); }, 22);
  integer(s, "mul", [](auto a, auto b) { return tessel::mul(a, b); }, 23);
  integer(s, "div", [](auto a, auto b) { return tessel::div(a, b); }, 24);
  integer(s, "max", [](auto a, auto b) { return tessel::max(a, b); }, 25);
  integer(s, "min", [](auto a, auto b) { return tessel::min(a, b); }, 26);
  integer(s, "lt", [](auto a, auto b) { return tessel::lt(a, b); }, 27);
  integer(s, "eq", [](auto a, auto b) { return tessel::eq(a, b); }, 28);
  check(s, "abs", "abs@edge_s32", [](auto x) { return tessel::abs(x); }, options{.transforms = false}, int_pairs<IE, true>());
  check(s, "neg", "neg@edge_s32", [](auto x) { return tessel::neg(x); }, options{.transforms = false}, int_pairs<IE, true>());
  check(s, "sign", "sign@edge_s32", [](auto x) { return tessel::sign(x); }, options{.transforms = false}, int_pairs<IE, true>());
  // select: the predicate from a comparison, and given as pred; a scalar branch.
  check(s, "select", [](auto p, auto a, auto b) { return tessel::select(p, a, b); }, uniform<P>(31), uniform<F>(32), uniform<F>(33));
  check(s, "select_lt", "select_lt@edge", [](auto a, auto b) { return tessel::select(a < b, a, b); }, options{.transforms = false},
        edges<EA, 16>(), edges<EA>());
  check(s, "select_scalar", [](auto p, auto a) { return tessel::select(p, a, 0.5f); }, uniform<P>(34), uniform<F>(35));
  // convert_element_type between every pair the library converts.
  check(s, "to_bf16_and_back", [](auto x) { return tessel::convert_element_type<float>(tessel::convert_element_type<bfloat16>(x)); },
        uniform<F>(41));
  check(s, "to_bf16", "to_bf16@edge", [](auto x) { return tessel::convert_element_type<bfloat16>(x); }, options{.transforms = false},
        edges<EA>());
  check(s, "to_s32", "to_s32@edge", [](auto x) { return tessel::convert_element_type<std::int32_t>(x); }, options{.transforms = false},
        edges<EA>());
  check(s, "to_s32", [](auto x) { return tessel::convert_element_type<std::int32_t>(x); }, uniform<F>(42, -1e3, 1e3));
  check(s, "to_pred", "to_pred@edge", [](auto x) { return tessel::convert_element_type<bool>(x); }, options{.transforms = false},
        edges<EA>());
  check(s, "to_f32", "to_f32@s32", [](auto x) { return tessel::convert_element_type<float>(x); }, options{.transforms = false},
        int_pairs<IE, true>());
  check(s, "to_f32", "to_f32@pred", [](auto x) { return tessel::convert_element_type<float>(x); }, options{}, uniform<P>(43));
  check(s, "to_u32", "to_u32@s32", [](auto x) { return tessel::convert_element_type<std::uint32_t>(x); }, options{.transforms = false},
        int_pairs<IE, true>());
}
}  // namespace tessel::oracle
