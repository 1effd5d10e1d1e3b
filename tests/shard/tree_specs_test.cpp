// One PartitionSpec for a whole tree (JAX's prefix specs): every leaf of a struct, tuple or array argument
// is split as the spec says, the traced function sees a tree of blocks, and a tree result is put together
// leaf by leaf. Checked against the blocks computed by hand, and a fully sharded update of a parameter
// struct (its momentum struct split the same way) against the same update on one device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>

#include "reference.hpp"
#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

template <class T>
T random_tensor(std::uint32_t seed, float scale = 1) {
  return tessel::testing::random_tensor<typename T::value_type, typename T::shape_type>(seed, -scale, scale);
}

template <class A, class B>
void expect_close(const A& got, const B& want, const char* what, double rtol = 1e-5) {
  tessel::testing::expect_close_at_scale(got, want, what, rtol);
}

template <template <class, class> class T = tensor>
struct net {
  BOOST_HANA_DEFINE_STRUCT(net, (T<float, shape<16, 32>>, w1), (T<float, shape<32>>, b1), (T<float, shape<32, 8>>, w2));
};

// Each device adds its index to every element of its blocks: the result shows which device held what.
template <class M, class Spec>
constexpr auto mark_blocks = shard_map<M, specs<Spec>, Spec>([](auto tree) {
  return tree::map([](auto leaf) {
    return leaf + broadcast_to<typename decltype(leaf)::shape_type>(convert_element_type<float>(axis_index<"data">(leaf)));
  }, tree);
});

TEST(TreeSpecs, StructLeavesAreSplitByRowsAndPutBackTogether) {
  using M = mesh<axis<"data", 4>>;
  const net<> p{random_tensor<tensor<float, shape<16, 32>>>(1), random_tensor<tensor<float, shape<32>>>(2),
                random_tensor<tensor<float, shape<32, 8>>>(3)};
  const auto got = mark_blocks<M, P<"data">>(p);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(got)>, net<>>, "a struct split on the way in comes back as the struct");
  // Leaf w1: rows 4d..4d+3 on device d; b1: elements 8d..8d+7; w2: rows 8d..8d+7.
  for (std::size_t i = 0; i < 16 * 32; ++i) EXPECT_EQ(got.w1.data()[i], p.w1.data()[i] + static_cast<float>(i / 32 / 4)) << "w1 " << i;
  for (std::size_t i = 0; i < 32; ++i) EXPECT_EQ(got.b1.data()[i], p.b1.data()[i] + static_cast<float>(i / 8)) << "b1 " << i;
  for (std::size_t i = 0; i < 32 * 8; ++i) EXPECT_EQ(got.w2.data()[i], p.w2.data()[i] + static_cast<float>(i / 8 / 8)) << "w2 " << i;
}

TEST(TreeSpecs, TupleLeavesAreSplitByColumns) {
  using M = mesh<axis<"data", 2>>;
  using A = tensor<float, shape<3, 4>>;
  using B = tensor<float, shape<5, 6>>;
  const std::tuple<A, B> t{random_tensor<A>(4), random_tensor<B>(5)};
  const auto got = mark_blocks<M, P<none, "data">>(t);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(got)>, std::tuple<A, B>>);
  for (std::size_t i = 0; i < A::size; ++i)
    EXPECT_EQ(std::get<0>(got).data()[i], std::get<0>(t).data()[i] + static_cast<float>(i % 4 / 2)) << "A " << i;
  for (std::size_t i = 0; i < B::size; ++i)
    EXPECT_EQ(std::get<1>(got).data()[i], std::get<1>(t).data()[i] + static_cast<float>(i % 6 / 3)) << "B " << i;
}

// A tree of blocks reduced on each device: the traced function sees the block shapes.
TEST(TreeSpecs, ASpecTreeGivesEachElementItsOwnSpec) {
  using M = mesh<axis<"data", 2>>;
  using C = tensor<float, shape<>>;
  using A = tensor<float, shape<4, 3>>;
  using B = tensor<float, shape<2, 6>>;
  const std::tuple<C, std::tuple<A, B>> t{C{5.0f}, {random_tensor<A>(6), random_tensor<B>(7)}};
  // The scalar whole (it has no dimension to split), A by rows, B by columns: a nested spec tree.
  auto f = shard_map<M, specs<specs<P<>, specs<P<"data">, P<none, "data">>>>, specs<P<>, P<"data">, P<none, "data">>>([](auto s) {
    const auto c = std::get<0>(s);
    const auto a = std::get<0>(std::get<1>(s));
    const auto b = std::get<1>(std::get<1>(s));
    static_assert(std::is_same_v<decltype(a), const tracer<float, shape<2, 3>>> && std::is_same_v<decltype(b), const tracer<float, shape<2, 3>>>,
                  "each element's block, as its own spec says");
    auto mark = [](auto x) {
      return x + broadcast_to<typename decltype(x)::shape_type>(convert_element_type<float>(axis_index<"data">(x)));
    };
    return std::tuple(c * 2.0f, mark(a), mark(b));
  });
  const auto [c, a, b] = f(t);
  EXPECT_EQ(c[0], 10.0f);
  const auto& [a0, b0] = std::get<1>(t);
  for (std::size_t i = 0; i < A::size; ++i) EXPECT_EQ(a.data()[i], a0.data()[i] + static_cast<float>(i / 3 / 2)) << "A " << i;
  for (std::size_t i = 0; i < B::size; ++i) EXPECT_EQ(b.data()[i], b0.data()[i] + static_cast<float>(i % 6 / 3)) << "B " << i;
}

TEST(TreeSpecs, TheFunctionSeesATreeOfBlocks) {
  using M = mesh<axis<"data", 4>>;
  using V = tensor<float, shape<8>>;
  using W = tensor<float, shape<4, 3>>;
  const std::array<V, 2> a{random_tensor<V>(6), random_tensor<V>(7)};
  const W w = random_tensor<W>(8);
  auto total = shard_map<M, specs<P<"data">, P<"data">>, P<>>([](auto arr, auto m) {
    static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(arr[0])>::shape_type, shape<2>>);
    static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(m)>::shape_type, shape<1, 3>>);
    return psum<"data">(reduce_sum<0>(arr[0]) + reduce_sum<0>(arr[1]) + reduce_sum<0, 1>(m));
  });
  double want = 0;
  for (const V& v : a)
    for (float x : std::span(v.data(), V::size)) want += x;
  for (float x : std::span(w.data(), W::size)) want += x;
  EXPECT_NEAR(total(a, w)[0], want, 1e-5);
}

// ---- a fully sharded update of a parameter struct -------------------------------------------------------

constexpr std::size_t D = 2;
using DP = mesh<axis<"data", D>>;
using Batch = tensor<float, shape<8, 16>>;
using Target = tensor<float, shape<8, 8>>;
constexpr float learning_rate = 0.1f, momentum = 0.9f;

constexpr auto net_loss = [](auto w1, auto b1, auto w2, auto x, auto y) {
  const auto h = tanh(matmul(x, w1) + broadcast_to<shape<decltype(x)::shape_type::dims[0], 32>>(b1));
  const auto e = matmul(h, w2) - y;
  return mean(e * e);
};

// SGD with momentum, leaf by leaf over the parameter and momentum trees (of one type).
constexpr auto sgd_momentum = [](auto p, auto m, auto g) {
  const auto next_m = tree::map([](auto mi, auto gi) { return mi * momentum + gi; }, m, g);
  const auto next_p = tree::map([](auto w, auto v) { return w - v * learning_rate; }, p, next_m);
  return std::tuple{next_p, next_m};
};

// Every device holds half the rows of each parameter and of its momentum (one spec for each struct),
// gathers the whole weights for its half of the batch; the gradient of the gathered weights comes back
// reduce-scattered (all_gather's transpose), so each device updates its own rows.
constexpr auto sharded_step = shard_map<DP, specs<P<"data">, P<"data">, P<"data">, P<"data">>, specs<P<"data">, P<"data">, P<>>>(
    [](auto p, auto m, auto x, auto y) {
      const auto loss = [](auto q, auto a, auto b) {
        return pmean<"data">(net_loss(all_gather<DP, "data", 0, true>(q.w1), all_gather<DP, "data", 0, true>(q.b1),
                                      all_gather<DP, "data", 0, true>(q.w2), a, b));
      };
      const auto [value, g] = value_and_grad(loss)(p, x, y);
      const auto [next_p, next_m] = sgd_momentum(p, m, g);
      return std::tuple{next_p, next_m, value};
    });

constexpr auto one_device_step = [](auto p, auto m, auto x, auto y) {
  const auto [value, g] = value_and_grad([](auto q, auto a, auto b) { return net_loss(q.w1, q.b1, q.w2, a, b); })(p, x, y);
  const auto [next_p, next_m] = sgd_momentum(p, m, g);
  return std::tuple{next_p, next_m, value};
};

TEST(TreeSpecs, FullyShardedStructUpdateEqualsOneDevice) {
  net<> p{random_tensor<tensor<float, shape<16, 32>>>(11, 0.3f), random_tensor<tensor<float, shape<32>>>(12, 0.1f),
          random_tensor<tensor<float, shape<32, 8>>>(13, 0.3f)};
  net<> m{random_tensor<tensor<float, shape<16, 32>>>(14, 0.01f), random_tensor<tensor<float, shape<32>>>(15, 0.01f),
          random_tensor<tensor<float, shape<32, 8>>>(16, 0.01f)};
  net<> p1 = p, m1 = m;
  const auto reference = jit(one_device_step);
  for (std::uint32_t step = 0; step < 3; ++step) {
    const auto x = random_tensor<Batch>(20 + step);
    const auto y = random_tensor<Target>(30 + step);
    auto [np, nm, loss] = sharded_step(p, m, x, y);
    static_assert(std::is_same_v<decltype(np), net<>> && std::is_same_v<decltype(nm), net<>>);
    auto [np1, nm1, loss1] = reference(p1, m1, x, y);
    expect_close(loss, loss1, "loss");
    expect_close(np.w1, np1.w1, "w1");
    expect_close(np.b1, np1.b1, "b1");
    expect_close(np.w2, np1.w2, "w2");
    expect_close(nm.w1, nm1.w1, "momentum of w1");
    expect_close(nm.b1, nm1.b1, "momentum of b1");
    expect_close(nm.w2, nm1.w2, "momentum of w2");
    p = np, m = nm, p1 = np1, m1 = nm1;
  }
}

// Each device's program holds the blocks only: its parameters are the halves of the leaves.
TEST(TreeSpecs, EachDeviceTakesItsBlocksAsParameters) {
  using traced = decltype(sharded_step)::traced_for<net<>, net<>, Batch, Target>;
  std::size_t parameter_bytes = 0;
  constexpr const auto& program = traced::program;
  for (const auto& node : program.nodes)
    if (node.prim != nullptr && node.prim->kind == ir::prim_kind::parameter) parameter_bytes += node.shape.size() * 4;
  const std::size_t leaves = 16 * 32 + 32 + 32 * 8;
  EXPECT_EQ(parameter_bytes, (2 * leaves + Batch::size + Target::size) * 4 / D);
}

}  // namespace
