#pragma once
// Runs over several processes: OpenMPI carries the collectives of mesh axes that span processes.
//
//   int main(int argc, char** argv) {
//     tessel::distributed::init(argc, argv);                        // every process, first thing
//     using M = tessel::mesh<tessel::axis<"data", 2, tessel::over_processes>, tessel::axis<"model", 2>>;
//     auto step = tessel::shard_map<M, ...>(...);                   // each process runs its 2 devices
//     ... step(x) ...                                               // same arguments in every process
//   }
//   $ mpirun -np 2 ./program
//
// A collective over an axis that spans processes gathers every process's inputs into every process and
// then adds in the same fixed order as on one host, so 2 processes x 2 devices give results bit-identical
// to 1 process x 4 devices (kernels/collective.hpp). Every wait has a deadline: a process that dies or
// stops answering ends the whole run with an error naming the collective, not a hang. Every block a
// process sends carries a fingerprint of the program, its mesh and layouts, and the sender's build and
// kernel settings (shard_map.hpp), checked before the block is used: one started from another program,
// flags or settings, even with collectives of the same sizes, ends the run with an error naming both
// fingerprints. When every process runs on this host, headers and blocks of at most 1 MiB go through
// shared memory rather than MPI (the environment variable TESSEL_SHARED_MEMORY=0 turns that off).
//
// Only this header and the library tessel::distributed (src/distributed.cpp, linked with MPI) know MPI;
// tessel.hpp does not include it. Without init a program is one process (process_count() is 1).

#include <cstddef>
#include <cstdlib>
#include <string_view>

#include "tessel/kernels/collective.hpp"

namespace tessel::distributed {

struct options {
  // How long a process waits for the others at any collective before it ends the run.
  double timeout_seconds = 30;
};

// Starts MPI (MPI_Init_thread; the calling thread makes every MPI call) and joins the run's processes.
// Called once, before any mesh spans processes; MPI is finalized at exit.
void init(int& argc, char**& argv, options o = {});
void init(options o = {});

// Was this process started by mpirun (OpenMPI's, or a PMI launcher's)? A program that also runs alone
// calls init only then, and so needs no MPI daemon when it is one process.
inline bool started_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

// This process's place in the run (its coordinate along the mesh's axes over processes, row-major), and
// how many processes the run has: what data::shard takes to split a dataset between processes.
inline std::size_t process_index() { return kernels::processes().index; }
inline std::size_t process_count() { return kernels::processes().count; }

// Ends every process of the run, each printing `message` with its process index.
[[noreturn]] void abort(std::string_view message);

}  // namespace tessel::distributed
