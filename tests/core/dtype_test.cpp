#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>

#include "tessel/core/dtype.hpp"
#include "tessel/core/fixed_string.hpp"

namespace {
using tessel::bfloat16;

static_assert(tessel::DType<float> && tessel::DType<bfloat16> && tessel::DType<std::int32_t> &&
              tessel::DType<std::uint32_t> && tessel::DType<bool>);
static_assert(!tessel::DType<double> && !tessel::DType<std::int64_t> && !tessel::DType<char>);
static_assert(tessel::FloatingDType<bfloat16> && !tessel::FloatingDType<std::int32_t>);

// The promotion lattice: pred < s32, u32 < bf16 < f32.
static_assert(std::is_same_v<tessel::promote_t<bool, bool>, bool>);
static_assert(std::is_same_v<tessel::promote_t<bool, std::int32_t>, std::int32_t>);
static_assert(std::is_same_v<tessel::promote_t<std::uint32_t, bool>, std::uint32_t>);
static_assert(std::is_same_v<tessel::promote_t<std::int32_t, bfloat16>, bfloat16>);
static_assert(std::is_same_v<tessel::promote_t<std::uint32_t, float>, float>);
static_assert(std::is_same_v<tessel::promote_t<bfloat16, float>, float>);
static_assert(std::is_same_v<tessel::promote_t<float, bfloat16>, float>);

TEST(DType, NamesFollowHlo) {
  EXPECT_EQ(tessel::dtype_name<float>(), "f32");
  EXPECT_EQ(tessel::dtype_name<bfloat16>(), "bf16");
  EXPECT_EQ(tessel::dtype_name<std::int32_t>(), "s32");
  EXPECT_EQ(tessel::dtype_name<std::uint32_t>(), "u32");
  EXPECT_EQ(tessel::dtype_name<bool>(), "pred");
  EXPECT_EQ(tessel::dtype_name<double>(), "double (f64)");
}

TEST(MessageBuilder, FormatsNumbersAndCutsLongText) {
  constexpr auto m = tessel::message_builder{} << "axis " << -3 << " of " << std::uint64_t{18446744073709551615u}
                                               << " and " << std::int64_t{-9223372036854775807 - 1};
  EXPECT_EQ(m.view(), "axis -3 of 18446744073709551615 and -9223372036854775808");
  tessel::message_builder long_one;
  for (int i = 0; i < 1000; ++i) long_one << 'x';
  EXPECT_EQ(long_one.size(), tessel::message_builder::capacity - 1);
  EXPECT_EQ(long_one.view().substr(long_one.size() - 3), "...");
  constexpr auto fitted = tessel::fit<[] { return tessel::message_builder{} << "f32[" << 2 << "]"; }>();
  static_assert(sizeof(fitted.text) == 7);
  EXPECT_EQ(fitted.view(), "f32[2]");
}
}  // namespace
