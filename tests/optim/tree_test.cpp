// Optimizers on a parameter struct inside a jitted train step: the state is a tree (a jit argument and
// result, named for checkpoints), the traced step matches the eager one, and training lowers the loss.
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "reference.hpp"
#include "tessel/ops/matmul.hpp"
#include "tessel/ops/reductions.hpp"
#include "tessel/optim/optim.hpp"
#include "tessel/transform/grad.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::all_close;
using tessel::testing::random_tensor;
namespace optim = tessel::optim;

template <template <class, class> class T = tensor>
struct linear {
  BOOST_HANA_DEFINE_STRUCT(linear, (T<float, shape<3, 1>>, w), (T<float, shape<1>>, b));
};

constexpr auto loss = [](auto p, auto x, auto y) {
  const auto r = tessel::matmul(x, p.w) + p.b - y;
  return tessel::mean(r * r);
};

struct problem {
  tensor<float, shape<16, 3>> x = random_tensor<float, shape<16, 3>>(1);
  tensor<float, shape<16, 1>> y;
  linear<> params;
  problem() {
    for (std::size_t i = 0; i < 16; ++i) y[i] = 1.0f * x(i, 0) - 2.0f * x(i, 1) + 0.5f * x(i, 2) + 0.3f;
  }
};

constexpr optim::adam<0.05> solver;

TEST(OptimTree, StateIsATreeOfTensorsNamedForCheckpoints) {
  const problem data;
  const auto state = solver.init(data.params);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(state)>,
                               std::tuple<tensor<std::int32_t, shape<>>, linear<>, linear<>>>);
  std::vector<std::string> names;
  tessel::tree::for_each_named(state, [&](const std::string& name, const auto&) { names.push_back(name); });
  EXPECT_EQ(names, (std::vector<std::string>{"0", "1.w", "1.b", "2.w", "2.b"}));
  // init traced inside jit gives the same zeros.
  const auto traced = tessel::jit([](auto p) { return solver.init(p); })(data.params);
  EXPECT_EQ(std::get<0>(traced)[0], 0);
  EXPECT_EQ(std::get<2>(traced).w[1], 0.0f);
}

TEST(OptimTree, JittedAdamStepMatchesTheEagerStepAndLowersTheLoss) {
  problem data;
  const auto step = tessel::jit([](auto params, auto state, auto x, auto y) {
    const auto g = tessel::grad(loss)(params, x, y);
    auto [u, s] = solver.update(g, state, params);
    return std::make_tuple(optim::apply_updates(params, u), s);
  });
  auto state = solver.init(data.params);
  {
    const auto g = tessel::grad(loss)(data.params, data.x, data.y);
    const auto [u, s] = solver.update(g, state, data.params);
    const auto eager = optim::apply_updates(data.params, u);
    const auto [traced, traced_state] = step(data.params, state, data.x, data.y);
    EXPECT_TRUE(all_close(traced.w, eager.w));
    EXPECT_TRUE(all_close(std::get<2>(traced_state).b, std::get<2>(s).b));
  }
  const float first = tessel::jit(loss)(data.params, data.x, data.y)[0];
  for (int i = 0; i < 60; ++i) {
    auto [p, s] = step(data.params, state, data.x, data.y);
    data.params = std::move(p);
    state = std::move(s);
  }
  EXPECT_EQ(optim::count(state)[0], 60);
  EXPECT_LT(tessel::jit(loss)(data.params, data.x, data.y)[0], 0.05f * first);
}

// Clipping, adamw and a warmup-cosine schedule in one traced step; the schedule reads the count.
constexpr optim::warmup_cosine_decay_schedule lr{
    .init_value = 0.0, .peak_value = 0.1, .warmup_steps = 5, .decay_steps = 80};
constexpr optim::chain<optim::clip_by_global_norm<1.0>, optim::adamw<lr, optim::adamw_options{.weight_decay = 1e-3}>>
    clipped_adamw;

TEST(OptimTree, ChainWithScheduleLowersTheLoss) {
  problem data;
  const auto step = tessel::jit([](auto params, auto state, auto x, auto y) {
    const auto g = tessel::grad(loss)(params, x, y);
    auto [u, s] = clipped_adamw.update(g, state, params);
    return std::make_tuple(optim::apply_updates(params, u), s);
  });
  auto state = clipped_adamw.init(data.params);
  const float first = tessel::jit(loss)(data.params, data.x, data.y)[0];
  for (int i = 0; i < 80; ++i) {
    auto [p, s] = step(data.params, state, data.x, data.y);
    data.params = std::move(p);
    state = std::move(s);
  }
  EXPECT_EQ(optim::count(std::get<1>(state))[0], 80);
  EXPECT_LT(tessel::jit(loss)(data.params, data.x, data.y)[0], 0.05f * first);
}
}  // namespace
