// vmap of nested scans, and of control flow composed with other transforms: vmap(grad) through a scan
// (per-example gradients through time), grad of a sum of vmap, vmap(vmap(scan)) and jit(vmap(scan)),
// against loops over slices.
#include "control_check.hpp"

namespace {
using namespace control_check;
using tessel::in_axes;
using tessel::none;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
using tessel::testing::stack;

// ---- composition ------------------------------------------------------------------------------------

constexpr auto seq_loss = [](auto w, auto h, auto xs, auto y) {
  const auto [last, hs] = rnn(h, xs, w);
  const auto d = last - y;
  return tessel::sum(d * d) + tessel::sum(hs) * 0.1f;
};

TEST(VmapControl, NestedScan) {
  // An outer scan over rows of a [2, L, 4] sequence, each row an inner scan; ys of ys.
  constexpr auto f = [](auto h, auto xss, auto w) {
    return tessel::scan([&](auto c, auto row) { return rnn(c, row, w); }, h, xss);
  };
  using XSS = tensor<float, shape<2, L, 4>>;
  EXPECT_TRUE((check_vmap<none, 2, none>(f, slices<H>(9), slices<XSS>(16), slices<W>(28))));
  EXPECT_TRUE((check_vmap<0, none, 0>(f, slices<H>(10), slices<XSS>(17), slices<W>(29))));
}

TEST(VmapControl, PerExampleGradientsThroughTime) {
  const auto w = slices<W>(70);
  const auto h = slices<H>(71);
  const auto xs = slices<XS>(72);
  const auto y = slices<H>(73);
  EXPECT_TRUE((check_vmap<none, none, 0, 0>(tessel::grad(seq_loss), w, h, xs, y)));
  EXPECT_TRUE((check_vmap<none, 0, 1, 0>(tessel::grad<0, 1, 2>(seq_loss), w, h, xs, y)));
  EXPECT_TRUE((check_vmap<0, none, 0, none>(tessel::grad(seq_loss), w, h, xs, y)));
}

TEST(VmapControl, GradOfSumOfVmapThroughScan) {
  const auto w = slices<W>(74)[0];
  const auto h = slices<H>(75)[0];
  const auto xs = slices<XS>(76);
  const auto y = slices<H>(77);
  const auto g = tessel::grad([](auto w, auto h, auto xs, auto y) {
    return tessel::sum(tessel::vmap(seq_loss, in_axes<none, none, 0, 0>)(w, h, xs, y));
  })(w, h, stack<0>(xs), stack<0>(y));
  std::vector<std::vector<std::vector<float>>> want(1, {std::vector<float>(W::shape_type::size, 0.0f)});
  for (std::size_t b = 0; b < B; ++b) {
    const W gb = tessel::grad(seq_loss)(w, h, xs[b], y[b]);
    for (std::size_t i = 0; i < W::shape_type::size; ++i) want[0][0][i] += gb[i];
  }
  EXPECT_TRUE(same_slices(leaves(g), want));
}

// Second order through a batched scan: d/dw of sum_b |grad_w loss_b(w)|^2, the per-example gradients'
// norms differentiated once more (the batched forward scan's residuals feed a second reverse scan).
TEST(VmapControl, GradOfVmapOfGradThroughScan) {
  constexpr auto grad_norm = [](auto w, auto h, auto xs, auto y) {
    const auto g = tessel::grad(seq_loss)(w, h, xs, y);
    return tessel::sum(g * g);
  };
  const auto w = slices<W>(80)[0];
  const auto h = slices<H>(81)[0];
  const auto xs = slices<XS>(82);
  const auto y = slices<H>(83);
  const auto g = tessel::grad([](auto w, auto h, auto xs, auto y) {
    return tessel::sum(tessel::vmap(grad_norm, in_axes<none, none, 0, 0>)(w, h, xs, y));
  })(w, h, stack<0>(xs), stack<0>(y));
  std::vector<std::vector<std::vector<float>>> want(1, {std::vector<float>(W::shape_type::size, 0.0f)});
  for (std::size_t b = 0; b < B; ++b) {
    const W gb = tessel::grad(grad_norm)(w, h, xs[b], y[b]);
    for (std::size_t i = 0; i < W::shape_type::size; ++i) want[0][0][i] += gb[i];
  }
  EXPECT_TRUE(same_slices(leaves(g), want));
}

TEST(VmapControl, VmapOfVmapAndJitOfVmap) {
  constexpr std::size_t B2 = 2;
  std::array<std::array<XS, B2>, B> xs;
  std::array<XS, B> rows;
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t k = 0; k < B2; ++k) xs[b][k] = random_tensor<float, XS::shape_type>(80 + static_cast<std::uint32_t>(b * B2 + k));
    rows[b] = xs[b][0];
  }
  const auto h = slices<H>(90);
  const auto w = slices<W>(91)[0];
  std::array<tensor<float, shape<B2, L, 4>>, B> inner;
  for (std::size_t b = 0; b < B; ++b) inner[b] = stack<0>(xs[b]);
  // Outer over (h, xs), inner over xs only.
  const auto got = tessel::vmap(tessel::vmap(rnn, in_axes<none, 0, none>), in_axes<0, 0, none>)(stack<0>(h), stack<0>(inner), w);
  std::vector<std::vector<std::vector<float>>> want;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t k = 0; k < B2; ++k) want.push_back(leaves(tessel::jit(rnn)(h[b], xs[b][k], w)));
  EXPECT_TRUE(same_slices(leaves(got), want));
  // jit(vmap(f)) is the same program as vmap(f) called with tensors.
  const auto direct = tessel::vmap(rnn, in_axes<0, 1, none>)(stack<0>(h), stack<1>(rows), w);
  const auto jitted = tessel::jit(tessel::vmap(rnn, in_axes<0, 1, none>))(stack<0>(h), stack<1>(rows), w);
  EXPECT_EQ(leaves(direct), leaves(jitted));
}

}  // namespace
