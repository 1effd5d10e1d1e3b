#include <gtest/gtest.h>

#include <array>
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
  std::array<layer<>, 2> stack;
  names.clear();
  tessel::tree::for_each_named(stack, [&](const std::string& name, const auto&) { names.push_back(name); });
  EXPECT_EQ(names, (std::vector<std::string>{"0.w", "0.b", "1.w", "1.b"}));
}

static_assert(std::is_same_v<tessel::tree::rebind_t<std::array<layer<>, 3>, tessel::tracer>, std::array<layer<tessel::tracer>, 3>>);
static_assert(tessel::tree::leaf_count<std::array<layer<tessel::tracer>, 3>>() == 6);

TEST(Tree, ArraysMapAndBuildElementByElement) {
  std::array<layer<>, 2> a;
  a[0].b = tensor<float, shape<2>>{1, 2};
  a[1].b = tensor<float, shape<2>>{3, 4};
  const auto twice = tessel::tree_map([](const auto& x) {
    auto out = x;
    for (auto& v : out) v *= 2;
    return out;
  }, a);
  EXPECT_EQ(twice[1].b, (tensor<float, shape<2>>{6, 8}));
  int made = 0;
  const auto built = tessel::tree::build<std::array<layer<>, 2>>([&](auto leaf) {
    typename decltype(leaf)::type t;
    t.fill(static_cast<float>(made++));
    return t;
  });
  EXPECT_EQ(built[0].w[0], 0.0f);
  EXPECT_EQ(built[0].b[0], 1.0f);
  EXPECT_EQ(built[1].b[0], 3.0f);
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
