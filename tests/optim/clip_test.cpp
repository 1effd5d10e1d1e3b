// global_norm and clip_by_global_norm on a tree of two tensors, and in a chain before sgd.
#include <cmath>
#include <tuple>
#include <type_traits>

#include "reference.hpp"
#include "tessel/optim/chain.hpp"
#include "tessel/optim/clip.hpp"
#include "tessel/optim/sgd.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::within_ulp;
namespace optim = tessel::optim;

template <template <class, class> class T = tensor>
struct layer {
  BOOST_HANA_DEFINE_STRUCT(layer, (T<float, shape<2>>, b), (T<float, shape<2, 2>>, w));
};
using grads = layer<>;

const grads g = [] {
  grads t;
  t.b = {0.5f, -1.5f};
  t.w = {2.0f, 0.25f, -3.0f, 1.0f};
  return t;
}();
const double norm = std::sqrt(0.25 + 2.25 + 4.0 + 0.0625 + 9.0 + 1.0);  // every leaf's squares

TEST(Clip, GlobalNormOfATree) { EXPECT_FLOAT_EQ(optim::global_norm(g), static_cast<float>(norm)); }

TEST(Clip, AboveTheMaximumTheTreeIsScaledAsAWhole) {
  const optim::clip_by_global_norm<2.0> clip;
  const auto [u, state] = clip.update(g, clip.init(g));
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(u)>, grads>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(state)>, std::tuple<>>);
  // (g / norm) * max_norm, leaf by leaf: the direction is kept and the new global norm is max_norm.
  EXPECT_TRUE(within_ulp(u.b, [&](std::size_t i) { return g.b[i] / norm * 2.0; }, 2));
  EXPECT_TRUE(within_ulp(u.w, [&](std::size_t i) { return g.w[i] / norm * 2.0; }, 2));
  EXPECT_NEAR(optim::global_norm(u), 2.0f, 1e-6);
}

TEST(Clip, BelowTheMaximumTheTreeIsUnchanged) {
  const optim::clip_by_global_norm<5.0> clip;
  const auto [u, state] = clip.update(g, clip.init(g));
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(u.b[i], g.b[i]);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(u.w[i], g.w[i]);
}

TEST(Clip, ChainedBeforeSgd) {
  const optim::chain<optim::clip_by_global_norm<1.0>, optim::sgd<0.5>> opt;
  const auto s0 = opt.init(g);
  using sgd_state = std::tuple<tensor<std::int32_t, shape<>>>;
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(s0)>, std::tuple<std::tuple<>, sgd_state>>);
  const auto [u, s1] = opt.update(g, s0);
  EXPECT_TRUE(within_ulp(u.w, [&](std::size_t i) { return -0.5 * (g.w[i] / norm); }, 2));
  EXPECT_EQ(optim::count(std::get<1>(s1))[0], 1);
}
}  // namespace
