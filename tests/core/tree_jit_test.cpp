// Trees crossing jit and grad: std::array stacks of layer structs as arguments and gradients, and a
// struct of stacked ys (scan's result) returned from jit.
#include <gtest/gtest.h>

#include <array>
#include <tuple>
#include <type_traits>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/jit.hpp"
#include "tessel/transform/scan.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::all_close;
using tessel::testing::random_tensor;

template <template <class, class> class T = tensor>
struct dense {
  BOOST_HANA_DEFINE_STRUCT(dense, (T<float, shape<4, 4>>, w), (T<float, shape<4>>, b));
};
constexpr std::size_t depth = 3;
using stack = std::array<dense<>, depth>;

static_assert(std::is_same_v<tessel::tree::rebind_t<stack, tessel::tracer>, std::array<dense<tessel::tracer>, depth>>);
static_assert(tessel::tree::leaf_count<std::array<dense<tessel::tracer>, depth>>() == 2 * depth);

stack random_stack(std::uint32_t seed) {
  stack s;
  for (auto& layer : s) {
    layer.w = random_tensor<float, shape<4, 4>>(seed++);
    layer.b = random_tensor<float, shape<4>>(seed++);
  }
  return s;
}

// The same network two ways: a loop over an array of layers, and the layers as separate arguments.
constexpr auto over_array = [](auto x, const auto& layers) {
  auto h = x;
  for (const auto& layer : layers) h = tessel::tanh(tessel::matmul(h, layer.w) + layer.b);
  return tessel::sum(h * h);
};
constexpr auto over_arguments = [](auto x, auto w0, auto b0, auto w1, auto b1, auto w2, auto b2) {
  auto h = tessel::tanh(tessel::matmul(x, w0) + b0);
  h = tessel::tanh(tessel::matmul(h, w1) + b1);
  h = tessel::tanh(tessel::matmul(h, w2) + b2);
  return tessel::sum(h * h);
};

TEST(TreeJit, ArrayOfLayerStructsIsAnArgumentAndAGradient) {
  const auto x = random_tensor<float, shape<2, 4>>(100);
  const stack layers = random_stack(1);
  const auto [value, grads] = tessel::value_and_grad<1>(over_array)(x, layers);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(grads)>, stack>);
  const auto [expected_value, expected] = tessel::value_and_grad<1, 2, 3, 4, 5, 6>(over_arguments)(
      x, layers[0].w, layers[0].b, layers[1].w, layers[1].b, layers[2].w, layers[2].b);
  EXPECT_TRUE(all_close(value, expected_value));
  EXPECT_TRUE(all_close(grads[0].w, std::get<0>(expected)));
  EXPECT_TRUE(all_close(grads[0].b, std::get<1>(expected)));
  EXPECT_TRUE(all_close(grads[1].w, std::get<2>(expected)));
  EXPECT_TRUE(all_close(grads[2].b, std::get<5>(expected)));
}

TEST(TreeJit, ArrayResultsComeBackAsArrays) {
  const stack layers = random_stack(7);
  // Doubles every parameter: an array in, the same array type out.
  const auto doubled = tessel::jit([](const auto& p) { return tessel::tree_map([](auto leaf) { return leaf + leaf; }, p); })(layers);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(doubled)>, stack>);
  for (std::size_t i = 0; i < depth; ++i)
    for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(doubled[i].b[j], 2 * layers[i].b[j]);
}

template <template <class, class> class T = tensor>
struct cell_out {
  BOOST_HANA_DEFINE_STRUCT(cell_out, (T<float, shape<3>>, h), (T<float, shape<>>, norm));
};

TEST(TreeJit, StructYsOfAScanComeBackStacked) {
  constexpr std::size_t L = 5;
  const auto xs = random_tensor<float, shape<L, 3>>(11);
  const auto h0 = random_tensor<float, shape<3>>(12);
  const auto run = [](auto h, auto xs) {
    return tessel::scan(
        [](auto h, auto x) {
          cell_out<tessel::tracer> y;
          y.h = tessel::tanh(h + x);
          y.norm = tessel::sum(y.h * y.h);
          return std::tuple{y.h, y};
        },
        h, xs);
  };
  const auto [last, ys] = tessel::jit(run)(h0, xs);
  // ys is cell_out over a family of tensors with a leading axis of length L.
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(ys.h)>, tensor<float, shape<L, 3>>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(ys.norm)>, tensor<float, shape<L>>>);
  // The same steps from C++, one jitted cell at a time.
  const auto step = tessel::jit([](auto h, auto x) { return tessel::tanh(h + x); });
  tensor<float, shape<3>> h = h0;
  for (std::size_t i = 0; i < L; ++i) {
    tensor<float, shape<3>> x;
    for (std::size_t j = 0; j < 3; ++j) x[j] = xs[i * 3 + j];
    h = step(h, x);
    float norm = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(ys.h[i * 3 + j], h[j]) << "step " << i;
      norm += h[j] * h[j];
    }
    EXPECT_NEAR(ys.norm[i], norm, 1e-6f) << "step " << i;
  }
  EXPECT_TRUE(all_close(last, h));
}
}  // namespace
