// Gradient accumulation: M micro-batches give the big batch's mean loss and gradient, and the plan
// holds about one micro-batch's activations.
#include "gradcheck.hpp"
#include "tessel/jit.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/transform/accumulate.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<32, 64>>, w1), (T<float, shape<64>>, b1), (T<float, shape<64, 10>>, w2),
                           (T<float, shape<10>>, b2));
};

constexpr auto loss = [](auto p, auto x, auto y) {
  auto h = tessel::relu(tessel::matmul(x, p.w1) + p.b1);
  return tessel::mean(tessel::nn::softmax_cross_entropy(tessel::matmul(h, p.w2) + p.b2, y));
};
constexpr auto summed = [](auto p, auto x, auto y) {
  auto h = tessel::relu(tessel::matmul(x, p.w1) + p.b1);
  return tessel::sum(tessel::nn::softmax_cross_entropy(tessel::matmul(h, p.w2) + p.b2, y));
};

using x_t = tensor<float, shape<256, 32>>;
using y_t = tensor<float, shape<256, 10>>;

mlp<> params() {
  mlp<> p;
  p.w1 = random_tensor<float, shape<32, 64>>(1, -0.3, 0.3);
  p.b1 = random_tensor<float, shape<64>>(2, -0.1, 0.1);
  p.w2 = random_tensor<float, shape<64, 10>>(3, -0.3, 0.3);
  p.b2 = random_tensor<float, shape<10>>(4, -0.1, 0.1);
  return p;
}

y_t one_hot_labels() {
  y_t y{};
  for (std::size_t i = 0; i < 256; ++i) y[i * 10 + (i * 7) % 10] = 1.0f;
  return y;
}

template <class A, class B>
void expect_close_trees(const A& got, const B& want) {
  EXPECT_TRUE(tessel::testing::all_close(got.w1, want.w1, {.rtol = 1e-4, .atol = 1e-6}));
  EXPECT_TRUE(tessel::testing::all_close(got.b1, want.b1, {.rtol = 1e-4, .atol = 1e-6}));
  EXPECT_TRUE(tessel::testing::all_close(got.w2, want.w2, {.rtol = 1e-4, .atol = 1e-6}));
  EXPECT_TRUE(tessel::testing::all_close(got.b2, want.b2, {.rtol = 1e-4, .atol = 1e-6}));
}

TEST(Accumulate, MeanLossOverMicroBatchesEqualsTheBigBatch) {
  const auto p = params();
  const auto x = random_tensor<float, shape<256, 32>>(5);
  const auto y = one_hot_labels();
  const auto [want_value, want] = tessel::value_and_grad(loss)(p, x, y);
  const auto [value4, grads4] = tessel::accumulate_gradients<4>(loss)(p, x, y);
  const auto [value8, grads8] = tessel::accumulate_gradients<8>(loss)(p, x, y);
  EXPECT_NEAR(value4[0], want_value[0], 1e-5 * std::abs(want_value[0]));
  EXPECT_NEAR(value8[0], want_value[0], 1e-5 * std::abs(want_value[0]));
  expect_close_trees(grads4, want);
  expect_close_trees(grads8, want);
}

TEST(Accumulate, SumLossIsSummed) {
  const auto p = params();
  const auto x = random_tensor<float, shape<256, 32>>(6);
  const auto y = one_hot_labels();
  const auto [want_value, want] = tessel::value_and_grad(summed)(p, x, y);
  const auto [value, grads] = tessel::accumulate_gradients<4, tessel::loss_reduction::sum>(summed)(p, x, y);
  EXPECT_NEAR(value[0], want_value[0], 1e-5 * std::abs(want_value[0]));
  expect_close_trees(grads, want);
  // Mean scaling applied to a sum loss would be off by 4: the two reductions differ.
  const auto [mean_value, mean_grads] = tessel::accumulate_gradients<4>(summed)(p, x, y);
  EXPECT_NEAR(mean_value[0] * 4, want_value[0], 1e-5 * std::abs(want_value[0]));
  (void)mean_grads;
}

// The arena holds one micro-batch's activations and the running sums; the batch viewed as [M, B / M, ...]
// is the parameters' own bytes (the planner aliases a reshape of a parameter), not a copy.
TEST(Accumulate, MicroBatchesLowerThePeak) {
  constexpr auto& big = decltype(tessel::jit(tessel::value_and_grad(loss)))::traced_for<mlp<>, x_t, y_t>::plan;
  constexpr auto& two = decltype(tessel::jit(tessel::accumulate_gradients<2>(loss)))::traced_for<mlp<>, x_t, y_t>::plan;
  constexpr auto& micro = decltype(tessel::jit(tessel::accumulate_gradients<8>(loss)))::traced_for<mlp<>, x_t, y_t>::plan;
  std::printf("peak arena bytes: batch 256 in one %zu, in 2 micro-batches %zu, in 8 micro-batches %zu\n", big.arena_bytes,
              two.arena_bytes, micro.arena_bytes);
  EXPECT_LT(micro.arena_bytes, two.arena_bytes);
  EXPECT_LT(micro.arena_bytes * 2, big.arena_bytes);
  // No kernel copies the batch: each reshape feeding the scan (x and y) is an alias of its parameter;
  // and each gradient sum lives in one buffer: its zero init and the scan's final carry alias the carry.
  int batch_views = 0, carry_aliases = 0;
  for (std::size_t i = 0; i < micro.alias_of.size(); ++i) {
    if (micro.alias_of[i] < 0) continue;
    const auto target = micro.node(micro.alias_of[i]).prim->kind;
    batch_views += target == tessel::ir::prim_kind::parameter;
    carry_aliases += target == tessel::ir::prim_kind::region_parameter;
  }
  EXPECT_EQ(batch_views, 2);
  EXPECT_GE(carry_aliases, 4);  // at least a final carry for each of the two weights and their inits
}

// A scan over the micro-batches: the program is one micro-batch's forward and backward whatever M is.
TEST(Accumulate, ProgramSizeDoesNotGrowWithM) {
  using two = decltype(tessel::jit(tessel::accumulate_gradients<2>(loss)))::traced_for<mlp<>, x_t, y_t>;
  using sixteen = decltype(tessel::jit(tessel::accumulate_gradients<16>(loss)))::traced_for<mlp<>, x_t, y_t>;
  static_assert(two::nodes == sixteen::nodes);
  static_assert(two::program.construct_count == 1 && two::program.construct(0).length == 2);
  static_assert(sixteen::program.construct(0).length == 16);
  std::printf("program nodes: M = 2 %zu, M = 16 %zu\n", two::nodes, sixteen::nodes);
  const auto p = params();
  const auto x = random_tensor<float, shape<256, 32>>(7);
  const auto y = one_hot_labels();
  const auto [want_value, want] = tessel::value_and_grad(loss)(p, x, y);
  const auto [value, grads] = tessel::accumulate_gradients<16>(loss)(p, x, y);
  EXPECT_NEAR(value[0], want_value[0], 1e-5 * std::abs(want_value[0]));
  expect_close_trees(grads, want);
}
}  // namespace
