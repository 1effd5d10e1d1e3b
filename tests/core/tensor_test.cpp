#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <span>
#include <stdexcept>
#include <vector>

#include "tessel/core/tensor.hpp"
#include "tessel_test.hpp"

namespace {
using tessel::bfloat16;
using tessel::shape;
using tessel::tensor;

TEST(Tensor, IsZeroFilledAndAligned) {
  tensor<float, shape<3, 5>> t;
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % tessel::tensor_alignment, 0u);
  for (float v : t) EXPECT_EQ(v, 0.0f);
  static_assert(decltype(t)::rank == 2 && decltype(t)::size == 15);
}

TEST(Tensor, LargeStaticShapesLiveOnTheHeap) {
  auto t = tensor<float, shape<4096, 4096>>::full(2.0f);  // 64 MiB: far beyond any stack
  EXPECT_EQ(t(4095, 4095), 2.0f);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
}

TEST(Tensor, RowMajorElementAccess) {
  tensor<std::int32_t, shape<2, 3, 4>> t;
  std::iota(t.begin(), t.end(), 0);
  EXPECT_EQ(t(0, 0, 0), 0);
  EXPECT_EQ(t(1, 2, 3), 23);
  EXPECT_EQ(t(1, 0, 2), 14);
  EXPECT_EQ(t[17], 17);
  t(0, 1, 1) = -5;
  EXPECT_EQ(t.at(0, 1, 1), -5);
}

TEST(Tensor, AtChecksBounds) {
  tensor<float, shape<2, 3>> t;
  EXPECT_THROW(t.at(2, 0), std::out_of_range);
  EXPECT_THROW(t.at(0, 3), std::out_of_range);
  EXPECT_THROW(t.at(-1, 0), std::out_of_range);
  try {
    t.at(0, 7);
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "tessel::tensor<f32[2,3]>::at: index 7 is out of range for axis 1 of size 3");
  }
}

TEST(Tensor, ConstructionFromValuesSpansAndRanges) {
  tensor<float, shape<2, 2>> a{1, 2, 3, 4};
  const std::vector<float> v{1, 2, 3, 4};
  tensor<float, shape<2, 2>> b{std::span<const float>(v)};
  auto c = tensor<float, shape<2, 2>>::from_range(std::vector<double>{1, 2, 3, 4});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_THROW((tensor<float, shape<2, 2>>{1, 2, 3}), std::invalid_argument);
  using two = tensor<float, shape<2>>;
  EXPECT_THROW(two::from_range(std::vector<int>{1, 2, 3}), std::invalid_argument);
  try {
    tensor<float, shape<2, 2>> bad{1, 2, 3};
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "tessel::tensor<f32[2,2]>: expected 4 values, got 3");
  }
}

TEST(Tensor, ValueSemantics) {
  tensor<float, shape<3>> a{1, 2, 3};
  tensor<float, shape<3>> b = a;
  b[0] = 9;
  EXPECT_EQ(a[0], 1.0f);  // copies are deep
  const float* storage = b.data();
  tensor<float, shape<3>> c = std::move(b);
  EXPECT_EQ(c.data(), storage);  // moves steal the buffer
  EXPECT_EQ(b.data(), nullptr);
  b = a;  // a moved-from tensor can be assigned again
  EXPECT_EQ(b, a);
  a = a;
  EXPECT_EQ(a[2], 3.0f);
}

TEST(Tensor, ReshapeMovesTheBuffer) {
  tensor<float, shape<2, 3>> t{1, 2, 3, 4, 5, 6};
  const float* storage = t.data();
  auto r = std::move(t).reshape<shape<3, 2>>();
  EXPECT_EQ(r.data(), storage);
  EXPECT_EQ(r(2, 1), 6.0f);
  const tensor<float, shape<6>> kept{1, 2, 3, 4, 5, 6};
  auto copy = kept.reshape<shape<1, 6>>();
  EXPECT_EQ(copy(0, 5), 6.0f);
  EXPECT_NE(kept.data(), nullptr);
}

TEST(Tensor, AsTypeConvertsLikeJax) {
  tensor<float, shape<4>> f{1.5f, -2.7f, 1.00390625f, 3.0f};
  auto b = f.astype<bfloat16>();
  EXPECT_EQ(b[2].bits(), 0x3f80);  // ties to even
  auto i = f.astype<std::int32_t>();
  EXPECT_EQ(i[1], -2);  // truncation toward zero, as convert_element_type
  auto back = b.astype<float>();
  EXPECT_EQ(back[0], 1.5f);
  auto p = f.astype<bool>();
  EXPECT_TRUE(p[0]);
}

TEST(Tensor, AllCloseFollowsNumpy) {
  tensor<float, shape<2>> a{1.0f, 100.0f}, b{1.0f + 1e-6f, 100.001f};
  EXPECT_TRUE(tessel::allclose(a, b));
  EXPECT_FALSE(tessel::allclose(a, b, {.rtol = 1e-9, .atol = 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  tensor<float, shape<1>> n1{nan}, n2{nan};
  EXPECT_FALSE(tessel::allclose(n1, n2));
  EXPECT_TRUE(tessel::allclose(n1, n2, {.equal_nan = true}));
  EXPECT_TRUE(tessel::testing::all_close(a, b));
  const auto failure = tessel::testing::all_close(a, tensor<float, shape<2>>{1.0f, 101.0f});
  EXPECT_FALSE(failure);
  EXPECT_NE(std::string(failure.message()).find("element 1: 100 vs expected 101"), std::string::npos);
}
}  // namespace
