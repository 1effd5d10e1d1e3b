#pragma once
// The devices of a mesh on one host talk through a communicator: shared memory and a barrier. A
// collective kernel (prim/psum.hpp, prim/all_gather.hpp, ...) runs on every device at the same point of the
// same plan: each device publishes its operand and result buffers, waits until all have, reads the others'
// operands (or writes its share of everyone's results), and waits again before its buffers can be reused.
// What each device computes, and in which order it adds, depends only on the device and the mesh, never on
// thread timing, so results are bit-identical from run to run. Compiled once in the tessel library
// (kernels/implementation.hpp).
//
// A mesh whose leading axes span processes (mesh<axis<"data", 2, over_processes>, ...>) runs each process's
// devices here and reaches the others through the process transport that tessel::distributed::init
// installs (distributed.hpp, over MPI): a collective over such an axis gathers every process's inputs into
// every process, after which each device computes its result exactly as on one host, in the same order.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessel/core/fingerprint.hpp"

namespace tessel::kernels {

// How this process exchanges bytes with the other processes of a run (none installed: the run is one
// process). Each call is made by every process in the same order, with the same `program` (the
// fingerprint of the program it belongs to: its nodes, mesh, layout and build, shard_map.hpp); every block
// travels with the collective's number, the program and its size, which the receiver checks before it uses
// any data. Only the other processes' blocks move: this process's own block stays where it is (the caller
// has it). None returns a failure or waits forever: it ends the run with an error.
//   all_gather: this process's `bytes` to every other process, process p's into `received` at p * bytes;
//   exchange:   block q of `send` (sizes[q] bytes at offsets[q]) to process q, and process q's block for
//               this one into `received` at received_offsets[q] (received_sizes[q] bytes);
//   gather_blocks: this process's block (sizes[index] bytes at offsets[index] of `buffer`) to every
//               process, the others' into `buffer` at theirs.
// And between two processes only (a pipeline's neighbouring stages, pipeline.hpp), each made by the one
// thread that runs the process's device: send copies `bytes` for process `peer` and returns at once;
// receive waits for the message of the same `tag` from `peer` (messages of other tags may arrive first)
// and checks its program and size (`what` names the message in an error); flush waits until every send
// has been delivered.
struct process_transport {
  std::size_t index = 0, count = 1;
  void (*all_gather)(std::uint64_t program, const void* send, std::size_t bytes, void* received) = nullptr;
  void (*exchange)(std::uint64_t program, const void* send, const std::size_t* sizes, const std::size_t* offsets, void* received,
                   const std::size_t* received_sizes, const std::size_t* received_offsets) = nullptr;
  void (*gather_blocks)(std::uint64_t program, void* buffer, const std::size_t* sizes, const std::size_t* offsets) = nullptr;
  void (*send)(std::uint64_t program, std::size_t peer, std::uint64_t tag, const void* data, std::size_t bytes) = nullptr;
  void (*receive)(std::uint64_t program, std::size_t peer, std::uint64_t tag, void* data, std::size_t bytes, const char* what) = nullptr;
  void (*flush)() = nullptr;
};
void install_process_transport(const process_transport& transport);
const process_transport& processes();

// Adds to `f` what of the library's build and of this process decides the bits its kernels compute: the
// compiler, the instruction sets the library was built for, the Highway target its kernels dispatch to on
// this CPU, and the kernel choices made at run time (TESSEL_MATH_PATH, TESSEL_BF16_PRODUCTS). Part of
// every program's fingerprint (shard_map.hpp): processes whose kernels could round differently, and so
// let replicated values drift apart, refuse to run together.
void add_build(fingerprint& f);

class communicator {
 public:
  // A mesh of the given axis sizes (row-major device order) whose first `process_axes` axes span processes:
  // this process runs its share of the devices, local_devices() of them from first_local(), of the
  // program whose fingerprint is `program` (what the process transport checks).
  communicator(const std::size_t* axis_sizes, std::size_t rank, std::size_t process_axes = 0, std::uint64_t program = 0);
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  std::size_t devices() const { return devices_; }
  std::uint64_t program() const { return program_; }
  std::size_t rank() const { return rank_; }
  std::size_t axis_size(std::size_t axis) const { return sizes_[axis]; }
  std::size_t coordinate(std::size_t device, std::size_t axis) const;
  std::size_t local_devices() const { return local_devices_; }
  std::size_t first_local() const { return first_local_; }
  bool is_local(std::size_t device) const { return device - first_local_ < local_devices_; }

  // Every device calls publish with its buffers (`bytes` each, the same on every device) and the collective's
  // mesh axes (a bitmask); it returns once all have, so each may read the others' inputs. Over an axis that
  // spans processes the other processes' inputs are copies here; outputs are only those of this process's
  // devices. finish ends the collective: it returns once every device has done its share.
  void publish(std::size_t device, const void* in, void* out, std::size_t bytes, std::uint8_t axes);
  void finish(std::size_t device);
  const void* input(std::size_t device) const { return inputs_[device]; }
  void* output(std::size_t device) const { return outputs_[device]; }
  // Every device calls it after its share of the collective; it returns once all have.
  void arrive_and_wait();

 private:
  void gather_from_processes(std::size_t bytes);

  std::size_t devices_ = 1, rank_ = 0, local_devices_ = 1, first_local_ = 0;
  std::uint8_t process_axes_mask_ = 0;
  std::uint64_t program_ = 0;
  std::array<std::size_t, 8> sizes_{};
  std::vector<const void*> inputs_;
  std::vector<void*> outputs_;
  alignas(64) std::atomic<std::uint32_t> arrived_{0};
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  std::int64_t started_ = 0;  // device 0's publish, in steady-clock nanoseconds
};

// Nanoseconds the first device of every mesh (of this process) has spent in collectives (from publish to finish, waiting included)
// since the process started: what a training loop reports as its all-reduce time.
std::uint64_t collective_nanoseconds();

// The device the calling thread runs as (comm null: not inside a shard_map's run).
struct device_context {
  communicator* comm = nullptr;
  std::size_t device = 0;
};
device_context& this_device();

}  // namespace tessel::kernels
