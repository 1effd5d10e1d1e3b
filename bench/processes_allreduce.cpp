// tessel's all-reduce between processes (a psum over a mesh axis that spans them, run by shard_map: each
// process sums its half of the elements in the fixed order and sends it to the other, through shared memory
// on one host or by MPI) against OpenMPI's MPI_Allreduce on the same buffers, alternating, in one run.
// Reports both times and tessel's speed relative to MPI (MPI time / tessel time).
//   mpirun -np 2 bench_processes_allreduce      (bench/collectives.sh runs it; TESSEL_SHARED_MEMORY=0: MPI only)
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "tessel/distributed.hpp"
#include "tessel/tessel.hpp"

namespace {
using namespace tessel;
using M = mesh<axis<"p", 2, over_processes>>;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The median of 7 timings of `iterations` calls of `f`, per call (every process times the same calls).
template <class F>
double time_per_call(F&& f, int iterations) {
  double t[7];
  for (double& s : t) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) f();
    s = seconds_since(t0) / iterations;
    MPI_Bcast(&s, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  std::sort(t, t + 7);
  return t[3];
}

template <std::size_t N>
void compare() {
  constexpr std::size_t bytes = N * sizeof(float);
  // The global array: one row per process; each process's row is its input.
  tensor<float, shape<2, N>> x(uninitialized);
  for (std::size_t i = 0; i < 2 * N; ++i) x.data()[i] = static_cast<float>(i % 1000) * 0.001f;
  auto psum_rows = shard_map<M, specs<P<"p">>, P<>>([](auto row) { return psum<"p">(row); });
  std::vector<float> buffer(N);
  const float* mine = x.data() + distributed::process_index() * N;
  // Both read the input and write the sum elsewhere.
  auto mpi = [&] { MPI_Allreduce(mine, buffer.data(), static_cast<int>(N), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
  auto ours = [&] { (void)psum_rows(x); };
  for (int i = 0; i < 3; ++i) {
    mpi();
    ours();
  }
  const int iterations = static_cast<int>(std::max<std::size_t>(1, (std::size_t{64} << 20) / bytes));
  const double t_mpi = time_per_call(mpi, iterations), t_ours = time_per_call(ours, iterations);
  if (distributed::process_index() == 0)
    std::printf("processes_allreduce bytes %zu mpi_us %.1f tessel_us %.1f tessel_vs_mpi %.2f\n", bytes, t_mpi * 1e6, t_ours * 1e6,
                t_mpi / t_ours);
}

}  // namespace

int main(int argc, char** argv) {
  tessel::distributed::init(argc, argv);
  if (tessel::distributed::process_count() != 2) tessel::distributed::abort("run it with mpirun -np 2");
  compare<1024>();            // 4 KiB
  compare<16 << 10>();        // 64 KiB: halves of 32 KiB, through shared memory on one host
  compare<64 << 10>();        // 256 KiB: halves of 128 KiB, by MPI
  compare<256 << 10>();       // 1 MiB
  compare<4 << 20>();         // 16 MiB
  compare<16 << 20>();        // 64 MiB
  return 0;
}
