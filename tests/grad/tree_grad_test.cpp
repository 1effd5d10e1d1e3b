// Parameter structs (Hana-reflected trees) through jit and grad: the gradient has the struct's type,
// and a whole SGD step is one jitted function.
#include "gradcheck.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

template <template <class, class> class T = tensor>
struct affine {
  BOOST_HANA_DEFINE_STRUCT(affine, (T<float, shape<3, 2>>, w), (T<float, shape<2>>, b));
};

constexpr auto loss = [](auto p, auto x) { return tessel::mean(tessel::tanh(tessel::matmul(x, p.w) + p.b)); };

TEST(TreeGrad, GradientOfAStructIsTheStruct) {
  affine<> p;
  p.w = random_tensor<float, shape<3, 2>>(1);
  p.b = random_tensor<float, shape<2>>(2);
  const auto x = random_tensor<float, shape<5, 3>>(3);
  const auto g = tessel::grad(loss)(p, x);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(g)>, affine<>>);
  // Against the leaf-by-leaf gradients of the same loss written with separate arguments.
  const auto [gw, gb] = tessel::grad<0, 1>([](auto w, auto b, auto x) {
    return tessel::mean(tessel::tanh(tessel::matmul(x, w) + b));
  })(p.w, p.b, x);
  EXPECT_TRUE(tessel::testing::all_close(g.w, gw));
  EXPECT_TRUE(tessel::testing::all_close(g.b, gb));
}

TEST(TreeGrad, JittedSgdStepReturnsTheStructAndLowersTheLoss) {
  affine<> p;
  p.w = random_tensor<float, shape<3, 2>>(4);
  p.b = random_tensor<float, shape<2>>(5);
  const auto x = random_tensor<float, shape<8, 3>>(6);
  const auto step = tessel::jit([](auto params, auto data, auto lr) {
    auto [value, grads] = tessel::value_and_grad(loss)(params, data);
    auto updated = tessel::tree_map([&](auto a, auto g) { return a - lr * g; }, params, grads);
    return std::make_tuple(value, updated);
  });
  float first = 0, last = 0;
  for (int i = 0; i < 20; ++i) {
    auto [value, next] = step(p, x, 0.5f);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(next)>, affine<>>);
    if (i == 0) first = value[0];
    last = value[0];
    p = std::move(next);
  }
  EXPECT_LT(last, first);
}
}  // namespace
