#pragma once
// The devices of a mesh on this host: one thread per device (device 0 is the caller's), kept from one call
// to the next so that each keeps its arena (run/implementation.hpp). During a call each thread runs as its
// device (kernels::this_device(): the mesh's communicator and the device's index), and, when there are
// several devices, runs its kernels on itself alone: devices share the cores as whole threads, and a mesh
// of more devices than cores time-shares them without changing a result. A mesh whose leading axes span
// processes runs this process's devices only (kernels/collective.hpp). Compiled once in the library.
//
//   run::on_devices(sizes, rank, 0, 0, [](void* context, std::size_t device) { ... run::execute(...) ... }, &context);

#include <cstddef>
#include <cstdint>

namespace tessel::run {

// Calls body(context, d) for every device d of a mesh with the given axis sizes (row-major device order)
// that this process holds (all of them unless the first `process_axes` axes span processes), each on its
// own thread, and returns when all have returned. `program`: the fingerprint the process transport
// compares between processes (shard_map.hpp); any value where the mesh spans no processes.
void on_devices(const std::size_t* axis_sizes, std::size_t rank, std::size_t process_axes, std::uint64_t program,
                void (*body)(void* context, std::size_t device), void* context);

}  // namespace tessel::run
