// vmap as a transform: in_axes/out_axes, tuples, nesting, and composition with jit and grad in every
// order (per-example gradients among them), each against a loop over slices.
#include <regex>
#include <string>

#include "tessel/core/tree.hpp"
#include "tessel/dump.hpp"
#include "vmap_check.hpp"

namespace {
using tessel::in_axes;
using tessel::none;
using tessel::out_axes;
using tessel::shape;
using tessel::tensor;
using tessel::testing::all_close;
using tessel::testing::random_tensor;
using tessel::testing::stack;
using tessel::testing::unstack;
constexpr tessel::tolerance tol{1e-5, 1e-6};

// A per-example loss: a linear layer, tanh, squared error against y.
constexpr auto loss = [](auto w, auto x, auto y) {
  const auto d = tessel::tanh(tessel::matmul(x, w)) - y;
  return tessel::sum(d * d);
};
using W = tensor<float, shape<4, 3>>;
using X = tensor<float, shape<4>>;
using Y = tensor<float, shape<3>>;
constexpr std::size_t B = 5;

template <template <class, class> class T = tensor>
struct affine {
  BOOST_HANA_DEFINE_STRUCT(affine, (T<float, shape<4, 3>>, w), (T<float, shape<3>>, b));
};

template <class T>
std::array<T, B> slices(std::uint32_t seed) {
  std::array<T, B> a;
  for (std::size_t b = 0; b < B; ++b) a[b] = random_tensor<float, typename T::shape_type>(seed + static_cast<std::uint32_t>(b));
  return a;
}

TEST(VmapTransform, PerExampleGradients) {
  const W w = random_tensor<float, W::shape_type>(1);
  const auto xs = slices<X>(10);
  const auto ys = slices<Y>(20);
  const auto per_example = tessel::vmap(tessel::grad(loss), in_axes<none, 0, 0>)(w, stack<0>(xs), stack<0>(ys));
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(per_example)>, tensor<float, shape<B, 4, 3>>>);
  for (std::size_t b = 0; b < B; ++b) EXPECT_TRUE(all_close(unstack<0>(per_example, b), tessel::grad(loss)(w, xs[b], ys[b]), tol));
  // jit(vmap(grad)) is the same program.
  const auto jitted = tessel::jit(tessel::vmap(tessel::grad(loss), in_axes<none, 0, 0>))(w, stack<0>(xs), stack<0>(ys));
  EXPECT_TRUE(all_close(jitted, per_example, tol));
  // Gradients for two arguments: a tuple of batched results.
  const auto [gw, gx] = tessel::vmap(tessel::grad<0, 1>(loss), in_axes<none, 0, 0>)(w, stack<0>(xs), stack<0>(ys));
  EXPECT_TRUE(all_close(gw, per_example, tol));
  for (std::size_t b = 0; b < B; ++b) EXPECT_TRUE(all_close(unstack<0>(gx, b), tessel::grad<1>(loss)(w, xs[b], ys[b]), tol));
}

TEST(VmapTransform, GradOfSumOfVmap) {
  // d/dw sum_b loss(w, x_b, y_b) = sum of the per-example gradients.
  const W w = random_tensor<float, W::shape_type>(2);
  const auto xs = slices<X>(30);
  const auto ys = slices<Y>(40);
  const auto g = tessel::grad([](auto w, auto x, auto y) { return tessel::sum(tessel::vmap(loss, in_axes<none, 0, 0>)(w, x, y)); })(
      w, stack<0>(xs), stack<0>(ys));
  W want;
  for (auto& v : want) v = 0;
  for (std::size_t b = 0; b < B; ++b) {
    const W gb = tessel::grad(loss)(w, xs[b], ys[b]);
    for (std::size_t i = 0; i < W::shape_type::size; ++i) want[i] += gb[i];
  }
  EXPECT_TRUE(all_close(g, want, tessel::tolerance{1e-4, 1e-5}));
}

TEST(VmapTransform, NestedVmapAndAxes) {
  // vmap(vmap(f)): a [2, 3] grid of dot products of rows of a with columns of b.
  const auto a = random_tensor<float, shape<2, 4>>(3);
  const auto b = random_tensor<float, shape<4, 3>>(4);
  const auto dot = [](auto u, auto v) { return tessel::sum(u * v); };
  const auto grid = tessel::vmap(tessel::vmap(dot, in_axes<none, 1>), in_axes<0, none>)(a, b);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(grid)>, tensor<float, shape<2, 3>>>);
  const auto want = tessel::jit([](auto u, auto v) { return tessel::matmul(u, v); })(a, b);
  EXPECT_TRUE(all_close(grid, want, tol));
  // out_axes: the batch placed last; a negative in_axes; a result that ignores the batch is broadcast.
  const auto xs = random_tensor<float, shape<3, 5>>(5);  // 5 examples along the last axis
  const auto [t, c] = tessel::vmap([](auto x) { return std::make_tuple(x * 2.0f, tessel::sum(x * 0.0f) + 1.0f); }, in_axes<-1>,
                                   out_axes<-1, 0>)(xs);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(t)>, tensor<float, shape<3, 5>>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(c)>, tensor<float, shape<5>>>);
  for (std::size_t i = 0; i < 15; ++i) EXPECT_EQ(t[i], 2 * xs[i]);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(c[i], 1.0f);
  // out_axes none for a result that depends on no mapped argument.
  const auto w = random_tensor<float, shape<3>>(6);
  const auto [y, shared] = tessel::vmap([](auto x, auto v) { return std::make_tuple(x * v, tessel::exp(v)); }, in_axes<1, none>,
                                        out_axes<0, none>)(xs, w);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(shared)>, tensor<float, shape<3>>>);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(shared[i], std::exp(w[i]));
  for (std::size_t e = 0; e < 5; ++e)
    for (std::size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(y[e * 3 + i], xs[i * 5 + e] * w[i]);
}

TEST(VmapTransform, TupleArguments) {
  // in_axes applies to every leaf of a tuple argument.
  const auto xs = slices<X>(50);
  const auto vs = slices<X>(60);
  const auto f = [](auto pair, auto s) { return std::get<0>(pair) * std::get<1>(pair) + s; };
  const auto s = random_tensor<float, shape<>>(7);
  const auto r = tessel::vmap(f, in_axes<0, none>)(std::make_tuple(stack<0>(xs), stack<0>(vs)), s);
  for (std::size_t b = 0; b < B; ++b)
    EXPECT_TRUE(all_close(unstack<0>(r, b), tessel::jit(f)(std::make_tuple(xs[b], vs[b]), s), tol));
}

TEST(VmapTransform, StructArgumentShared) {
  // A parameter struct shared by every example (in_axes none); the examples are mapped.
  affine<> p;
  p.w = random_tensor<float, shape<4, 3>>(8);
  p.b = random_tensor<float, shape<3>>(9);
  const auto xs = slices<X>(70);
  const auto f = [](auto params, auto x) { return tessel::tanh(tessel::matmul(x, params.w) + params.b); };
  const auto r = tessel::vmap(f, in_axes<none, 0>)(p, stack<0>(xs));
  for (std::size_t b = 0; b < B; ++b) EXPECT_TRUE(all_close(unstack<0>(r, b), tessel::jit(f)(p, xs[b]), tol));
}

// The plan with node numbers left out (they differ by the nodes tracing merged away).
std::string kernels_of(std::string dump) { return std::regex_replace(dump, std::regex("%[0-9]+"), "%"); }

TEST(VmapTransform, PlansLikeTheHandBatchedFunction) {
  // A per-example loss under vmap is fused and planned exactly as the same loss written for the batch.
  const auto per_example = [](auto w, auto x, auto y) { return -tessel::sum(tessel::log_softmax(tessel::matmul(x, w)) * y); };
  const auto batched = [](auto w, auto x, auto y) { return -tessel::sum<1>(tessel::log_softmax<-1>(tessel::matmul(x, w)) * y); };
  const tensor<float, shape<16, 8>> w{};
  const tensor<float, shape<32, 16>> x{};
  const tensor<float, shape<32, 8>> y{};
  EXPECT_EQ(kernels_of(tessel::dump(tessel::vmap(per_example, in_axes<none, 0, 0>), w, x, y)), kernels_of(tessel::dump(batched, w, x, y)));
}

TEST(VmapTransform, BatchedMatmulIsOneContraction) {
  // vmap of x . w over x's rows plans as one dot_general (no per-example loop, no transpose).
  const auto f = tessel::vmap([](auto x, auto w) { return tessel::matmul(x, w); }, in_axes<0, none>);
  using t = decltype(tessel::jit(f))::traced_for<tensor<float, shape<8, 4>>, tensor<float, shape<4, 3>>>;
  int dots = 0, transposes = 0;
  for (const auto& n : t::program.nodes) {
    dots += n.prim == &tessel::prim::dot_general_p;
    transposes += n.prim == &tessel::prim::transpose_p;
  }
  EXPECT_EQ(dots, 1);
  EXPECT_EQ(transposes, 0);
}
}  // namespace
