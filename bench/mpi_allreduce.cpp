// OpenMPI's MPI_Allreduce (sum of f32, in place) over the ranks of MPI_COMM_WORLD, at the sizes of
// bench/collectives.cpp, reported as nccl-tests' algbw and busbw (2(N-1)/N). Plain MPI, no tessel:
// the peer bench/collectives.sh compares tessel's all-reduce with.
//   mpirun -np 2 bench_mpi_allreduce
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::size_t sizes[] = {4, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  if (rank == 0) std::printf("mpi_allreduce ranks %d\n", ranks);
  for (std::size_t bytes : sizes) {
    std::vector<float> buffer(bytes / 4, 1.0f);
    const int count = static_cast<int>(buffer.size());
    for (int i = 0; i < 5; ++i) MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    // As many iterations as fill 0.2 s (rank 0 decides, every rank follows).
    int iterations = 1;
    for (;;) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i) MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      if (seconds >= 0.2 || iterations >= (1 << 24)) {
        const double t = seconds / iterations;
        const double algbw = static_cast<double>(bytes) / t * 1e-9;
        if (rank == 0)
          std::printf("mpi_allreduce bytes %zu time_us %.3f algbw_GBps %.4f busbw_GBps %.4f\n", bytes, t * 1e6, algbw,
                      algbw * 2.0 * (ranks - 1) / ranks);
        break;
      }
      iterations *= 2;
    }
  }
  MPI_Finalize();
  return 0;
}
