// A mesh over processes (mpirun -np 1, 2 or 4): the mesh ("a": 2, "b": 2) split as 1 process x 4 devices,
// 2 x 2 ("a" over processes) or 4 x 1 (both). Every collective, and a data-parallel gradient, must give
// bytes identical to the same mesh run inside one process (which each process also runs, as reference).
// The inputs mix magnitudes from 1e-3 to 1e7, so a sum in another order would differ in its last bits.
//
//   processes_test                  GoogleTest, under mpirun (tests/shard/CMakeLists.txt)
//   processes_test --loop SECONDS [--timeout S]   collectives over ("a", "b") for that long, each wait
//                                   at most S seconds (default 30; the kill and stop tests)
//   processes_test --stall          process 1 stops calling collectives (the timeout test)
//   processes_test --other-program  process 1 runs another program of the same sizes (the fingerprint test)
//   processes_test --soak N         every collective N times at 64 B to 1 MiB (N/20 at 16 MiB) against one
//                                   process's results
//   processes_test --soak-16mib N   the same N times at 16 MiB (by hand)
//   processes_test --soak-large N   the same N times at 64 MiB (by hand: about 1 GB a process)
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "tessel/distributed.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/tessel.hpp"

namespace {
using namespace tessel;

using OneProcess = mesh<axis<"a", 2>, axis<"b", 2>>;
using TwoProcesses = mesh<axis<"a", 2, over_processes>, axis<"b", 2>>;
using FourProcesses = mesh<axis<"a", 2, over_processes>, axis<"b", 2, over_processes>>;

template <class T>
T mixed(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> e(-3, 7);
  T t(uninitialized);
  for (std::size_t i = 0; i < T::size; ++i)
    t.data()[i] = static_cast<typename T::value_type>(u(rng) * std::pow(10.0f, static_cast<float>(e(rng))));
  return t;
}

template <class A, class B>
void expect_same_bytes(const A& a, const B& b, const char* what) {
  static_assert(sizeof(a.data()[0]) == sizeof(b.data()[0]) && A::size == B::size);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), A::size * sizeof(a.data()[0])), 0)
      << what << " differs on process " << distributed::process_index() << " of " << distributed::process_count();
}

// Every collective over one axis, the other, and both; results stacked per device (P over both axes).
template <class M, class S>
auto collectives(const tensor<float, S>& x, const tensor<bfloat16, S>& h) {
  using both = P<mesh_axes<"a", "b">>;
  auto f = shard_map<M, specs<both, both>, specs<both, both, both, both, both, both, both, both, both>>([](auto b, auto hb) {
    return std::tuple{psum<"a">(b), psum<"b">(b), psum<mesh_axes<"a", "b">>(b), pmax<mesh_axes<"b", "a">>(b),
                      all_gather<M, "a", 0, true>(b), psum_scatter<M, mesh_axes<"a", "b">, 1, true>(b),
                      ppermute<"a", edge{0, 1}, edge{1, 0}>(b) + ppermute<"b", edge{1, 0}>(b), all_to_all<M, "b", 1, 0, true>(b),
                      psum<mesh_axes<"a", "b">>(hb)};
  });
  return f(x, h);
}

template <class M>
void check_collectives() {
  const auto x = mixed<tensor<float, shape<16, 8>>>(7);
  const auto h = mixed<tensor<bfloat16, shape<16, 8>>>(8);
  const auto want = collectives<OneProcess>(x, h);
  const auto got = collectives<M>(x, h);
  expect_same_bytes(std::get<0>(got), std::get<0>(want), "psum over a");
  expect_same_bytes(std::get<1>(got), std::get<1>(want), "psum over b");
  expect_same_bytes(std::get<2>(got), std::get<2>(want), "psum over (a, b)");
  expect_same_bytes(std::get<3>(got), std::get<3>(want), "pmax over (b, a)");
  expect_same_bytes(std::get<4>(got), std::get<4>(want), "all_gather over a");
  expect_same_bytes(std::get<5>(got), std::get<5>(want), "psum_scatter over (a, b)");
  expect_same_bytes(std::get<6>(got), std::get<6>(want), "ppermute over a and b");
  expect_same_bytes(std::get<7>(got), std::get<7>(want), "all_to_all over b");
  expect_same_bytes(std::get<8>(got), std::get<8>(want), "bf16 psum over (a, b)");
}

// Data parallel over both axes: replicated parameters, the batch split, gradients summed by the psum that
// tracing inserts; the replicated results must be whole in every process.
using W = tensor<float, shape<6, 4>>;
constexpr auto local_loss = [](auto w, auto x, auto y) { return mean(nn::softmax_cross_entropy(matmul(x, w), y)); };

template <class M>
auto data_parallel_step(const W& w, const tensor<float, shape<16, 6>>& x, const tensor<float, shape<16, 4>>& y) {
  using batch = P<mesh_axes<"a", "b">>;
  return shard_map<M, specs<P<>, batch, batch>, specs<P<>, P<>>>([](auto wp, auto xb, auto yb) {
    const auto loss = [](auto q, auto a, auto b) { return pmean<mesh_axes<"a", "b">>(local_loss(q, a, b)); };
    return std::tuple{loss(wp, xb, yb), grad<0>(loss)(wp, xb, yb)};
  })(w, x, y);
}

template <class M>
void check_data_parallel() {
  const auto w = mixed<W>(1);
  const auto x = mixed<tensor<float, shape<16, 6>>>(2);
  tensor<float, shape<16, 4>> y{};
  for (std::size_t i = 0; i < 16; ++i) y.data()[i * 4 + i % 4] = 1;
  const auto [want_loss, want_grad] = data_parallel_step<OneProcess>(w, x, y);
  const auto [loss, g] = data_parallel_step<M>(w, x, y);
  expect_same_bytes(loss, want_loss, "data-parallel loss");
  expect_same_bytes(g, want_grad, "data-parallel gradient");
}

// The same step as an update of w given through donate(): where a process runs one device of the mesh
// (4 processes) the new w is written over the old one; the bytes are one process's either way.
template <class M>
void check_donated_update() {
  const auto x = mixed<tensor<float, shape<16, 6>>>(2);
  tensor<float, shape<16, 4>> y{};
  for (std::size_t i = 0; i < 16; ++i) y.data()[i * 4 + i % 4] = 1;
  using batch = P<mesh_axes<"a", "b">>;
  const auto update = [](auto wp, auto xb, auto yb) {
    const auto loss = [](auto q, auto a, auto b) { return pmean<mesh_axes<"a", "b">>(local_loss(q, a, b)); };
    return wp - grad<0>(loss)(wp, xb, yb);
  };
  const auto want = shard_map<OneProcess, specs<P<>, batch, batch>, P<>>(update)(mixed<W>(1), x, y);
  W w = mixed<W>(1);
  const float* before = w.data();
  const W got = shard_map<M, specs<P<>, batch, batch>, P<>>(update)(donate(w), x, y);
  EXPECT_EQ(got.data() == before, M::devices / M::processes == 1) << "on process " << distributed::process_index();
  expect_same_bytes(got, want, "donated update");
}

template <class Check>
void on_this_run(Check check) {
  switch (distributed::process_count()) {
    case 1: check.template operator()<OneProcess>(); break;
    case 2: check.template operator()<TwoProcesses>(); break;
    case 4: check.template operator()<FourProcesses>(); break;
    default: FAIL() << "run this test with mpirun -np 1, 2 or 4, not " << distributed::process_count();
  }
}

TEST(Processes, CollectivesAreBitIdenticalToOneProcess) {
  on_this_run([]<class M>() { check_collectives<M>(); });
}

TEST(Processes, DataParallelGradientIsBitIdenticalToOneProcess) {
  on_this_run([]<class M>() { check_data_parallel<M>(); });
}

TEST(Processes, DonatedUpdateIsBitIdenticalToOneProcess) {
  on_this_run([]<class M>() { check_donated_update<M>(); });
}

TEST(Processes, MeshOverTwoProcessesChecksTheProcessCount) {
  const auto x = mixed<tensor<float, shape<16, 8>>>(7);
  const auto h = mixed<tensor<bfloat16, shape<16, 8>>>(8);
  if (distributed::process_count() == 2) {
    EXPECT_NO_THROW(collectives<TwoProcesses>(x, h));
    return;
  }
  try {
    collectives<TwoProcesses>(x, h);
    ADD_FAILURE() << "a mesh over 2 processes ran in a run of " << distributed::process_count();
  } catch (const std::runtime_error& e) {
    const std::string want = "spans 2 processes (its axes over processes), but this run has " + std::to_string(distributed::process_count());
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fix: start it with mpirun -np 2"), std::string::npos) << e.what();
  }
}

// Collectives over both axes for `seconds` (over 2 or 4 processes), each process first printing its pid (the
// kill and stop tests).
int loop(double seconds) {
  std::printf("process %zu pid %d\n", distributed::process_index(), static_cast<int>(getpid()));
  std::fflush(stdout);
  const auto x = mixed<tensor<float, shape<16, 8>>>(7);
  const auto h = mixed<tensor<bfloat16, shape<16, 8>>>(8);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end)
    if (distributed::process_count() == 4) collectives<FourProcesses>(x, h);
    else collectives<TwoProcesses>(x, h);
  return 0;
}

// The robustness suite: every collective `iterations` times at 4 x 4, 16 x 8 and 512 x 512 f32 (64 B, 512 B
// and 1 MiB in all, a quarter on each device) and `iterations / 20` times at 2048 x 2048 (16 MiB), each
// result compared byte for byte with the same mesh in one process. Prints the count of wrong results and
// exits 1 on any (CI runs 20 iterations; `--soak 1000` by hand).
template <class S>
std::size_t wrong_results(int iterations) {
  const auto x = mixed<tensor<float, S>>(7);
  const auto h = mixed<tensor<bfloat16, S>>(8);
  const auto want = collectives<OneProcess>(x, h);
  std::size_t wrong = 0;
  const auto repeat = [&]<class M>() {
    for (int i = 0; i < iterations; ++i) {
      const auto got = collectives<M>(x, h);
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        ((wrong += std::memcmp(std::get<K>(got).data(), std::get<K>(want).data(), sizeof(std::get<K>(got).data()[0]) * std::get<K>(got).size) != 0),
         ...);
      }(std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(got)>>>{});
    }
  };
  if (distributed::process_count() == 2) repeat.template operator()<TwoProcesses>();
  else if (distributed::process_count() == 4) repeat.template operator()<FourProcesses>();
  else repeat.template operator()<OneProcess>();
  return wrong;
}

int soak(int iterations) {
  const std::size_t wrong = wrong_results<shape<4, 4>>(iterations) + wrong_results<shape<16, 8>>(iterations) +
                            wrong_results<shape<512, 512>>(iterations) + wrong_results<shape<2048, 2048>>(std::max(iterations / 20, 1));
  std::printf("process %zu of %zu: 9 collectives, %d iterations at 64 B, 512 B and 1 MiB, %d at 16 MiB: %zu wrong results\n",
              distributed::process_index(), distributed::process_count(), iterations, std::max(iterations / 20, 1), wrong);
  return wrong == 0 ? 0 : 1;
}

// The suite's two largest sizes alone, by hand: 2048 x 2048 f32 (16 MiB in all; --soak runs it N/20 times)
// and 4096 x 4096 (64 MiB in all, 16 MiB a device, the all_gather's result 32 MiB a device: about 1 GB a
// process).
template <class S>
int soak_at(int iterations, const char* size) {
  const std::size_t wrong = wrong_results<S>(iterations);
  std::printf("process %zu of %zu: 9 collectives, %d iterations at %s: %zu wrong results\n", distributed::process_index(),
              distributed::process_count(), iterations, size, wrong);
  return wrong == 0 ? 0 : 1;
}

// Process 1 never reaches the collective: process 0 must end the run when its wait times out.
int stall() {
  if (distributed::process_index() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
  const auto x = mixed<tensor<float, shape<16, 8>>>(7);
  const auto h = mixed<tensor<bfloat16, shape<16, 8>>>(8);
  collectives<TwoProcesses>(x, h);
  return 0;
}

// Process 1 runs another program whose collectives move exactly as many bytes (its operand doubled before
// the psum): without the fingerprint both would finish with different sums and exit 0. Both must refuse
// at the first exchange instead, naming the two fingerprints.
int other_program() {
  const auto x = mixed<tensor<float, shape<16, 8>>>(7);
  const auto doubled = distributed::process_index() == 1;
  const auto sum = doubled ? shard_map<TwoProcesses, specs<P<"a">>, P<>>([](auto b) { return psum<"a">(b * 2.0f); })(x)
                           : shard_map<TwoProcesses, specs<P<"a">>, P<>>([](auto b) { return psum<"a">(b); })(x);
  std::printf("process %zu finished with sum[0] = %g: the different programs were not told apart\n", distributed::process_index(),
              static_cast<double>(sum.data()[0]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool stalling = argc > 1 && std::string(argv[1]) == "--stall";
  const double timeout = argc > 4 && std::string(argv[3]) == "--timeout" ? std::stod(argv[4]) : stalling ? 3.0 : 30.0;
  distributed::init(argc, argv, {.timeout_seconds = timeout});
  if (argc > 2 && std::string(argv[1]) == "--loop") return loop(std::stod(argv[2]));
  if (stalling) return stall();
  if (argc > 1 && std::string(argv[1]) == "--other-program") return other_program();
  if (argc > 2 && std::string(argv[1]) == "--soak") return soak(std::stoi(argv[2]));
  if (argc > 2 && std::string(argv[1]) == "--soak-16mib") return soak_at<shape<2048, 2048>>(std::stoi(argv[2]), "16 MiB");
  if (argc > 2 && std::string(argv[1]) == "--soak-large") return soak_at<shape<4096, 4096>>(std::stoi(argv[2]), "64 MiB");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
