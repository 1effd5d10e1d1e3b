// Data parallelism as the seeds' recipe: parameters replicated (P<>), the batch split over "data",
// the loss a pmean of the devices' losses. Gradients of replicated parameters come back summed over the
// devices without a written collective (tracing inserts the psum where an invariant value's cotangent
// varies: JAX's check_vma transpose), so they equal the one-device gradient on the whole batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "reference.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

using W1 = tensor<float, shape<8, 16>>;
using B1 = tensor<float, shape<16>>;
using W2 = tensor<float, shape<16, 4>>;
using Params = std::tuple<W1, B1, W2>;
using Xs = tensor<float, shape<32, 8>>;
using Ys = tensor<float, shape<32, 4>>;

template <class T>
T random_tensor(unsigned seed, float scale = 1) {
  return tessel::testing::random_tensor<typename T::value_type, typename T::shape_type>(seed, -scale, scale);
}

constexpr auto local_loss = [](auto p, auto x, auto y) {
  const auto h = relu(matmul(x, std::get<0>(p)) + std::get<1>(p));
  return mean(nn::softmax_cross_entropy(matmul(h, std::get<2>(p)), y));
};

// The parameters, the batch and its one-hot labels that the checks train on.
struct problem {
  Params p{random_tensor<W1>(1, 0.3f), random_tensor<B1>(2, 0.1f), random_tensor<W2>(3, 0.3f)};
  Xs x = random_tensor<Xs>(4);
  Ys y = [] {
    Ys one_hot{};
    for (std::size_t i = 0; i < 32; ++i) one_hot.data()[i * 4 + i % 4] = 1;
    return one_hot;
  }();
};

template <std::size_t D>
void check_devices() {
  using M = mesh<axis<"data", D>>;
  const auto [p, x, y] = problem{};

  auto step = shard_map<M, specs<P<>, P<"data">, P<"data">>, specs<P<>, P<>>>([](auto params, auto xb, auto yb) {
    const auto loss = [](auto q, auto a, auto b) { return pmean<"data">(local_loss(q, a, b)); };
    return std::tuple{loss(params, xb, yb), grad<0>(loss)(params, xb, yb)};
  });
  const auto [loss, g] = step(p, x, y);
  const auto [want_loss, want_g] = jit([](auto params, auto xs, auto ys) {
    return std::tuple{local_loss(params, xs, ys), grad<0>(local_loss)(params, xs, ys)};
  })(p, x, y);

  EXPECT_NEAR(loss[0], want_loss[0], 1e-6 * std::abs(want_loss[0])) << D << " devices";
  auto compare = [&](const auto& got, const auto& want, const char* name) {
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < got.size; ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(got.data()[i]) - want.data()[i]));
      scale = std::max(scale, std::abs(static_cast<double>(want.data()[i])));
    }
    EXPECT_LE(worst, 1e-6 * scale) << name << " on " << D << " devices";
  };
  compare(std::get<0>(g), std::get<0>(want_g), "dW1");
  compare(std::get<1>(g), std::get<1>(want_g), "db1");
  compare(std::get<2>(g), std::get<2>(want_g), "dW2");

  // The same call again gives the same bits.
  const auto [loss2, g2] = step(p, x, y);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(loss2[0]), std::bit_cast<std::uint32_t>(loss[0]));
  for (std::size_t i = 0; i < W1::size; ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(std::get<0>(g2).data()[i]), std::bit_cast<std::uint32_t>(std::get<0>(g).data()[i]));
}

TEST(DataParallel, OneDeviceEqualsJit) { check_devices<1>(); }

// A train step given its parameters through donate(), as jit takes them: on a mesh of one device the new
// parameters are written over the old ones (their buffers), on two devices, which both read the old ones,
// into new buffers; the bits are the call's without donation either way.
template <std::size_t D>
void check_donated_step(bool takes_buffers) {
  using M = mesh<axis<"data", D>>;
  const auto [p, x, y] = problem{};
  auto step = shard_map<M, specs<P<>, P<"data">, P<"data">>, specs<P<>, P<>>>([](auto params, auto xb, auto yb) {
    const auto loss = [](auto q, auto a, auto b) { return pmean<"data">(local_loss(q, a, b)); };
    const auto g = grad<0>(loss)(params, xb, yb);
    return std::tuple{tree_map([](auto w, auto dw) { return w - dw; }, params, g), loss(params, xb, yb)};
  });
  const auto [want, want_loss] = step(p, x, y);
  Params given = p;
  const float* w1 = std::get<0>(given).data();
  const float* w2 = std::get<2>(given).data();
  const auto [got, loss] = step(donate(given), x, y);
  EXPECT_EQ(std::get<0>(got).data() == w1, takes_buffers) << D << " devices";
  EXPECT_EQ(std::get<2>(got).data() == w2, takes_buffers) << D << " devices";
  EXPECT_EQ(std::bit_cast<std::uint32_t>(loss[0]), std::bit_cast<std::uint32_t>(want_loss[0]));
  const auto same_bits = [](const auto& a, const auto& b) { return std::memcmp(a.data(), b.data(), a.size * sizeof(float)) == 0; };
  EXPECT_TRUE(same_bits(std::get<0>(got), std::get<0>(want))) << "W1 on " << D << " devices";
  EXPECT_TRUE(same_bits(std::get<1>(got), std::get<1>(want))) << "b1 on " << D << " devices";
  EXPECT_TRUE(same_bits(std::get<2>(got), std::get<2>(want))) << "W2 on " << D << " devices";
}

TEST(DataParallel, DonatedParametersAreWrittenOverOnOneDevice) { check_donated_step<1>(true); }
TEST(DataParallel, DonatedParametersAreNotSharedByTwoDevices) { check_donated_step<2>(false); }

constexpr auto global_loss = [](auto q, auto a, auto b) { return pmean<"data">(local_loss(q, a, b)); };

// grad and value_and_grad of a shard_map (outside it): the parameters' gradient comes out replicated and
// equal to one device's on the global batch, the inputs' gradient split as the inputs are; bit-identical to
// writing grad inside the shard_map.
TEST(DataParallel, GradOutsideShardMapEqualsGradInside) {
  using M = mesh<axis<"data", 4>>;
  const Params p{random_tensor<W1>(11, 0.3f), random_tensor<B1>(12, 0.1f), random_tensor<W2>(13, 0.3f)};
  const Xs x = random_tensor<Xs>(14);
  Ys y{};
  for (std::size_t i = 0; i < 32; ++i) y.data()[i * 4 + (i * 3) % 4] = 1;
  const auto sharded_loss = shard_map<M, specs<P<>, P<"data">, P<"data">>, P<>>(global_loss);

  const auto [dp, dx] = grad<0, 1>(sharded_loss)(p, x, y);
  const auto [want_dp, want_dx] = jit(grad<0, 1>(local_loss))(p, x, y);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(dx)>, Xs>, "the split input's gradient is put together");
  tessel::testing::expect_close_at_scale(std::get<0>(dp), std::get<0>(want_dp), "dW1", 1e-6);
  tessel::testing::expect_close_at_scale(std::get<1>(dp), std::get<1>(want_dp), "db1", 1e-6);
  tessel::testing::expect_close_at_scale(std::get<2>(dp), std::get<2>(want_dp), "dW2", 1e-6);
  tessel::testing::expect_close_at_scale(dx, want_dx, "dx", 1e-6);

  const auto [loss, g] = value_and_grad(sharded_loss)(p, x, y);
  const auto inside = shard_map<M, specs<P<>, P<"data">, P<"data">>, specs<P<>, P<>>>(
      [](auto q, auto a, auto b) { return value_and_grad(global_loss)(q, a, b); });
  const auto [loss_inside, g_inside] = inside(p, x, y);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(loss[0]), std::bit_cast<std::uint32_t>(loss_inside[0]));
  for (std::size_t i = 0; i < W1::size; ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(std::get<0>(g).data()[i]), std::bit_cast<std::uint32_t>(std::get<0>(g_inside).data()[i]));
  // The loss's pmean and one psum per parameter leaf (its gradient, replicated); dx needs none (it is split).
  const std::string text = dump(value_and_grad(sharded_loss), p, x, y);
  std::size_t psums = 0;
  for (std::size_t at = text.find("psum over {data}"); at != std::string::npos; at = text.find("psum over {data}", at + 1)) ++psums;
  EXPECT_EQ(psums, 4u) << text;
}
// vmap of a shard_map: a stack of 3 weights over the replicated argument (in_axes 0, none), and a batch at
// axis 1 of a split argument put out at axis 0: each is the shard_map called on every slice.
TEST(DataParallel, VmapOutsideShardMapEqualsALoopOverSlices) {
  using M = mesh<axis<"data", 4>>;
  const auto total = shard_map<M, specs<P<>, P<"data">>, P<>>([](auto w, auto x) { return psum<"data">(reduce_sum<0, 1>(matmul(x, w))); });
  const auto ws = random_tensor<tensor<float, shape<3, 8, 16>>>(21);
  const Xs x = random_tensor<Xs>(22);
  const auto stacked = vmap(total, in_axes<0, none>)(ws, x);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(stacked)>, tensor<float, shape<3>>>);
  for (std::size_t b = 0; b < 3; ++b) {
    W1 w;
    for (std::size_t i = 0; i < W1::size; ++i) w.data()[i] = ws.data()[b * W1::size + i];
    EXPECT_NEAR(stacked[b], total(w, x)[0], 1e-5f * std::abs(total(w, x)[0])) << "slice " << b;
  }

  const auto centred = shard_map<M, specs<P<"data">>, P<"data">>([](auto v) { return v - broadcast_to<typename decltype(v)::shape_type>(pmean<"data">(mean(v))); });
  const auto columns = random_tensor<tensor<float, shape<32, 3>>>(23);
  const auto mapped = vmap(centred, in_axes<1>, out_axes<0>)(columns);  // specs P<"data", none> in, P<none, "data"> out
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(mapped)>, tensor<float, shape<3, 32>>>);
  for (std::size_t b = 0; b < 3; ++b) {
    tensor<float, shape<32>> column;
    for (std::size_t i = 0; i < 32; ++i) column[i] = columns.data()[i * 3 + b];
    const auto want = centred(column);
    for (std::size_t i = 0; i < 32; ++i) EXPECT_NEAR(mapped.data()[b * 32 + i], want[i], 1e-6f) << "slice " << b << " element " << i;
  }
}

TEST(DataParallel, TwoDevicesEqualOneOnTheGlobalBatch) { check_devices<2>(); }
TEST(DataParallel, FourDevicesEqualOneOnTheGlobalBatch) { check_devices<4>(); }
TEST(DataParallel, EightDevicesEqualOneOnTheGlobalBatch) { check_devices<8>(); }

// Replicated layers stacked [L, ...] and run by a scan over a sharded batch, as tessel::nn::gpt's: the
// backward scan's parameters vary as the values they stand for, so each step's weight cotangent is psummed
// once (and not the carried activations' cotangents). Before that fix the weight gradients came back as
// device 0's part alone (a plain scan) and gpt's gradient norm grew with the devices (6x on 2, 57x on 4).
using Stack = tensor<float, shape<3, 8, 8>>;
using Rows = tensor<float, shape<16, 8>>;

template <bool Remat>
struct stacked_loss {
  template <class W, class X>
  constexpr auto operator()(W w, X x) const {
    auto layer = [](auto h, auto wl) { return tanh(matmul(h, wl)); };
    auto [h, unused] = scan(
        [&](auto carry, auto wl) {
          if constexpr (Remat) return std::tuple{checkpoint(layer, checkpoint_policies::dots_saveable)(carry, wl), std::tuple<>{}};
          else return std::tuple{layer(carry, wl), std::tuple<>{}};
        },
        x, w);
    return sum(h * h);
  }
};

template <std::size_t D, bool Remat>
void check_stacked_layers() {
  const Stack w = random_tensor<Stack>(5, 0.5f);
  const Rows x = random_tensor<Rows>(6), dx = random_tensor<Rows>(7);
  const Stack dw = random_tensor<Stack>(8);
  const auto [want_g, want_t] = jit([](auto a, auto b, auto da, auto db) {
    return std::tuple{grad<0>(stacked_loss<Remat>{})(a, b), std::get<1>(jvp(stacked_loss<Remat>{}, std::tuple{a, b}, std::tuple{da, db}))};
  })(w, x, dw, dx);
  const auto [g, t] = shard_map<mesh<axis<"data", D>>, specs<P<>, P<"data">, P<>, P<"data">>, specs<P<>, P<>>>(
      [](auto a, auto b, auto da, auto db) {
        constexpr auto loss = [](auto p, auto q) { return psum<"data">(stacked_loss<Remat>{}(p, q)); };
        return std::tuple{grad<0>(loss)(a, b), std::get<1>(jvp(loss, std::tuple{a, b}, std::tuple{da, db}))};
      })(w, x, dw, dx);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < Stack::size; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(g.data()[i]) - want_g.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want_g.data()[i])));
  }
  EXPECT_LE(worst, 1e-6 * scale) << "the stacked weights' gradient on " << D << " devices" << (Remat ? ", under checkpoint" : "");
  EXPECT_NEAR(t[0], want_t[0], 1e-5 * std::abs(want_t[0])) << "the tangent on " << D << " devices";
}

TEST(DataParallel, ScanOverReplicatedLayersEqualsOneDevice) {
  check_stacked_layers<2, false>();
  check_stacked_layers<4, false>();
}
TEST(DataParallel, ScanOverCheckpointedReplicatedLayersEqualsOneDevice) {
  check_stacked_layers<2, true>();
  check_stacked_layers<4, true>();
}

// The stacked weights' gradient is psummed once, after the backward scan, not in each step: the plan's one
// collective is of all 3 x 8 x 8 floats (a psum in the loop would be of one layer's 8 x 8, 256 bytes).
TEST(DataParallel, StackedLayersGradientIsPsummedOnceAfterTheLoop) {
  const Stack w = random_tensor<Stack>(5, 0.5f);
  const Rows x = random_tensor<Rows>(6);
  auto f = shard_map<mesh<axis<"data", 2>>, specs<P<>, P<"data">>, P<>>([](auto a, auto b) {
    return grad<0>([](auto p, auto q) { return psum<"data">(stacked_loss<true>{}(p, q)); })(a, b);
  });
  const std::string text = dump(f, w, x);
  EXPECT_NE(text.find("1 collectives"), std::string::npos) << text;
  EXPECT_NE(text.find("psum over {data} (2 devices): 768 bytes"), std::string::npos) << text;
  EXPECT_EQ(text.find("256 bytes"), std::string::npos) << text;
}

// A replicated bias added to a sharded batch: its gradient is psummed after the broadcast's transpose
// reduces it over the batch (f32[16], 64 bytes), not before (f32[16,16], the device's rows).
TEST(DataParallel, BiasGradientIsPsummedAfterItsReduction) {
  const Params p{random_tensor<W1>(7, 0.3f), random_tensor<B1>(8, 0.1f), random_tensor<W2>(9, 0.3f)};
  const Xs x = random_tensor<Xs>(10);
  const Ys y = random_tensor<Ys>(11);
  auto f = shard_map<mesh<axis<"data", 2>>, specs<P<>, P<"data">, P<"data">>, P<>>([](auto q, auto a, auto b) {
    return grad([](auto r, auto u, auto v) { return pmean<"data">(local_loss(r, u, v)); })(q, a, b);
  });
  const std::string text = dump(f, p, x, y);
  EXPECT_NE(text.find("psum over {data} (2 devices): 64 bytes"), std::string::npos) << text;
  EXPECT_EQ(text.find("psum over {data} (2 devices): 1024 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("3 collectives"), std::string::npos) << text;  // one per parameter
  const auto [g1, gb, g2] = f(p, x, y);
  const auto [o1, ob, o2] = jit(grad([](auto r, auto u, auto v) { return local_loss(r, u, v); }))(p, x, y);
  for (std::size_t i = 0; i < B1::size; ++i) EXPECT_NEAR(gb.data()[i], ob.data()[i], 1e-5f * (1 + std::abs(ob.data()[i]))) << i;
  for (std::size_t i = 0; i < W1::size; ++i) EXPECT_NEAR(g1.data()[i], o1.data()[i], 1e-5f * (1 + std::abs(o1.data()[i]))) << i;
}

}  // namespace
