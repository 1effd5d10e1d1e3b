#pragma once
// The devices of a mesh on one host talk through a communicator: shared memory and a barrier. A
// collective kernel (prim/psum.hpp, prim/all_gather.hpp, ...) runs on every device at the same point of the
// same plan: each device publishes its operand and result buffers, waits until all have, reads the others'
// operands (or writes its share of everyone's results), and waits again before its buffers can be reused.
// What each device computes, and in which order it adds, depends only on the device and the mesh, never on
// thread timing, so results are bit-identical from run to run. Compiled once in the tessel library
// (kernels/implementation.hpp).

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessel::kernels {

class communicator {
 public:
  // A mesh of the given axis sizes (row-major device order).
  communicator(const std::size_t* axis_sizes, std::size_t rank);
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  std::size_t devices() const { return devices_; }
  std::size_t rank() const { return rank_; }
  std::size_t axis_size(std::size_t axis) const { return sizes_[axis]; }
  std::size_t coordinate(std::size_t device, std::size_t axis) const;

  // Every device calls publish with its buffers; it returns once all have, so each may read the others'.
  // finish ends the collective: it returns once every device has done its share.
  void publish(std::size_t device, const void* in, void* out);
  void finish(std::size_t device);
  const void* input(std::size_t device) const { return inputs_[device]; }
  void* output(std::size_t device) const { return outputs_[device]; }
  // Every device calls it after its share of the collective; it returns once all have.
  void arrive_and_wait();

 private:
  std::size_t devices_ = 1, rank_ = 0;
  std::array<std::size_t, 8> sizes_{};
  std::vector<const void*> inputs_;
  std::vector<void*> outputs_;
  alignas(64) std::atomic<std::uint32_t> arrived_{0};
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  std::int64_t started_ = 0;  // device 0's publish, in steady-clock nanoseconds
};

// Nanoseconds device 0 of every mesh has spent in collectives (from publish to finish, waiting included)
// since the process started: what a training loop reports as its all-reduce time.
std::uint64_t collective_nanoseconds();

// The device the calling thread runs as (comm null: not inside a shard_map's run).
struct device_context {
  communicator* comm = nullptr;
  std::size_t device = 0;
};
device_context& this_device();

}  // namespace tessel::kernels
