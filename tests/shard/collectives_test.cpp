// shard_map and the collectives against JAX's documented values (SHARDING.md §2.3, T1-T13).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

template <class T, class S>
tensor<T, S> from(std::initializer_list<T> v) {
  tensor<T, S> t(uninitialized);
  std::size_t i = 0;
  for (T x : v) t.data()[i++] = x;
  return t;
}
template <class T, std::size_t N>
tensor<T, shape<N>> arange() {
  tensor<T, shape<N>> t(uninitialized);
  for (std::size_t i = 0; i < N; ++i) t.data()[i] = static_cast<T>(i);
  return t;
}

using M4 = mesh<axis<"i", 4>>;

// The fingerprint that the processes of a run compare before they exchange data (shard_map.hpp).
template <class X, class M, class In, class Out, class F>
std::uint64_t fingerprint_of(const sharded<M, In, Out, F>&) {
  using S = sharded<M, In, Out, F>;
  return shard_detail::program_fingerprint<M, typename S::in_specs, typename S::out_specs>(S::template traced_for<X>::program);
}

TEST(ShardMap, FingerprintTellsProgramsLayoutsAndKernelSettingsApart) {
  using X = tensor<float, shape<16>>;
  const auto sum = shard_map<M4, specs<P<"i">>, P<>>([](auto b) { return psum<"i">(b); });
  const auto same = shard_map<M4, specs<P<"i">>, P<>>([](auto b) { return psum<"i">(b); });
  const auto doubled = shard_map<M4, specs<P<"i">>, P<>>([](auto b) { return psum<"i">(b * 2.0f); });  // as many bytes
  const auto stacked = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) { return psum<"i">(b); });    // the same program
  const std::uint64_t base = fingerprint_of<X>(sum);
  EXPECT_EQ(fingerprint_of<X>(same), base);
  EXPECT_NE(fingerprint_of<X>(doubled), base);
  EXPECT_NE(fingerprint_of<X>(stacked), base);
  const kernels::math_path before = kernels::force_math_path(kernels::math_path::scalar);
  EXPECT_NE(fingerprint_of<X>(sum), base);
  kernels::force_math_path(before);
  EXPECT_EQ(fingerprint_of<X>(sum), base);
}

TEST(ShardMap, PsumOfArangeIsSixOnEveryDevice) {  // T1
  auto f = shard_map<M4, specs<P<"i">>, P<"i">>([](auto x) { return psum<"i">(x); });
  const auto y = f(arange<float, 4>());
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(y.data()[i], 6.0f);
}

TEST(ShardMap, PsumOverRowsGivesColumnSums) {  // T3, T8
  const auto x = from<float, shape<16>>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2});
  auto f = shard_map<M4, specs<P<"i">>, P<>>([](auto b) { return psum<"i">(b); });
  const auto y = f(x);
  const float want[] = {22, 20, 12, 17};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(y.data()[i], want[i]);
}

TEST(ShardMap, PmeanOfArange) {  // T6
  auto f = shard_map<M4, specs<P<"i">>, P<"i">>([](auto x) { return x / pmean<"i">(x); });
  const auto y = f(arange<float, 4>());
  const float want[] = {0, 1 / 1.5f, 2 / 1.5f, 3 / 1.5f};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y.data()[i], want[i]);
}

TEST(ShardMap, PsumScatterTiledAndNot) {  // T4, T9
  const auto x = from<float, shape<16>>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2});
  auto tiled = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) { return psum_scatter<M4, "i", 0, true>(b); });
  const auto y = tiled(x);
  const float want[] = {22, 20, 12, 17};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(y.data()[i], want[i]);
  auto untiled = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) { return reshape<shape<1>>(psum_scatter<M4, "i">(b)); });
  const auto z = untiled(x);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(z.data()[i], want[i]);
}

TEST(ShardMap, AllGatherTiledAndStacked) {  // T7, T11
  const auto x = from<float, shape<4>>({3, 9, 5, 2});
  auto tiled = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) { return all_gather<M4, "i", 0, true>(b); });
  const auto y = tiled(x);  // f32[16]: [3,9,5,2] on each of the 4 devices, concatenated
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(y.data()[i], x.data()[i % 4]);
  auto stacked = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) { return all_gather<M4, "i">(b); });
  const auto z = stacked(x);  // (4,1) per device -> (16,1)
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(z)>, tensor<float, shape<16, 1>>>);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(z.data()[i], x.data()[i % 4]);
}

TEST(ShardMap, AllToAllTiledIsABlockTranspose) {  // T10
  const auto x = from<float, shape<16>>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2});
  auto f = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) { return all_to_all<M4, "i", 0, 0, true>(b); });
  const auto y = f(x);
  const float want[] = {3, 5, 5, 9, 1, 9, 3, 7, 4, 2, 5, 1, 1, 6, 8, 2};
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(y.data()[i], want[i]);
}

TEST(ShardMap, PpermuteRingAndMissingWrapAround) {  // T12
  const auto x = arange<float, 8>();
  auto ring = shard_map<M4, specs<P<"i">>, P<"i">>(
      [](auto b) { return ppermute<"i", edge{0, 1}, edge{1, 2}, edge{2, 3}, edge{3, 0}>(b); });
  const auto y = ring(x);
  const float want[] = {6, 7, 0, 1, 2, 3, 4, 5};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(y.data()[i], want[i]);
  auto open = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) { return ppermute<"i", edge{0, 1}, edge{1, 2}, edge{2, 3}>(b); });
  const auto z = open(x);
  const float want_open[] = {0, 0, 0, 1, 2, 3, 4, 5};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(z.data()[i], want_open[i]);
}

TEST(ShardMap, AxisIndexOverTwoAxes) {  // T13
  using M = mesh<axis<"i", 4>, axis<"j", 2>>;
  auto f = shard_map<M, specs<P<"i", "j">>, P<"i", "j">>(
      [](auto x) { return x + broadcast_to<shape<1, 1>>(axis_index<mesh_axes<"i", "j">>(x)); });
  const tensor<std::int32_t, shape<4, 2>> zero{};
  const auto y = f(zero);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(y.data()[i], static_cast<std::int32_t>(i));
}

// The seeds' per-device keys: fold_in(key, axis_index) inside shard_map. Device d draws what the host
// draws from fold_in(key, d), which over 0..n-1 are split<n>(key)'s keys (SHARDING.md T19), so the
// devices' draws differ and a run on one device can reproduce any of them.
TEST(ShardMap, PerDeviceKeysFoldInTheAxisIndex) {
  auto f = shard_map<M4, specs<P<>, P<>>, P<"i">>([](auto k0, auto k1) {
    const auto key = random::fold_in(random::key_words<tracer>{k0, k1}, axis_index<"i">(k0));
    return random::uniform<shape<1, 3>>(key);
  });
  const random::key base = random::key_from_seed(72);
  const random::key_words<> words = random::key_data(base);
  const auto u = f(words.k0, words.k1);
  static_assert(std::is_same_v<decltype(u), const tensor<float, shape<4, 3>>>);
  const auto split = random::split<4>(base);
  for (std::uint32_t d = 0; d < 4; ++d) {
    const auto want = random::uniform<shape<3>>(random::fold_in(base, d));
    const auto from_split = random::uniform<shape<3>>(split[d]);
    for (std::size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(u(d, j), want[j]) << "device " << d << " element " << j;
      EXPECT_EQ(u(d, j), from_split[j]) << "device " << d << " element " << j;
    }
  }
  EXPECT_NE(u(0, 0), u(1, 0));
}

TEST(ShardMap, BlockShapesOnAFourByTwoMesh) {  // SHARDING.md §1.3
  using M = mesh<axis<"i", 4>, axis<"j", 2>>;
  static_assert(std::is_same_v<sharding::local_shape_t<M, P<"i", none>, shape<12, 12>>, shape<3, 12>>);
  static_assert(std::is_same_v<sharding::local_shape_t<M, P<"i", "j">, shape<12, 12>>, shape<3, 6>>);
  static_assert(std::is_same_v<sharding::local_shape_t<M, P<mesh_axes<"i", "j">>, shape<16>>, shape<2>>);
  tensor<float, shape<12, 12>> x{};
  // in P('i', None) -> block (3,12); out P('i','j') of that block -> (12, 24)
  auto f = shard_map<M, specs<P<"i", none>>, P<"i", "j">>([](auto b) { return pvary<"j">(b); });
  static_assert(std::is_same_v<decltype(f(x)), tensor<float, shape<12, 24>>>);
  // in P('i','j'), psum over 'j', out P('i', None) -> (12, 6)
  auto g = shard_map<M, specs<P<"i", "j">>, P<"i", none>>([](auto b) { return psum<"j">(b); });
  static_assert(std::is_same_v<decltype(g(x)), tensor<float, shape<12, 6>>>);
  auto h = shard_map<M, specs<P<"i", "j">>, P<>>([](auto b) { return psum<mesh_axes<"i", "j">>(b); });
  static_assert(std::is_same_v<decltype(h(x)), tensor<float, shape<3, 6>>>);
}

}  // namespace

namespace {
TEST(Pmap, PsumOfArangeAndPmeanCentering) {  // T1 and T6 through pmap
  const auto x = arange<float, 4>();
  const auto y = pmap<"i", 4>([](auto v) { return psum<"i">(v); })(x);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(y.data()[i], 6.0f);
  const auto rows = arange<float, 12>().reshape<shape<4, 3>>();
  const auto centered = pmap<"i", 4>([](auto v) { return v - pmean<"i">(v); })(rows);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(centered)>, tensor<float, shape<4, 3>>>);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(centered.data()[i], static_cast<float>(i) - static_cast<float>(4.5 + i % 3));
}
}  // namespace

namespace {
// A collective inside a scan inside shard_map: each step passes the blocks one device along a ring and
// adds them up, so after N - 1 steps every device holds the sum of all blocks, psum's result (the carry varies
// along "i" from the start, so its type is kept).
TEST(ShardMap, RingSumByScanEqualsPsum) {
  const auto x = from<float, shape<8>>({3, 1, 4, 1, 5, 9, 2, 6});
  auto ring = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) {
    auto [carry, ys] = scan<3>(
        [](auto c, auto) {
          auto [acc, cur] = c;
          auto next = ppermute<"i", edge{0, 1}, edge{1, 2}, edge{2, 3}, edge{3, 0}>(cur);
          return std::tuple{std::tuple{acc + next, next}, std::tuple<>{}};
        },
        std::tuple{b, b});
    return std::get<0>(carry);
  });
  const auto y = ring(x);
  const auto want = shard_map<M4, specs<P<"i">>, P<"i">>([](auto b) { return psum<"i">(b); })(x);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(y.data()[i], want.data()[i]) << i;
}
}  // namespace

namespace {
// dump of a shard_map: the mesh, each collective with its group, bytes and alpha-beta time, then the plan.
TEST(ShardMap, DumpListsCollectivesWithAlphaBetaTimes) {
  const tensor<float, shape<16, 256>> x{};
  auto f = shard_map<M4, specs<P<"i">>, P<>>([](auto b) { return psum<"i">(b * 2.0f); });
  const std::string text = dump(f, x);
  EXPECT_NE(text.find("shard_map on a mesh of shape (4,) with axis names ('i',): 4 devices"), std::string::npos) << text;
  // f32[4,256] = 4096 bytes per device; ring all-reduce over 4: 2(N-1)a + 2(N-1)/N n b on the host target.
  const double want = collective_seconds(targets::host, collective_kind::all_reduce, 4, 4096.0);
  EXPECT_DOUBLE_EQ(want, 6 * targets::host.ici_alpha_s + 1.5 * 4096 * targets::host.ici_beta_s_per_byte);
  std::ostringstream line;
  line << "psum over {i} (4 devices): 4096 bytes, " << want * 1e6 << " us";
  EXPECT_NE(text.find(line.str()), std::string::npos) << text;
  EXPECT_NE(text.find("1 collectives"), std::string::npos) << text;
  // On a TPU target the same program's blocks are checked against its VMEM and priced at its ICI.
  const std::string tpu = dump<targets::tpu_v5e>(f, x);
  EXPECT_NE(tpu.find("tpu_v5e"), std::string::npos) << tpu;
}
}  // namespace
