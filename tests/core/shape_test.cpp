#include <gtest/gtest.h>

#include <type_traits>

#include "tessel/core/shape.hpp"

namespace {
using tessel::shape;

static_assert(shape<>::rank == 0 && shape<>::size == 1);
static_assert(shape<2, 3, 4>::rank == 3 && shape<2, 3, 4>::size == 24);
static_assert(shape<2, 3, 4>::strides == tessel::dims_t<3>{12, 4, 1});
static_assert(shape<5, 0>::size == 0);
static_assert(tessel::Shape<shape<1>> && !tessel::Shape<int>);
static_assert(std::is_same_v<tessel::shape_from<tessel::dims_t<2>{7, 9}>, shape<7, 9>>);

// NumPy broadcasting, aligned from the right.
static_assert(std::is_same_v<tessel::broadcast_shapes_t<shape<2, 1>, shape<3>>, shape<2, 3>>);
static_assert(std::is_same_v<tessel::broadcast_shapes_t<shape<>, shape<4, 5>>, shape<4, 5>>);
static_assert(std::is_same_v<tessel::broadcast_shapes_t<shape<8, 1, 6, 1>, shape<7, 1, 5>>, shape<8, 7, 6, 5>>);
static_assert(std::is_same_v<tessel::broadcast_shapes_t<shape<1>, shape<0>>, shape<0>>);
static_assert(tessel::broadcastable_to_v<shape<3, 1>, shape<2, 3, 4>>);

// Axes.
static_assert(std::is_same_v<tessel::drop_axis_t<shape<2, 3, 4>, 1>, shape<2, 4>>);
static_assert(std::is_same_v<tessel::drop_axis_t<shape<2, 3, 4>, -1>, shape<2, 3>>);
static_assert(std::is_same_v<tessel::insert_axis_t<shape<2, 3>, 0, 5>, shape<5, 2, 3>>);
static_assert(std::is_same_v<tessel::insert_axis_t<shape<2, 3>, -1>, shape<2, 3, 1>>);
static_assert(std::is_same_v<tessel::insert_axis_t<shape<2, 3>, 2, 4>, shape<2, 3, 4>>);
static_assert(std::is_same_v<tessel::permute_t<shape<2, 3, 4>, 2, 0, 1>, shape<4, 2, 3>>);
static_assert(std::is_same_v<tessel::permute_t<shape<2, 3>, 0, 1>, shape<2, 3>>);
static_assert(std::is_same_v<tessel::concat_t<0, shape<2, 3>, shape<4, 3>>, shape<6, 3>>);
static_assert(std::is_same_v<tessel::concat_t<-1, shape<2, 3>, shape<2, 1>>, shape<2, 4>>);
static_assert(tessel::reshapable_v<shape<2, 3, 4>, shape<6, 4>>);
static_assert(tessel::reshapable_v<shape<>, shape<1, 1>>);

TEST(Shape, BroadcastDimsReportsTheFirstClash) {
  constexpr auto r = tessel::broadcast_dims<2, 2>({2, 3}, {4, 3});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failed_axis, 0u);
  EXPECT_EQ(r.lhs_dim, 2u);
  EXPECT_EQ(r.rhs_dim, 4u);
}

TEST(Shape, MessagesRenderShapesAndDtypes) {
  EXPECT_EQ((tessel::describe<shape<2, 3>>().view()), "[2,3]");
  EXPECT_EQ(tessel::describe<shape<>>().view(), "[]");
  EXPECT_EQ((tessel::describe<tessel::tensor_type<tessel::bfloat16, shape<1, 128>>>().view()), "bf16[1,128]");
}

TEST(Shape, DropAndInsertAreInverse) {
  constexpr tessel::dims_t<3> d{2, 3, 4};
  for (std::size_t axis = 0; axis < 3; ++axis) EXPECT_EQ((tessel::insert_dim<2>(tessel::drop_dim<3>(d, axis), axis, d[axis])), d);
}
}  // namespace
