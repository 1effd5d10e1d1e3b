#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessel/core/tree.hpp"

namespace {
using tessel::shape;
using tessel::tensor;

template <template <class, class> class T = tensor>
struct layer {
  BOOST_HANA_DEFINE_STRUCT(layer, (T<float, shape<2, 2>>, w), (T<float, shape<2>>, b));
};
template <template <class, class> class T = tensor>
struct model {
  BOOST_HANA_DEFINE_STRUCT(model, (layer<T>, layer1), (layer<T>, layer2), (T<std::int32_t, shape<>>, step));
};

static_assert(std::is_same_v<tessel::tree::rebind_t<model<>, tessel::tracer>, model<tessel::tracer>>);
static_assert(std::is_same_v<tessel::tree::rebind_t<tensor<float, shape<3>>, tessel::tracer>, tessel::tracer<float, shape<3>>>);
static_assert(tessel::tree::leaf_count<model<tessel::tracer>>() == 5);
static_assert(tessel::Struct<model<>> && !tessel::Struct<tensor<float, shape<1>>>);

TEST(Tree, LeavesInDeclarationOrderWithDottedNames) {
  model<> m;
  std::vector<std::string> names;
  tessel::tree::for_each_named(m, [&](const std::string& name, const auto&) { names.push_back(name); });
  EXPECT_EQ(names, (std::vector<std::string>{"layer1.w", "layer1.b", "layer2.w", "layer2.b", "step"}));
  std::tuple<tensor<float, shape<1>>, layer<>> t;
  names.clear();
  tessel::tree::for_each_named(t, [&](const std::string& name, const auto&) { names.push_back(name); });
  EXPECT_EQ(names, (std::vector<std::string>{"0", "1.w", "1.b"}));
}

TEST(Tree, MapCombinesTreesLeafByLeaf) {
  layer<> a, b;
  a.w = tensor<float, shape<2, 2>>{1, 2, 3, 4};
  a.b = tensor<float, shape<2>>{5, 6};
  b.w.fill(10);
  b.b.fill(20);
  const layer<> sum = tessel::tree_map(
      [](const auto& x, const auto& y) {
        auto out = x;
        for (std::size_t i = 0; i < out.size; ++i) out[i] = x[i] + y[i];
        return out;
      },
      a, b);
  EXPECT_EQ(sum.w, (tensor<float, shape<2, 2>>{11, 12, 13, 14}));
  EXPECT_EQ(sum.b, (tensor<float, shape<2>>{25, 26}));
}
}  // namespace
