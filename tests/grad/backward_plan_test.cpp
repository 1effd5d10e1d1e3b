// What reverse mode plans: the backward pass of a dense layer is its two GEMMs plus fused elementwise
// work, and dump reports the peak bytes of a value_and_grad step.
#include "gradcheck.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/dump.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::plan::kernel_kind;

using x_t = tensor<float, shape<128, 784>>;
using w_t = tensor<float, shape<784, 256>>;
using b_t = tensor<float, shape<256>>;
using ct_t = tensor<float, shape<128, 256>>;

constexpr auto dense_vjp = [](auto x, auto w, auto b, auto ct) {
  auto [y, pull] = tessel::vjp([](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); }, x, w, b);
  auto [dx, dw, db] = pull(ct);
  return std::make_tuple(y, dx, dw, db);
};

template <class P>
int count(const P& p, kernel_kind kind) {
  int n = 0;
  for (int k = 0; k < p.kernel_count; ++k) n += p.kernels[static_cast<std::size_t>(k)].kind == kind;
  return n;
}

TEST(BackwardPlan, DenseLayerBackwardIsTwoGemmsAndFusedElementwise) {
  constexpr auto& p = decltype(tessel::jit(dense_vjp))::traced_for<x_t, w_t, b_t, ct_t>::plan;
  // Forward: the GEMM with its bias epilogue, and relu (stored: it is an output). Backward: one loop for
  // relu's mask times the cotangent, the bias gradient as a column reduction, and the two GEMMs
  // (dx = g w^T, dw = x^T g, reading the operands in place: no transpose kernels).
  EXPECT_EQ(count(p, kernel_kind::contraction), 3);
  EXPECT_EQ(count(p, kernel_kind::layout), 0);
  EXPECT_EQ(count(p, kernel_kind::column), 1);
  EXPECT_EQ(count(p, kernel_kind::loop), 2);
  EXPECT_EQ(p.kernel_count, 6);
  // The mask's comparison, selects and the product with the cotangent are one loop kernel.
  int widest_loop = 0;
  for (int k = 0; k < p.kernel_count; ++k)
    if (p.kernels[static_cast<std::size_t>(k)].kind == kernel_kind::loop)
      widest_loop = std::max(widest_loop, p.kernels[static_cast<std::size_t>(k)].member_count);
  EXPECT_GE(widest_loop, 3);
  // Only the pre-activation and the masked cotangent live in the arena.
  EXPECT_EQ(p.arena_bytes, 2u * 128 * 256 * 4);
}

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<784, 256>>, w1), (T<float, shape<256>>, b1), (T<float, shape<256, 10>>, w2),
                           (T<float, shape<10>>, b2));
};
constexpr auto mlp_loss = [](auto p, auto x, auto y) {
  auto h = tessel::relu(tessel::matmul(x, p.w1) + p.b1);
  return tessel::mean(tessel::nn::softmax_cross_entropy(tessel::matmul(h, p.w2) + p.b2, y));
};

TEST(BackwardPlan, DumpReportsTheValueAndGradPeak) {
  using y_t = tensor<float, shape<128, 10>>;
  constexpr auto& p = decltype(tessel::jit(tessel::value_and_grad(mlp_loss)))::traced_for<mlp<>, x_t, y_t>::plan;
  const std::string text = tessel::dump(tessel::value_and_grad(mlp_loss), mlp<>{}, x_t{}, y_t{});
  EXPECT_NE(text.find("peak: " + std::to_string(p.arena_bytes) + " bytes in the arena"), std::string::npos) << text;
  EXPECT_EQ(count(p, kernel_kind::contraction), 5);  // 2 forward; backward dw2, dh = g w2^T, dw1 (no dx: x is not differentiated)
  std::printf("value_and_grad MLP 784-256-10 batch 128: %d kernels, peak %zu bytes\n", p.kernel_count, p.arena_bytes);
}
}  // namespace
