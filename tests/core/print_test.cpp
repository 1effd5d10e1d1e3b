#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <sstream>

#include "tessel/core/print.hpp"

namespace {
using tessel::shape;
using tessel::tensor;

TEST(Print, RowMajorWithDtypeAndShape) {
  EXPECT_EQ(tessel::to_string(tensor<float, shape<2, 3>>{1, 2, 3, 4, 5, 6.5f}), "f32[2,3]{{1, 2, 3}, {4, 5, 6.5}}");
  EXPECT_EQ(tessel::to_string(tensor<std::int32_t, shape<3>>{-1, 0, 7}), "s32[3]{-1, 0, 7}");
  EXPECT_EQ(tessel::to_string(tensor<bool, shape<2>>{true, false}), "pred[2]{true, false}");
  EXPECT_EQ(tessel::to_string(tensor<float, shape<>>{0.1f}), "f32[]0.1");
  EXPECT_EQ(tessel::to_string(tensor<tessel::bfloat16, shape<2>>{tessel::bfloat16(3.14159f), tessel::bfloat16(0.1f)}),
            "bf16[2]{3.14, 0.1}");  // shortest decimals that read back as the same bf16
  EXPECT_EQ(tessel::to_string(tensor<tessel::bfloat16, shape<1>>{tessel::bfloat16(3.14159f)}.astype<float>()),
            "f32[1]{3.140625}");
  std::ostringstream os;
  os << tensor<std::uint32_t, shape<1, 1>>{4000000000u};
  EXPECT_EQ(os.str(), "u32[1,1]{{4000000000}}");
}

TEST(Print, LargeTensorsAreSummarised) {
  tensor<std::int32_t, shape<2000>> t;
  std::iota(t.begin(), t.end(), 0);
  EXPECT_EQ(tessel::to_string(t), "s32[2000]{0, 1, 2, ..., 1997, 1998, 1999}");
  EXPECT_EQ(tessel::to_string(t, {.threshold = 5000}).size(), 9 + 1 + 10 * 1 + 90 * 2 + 900 * 3 + 1000 * 4 + 1999 * 2 + 1);
}

TEST(Print, MovedFromTensorSaysSo) {
  tensor<float, shape<2>> a{1, 2};
  auto b = std::move(a);
  EXPECT_EQ(tessel::to_string(a), "f32[2]{moved-from}");
}
}  // namespace
