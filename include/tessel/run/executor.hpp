#pragma once
// The host executor: runs a plan's kernels, in order, on the host pool's threads. It sees the plan through
// plan::plan_view, so it is compiled once, in the tessel library (run/implementation.hpp defines it), not
// once per program.
//
//   run::execute(plan::static_view<plan>(), parameters, outputs);   // what jit does for each call
//
// parameters[i] points at parameter i's data (row-major, its node's dtype), outputs[o] at output o's.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tessel/plan/plan.hpp"

namespace tessel::run {

void execute(const plan::plan_view& plan, const void* const* parameters, void* const* outputs);

// What the executor tells an observer (the profiler, run/check_finite.hpp) about each kernel it ran.
struct kernel_report {
  std::string_view kind;  // plan::name_of(kernel.kind)
  int index = 0;          // the kernel's position in the plan
  // When it started and ended: std::chrono::steady_clock's time since its epoch, in nanoseconds (integers,
  // so that this header, which every program includes, does without <chrono>).
  std::int64_t start_ns = 0, end_ns = 0;
  double bytes = 0;       // the bytes the kernel stores
  const plan::plan_view* plan = nullptr;  // the plan being run (plan/describe.hpp names the kernel from it)
  const void* result = nullptr;           // the buffer the kernel stored (its root node's); null for control kernels
};
using kernel_observer = void (*)(const kernel_report&) noexcept;

// The observer called after every kernel, or null (the default: one load and a branch per kernel).
// Process-wide; profile::enable() installs the profiler's.
inline std::atomic<kernel_observer>& kernel_observer_slot() {
  static std::atomic<kernel_observer> slot{nullptr};
  return slot;
}

// What the executor tells a block observer: kernel `kernel` of the plan ran grid point `block` of its
// `blocks` (each exactly once, on any of the pool's threads, so an observer must be thread-safe). The
// grid is the plan's for this machine (plan::blocks_of with targets::this_host()).
using block_observer = void (*)(int kernel, std::size_t block, std::size_t blocks) noexcept;

// The block observer, or null (the default: one load per kernel). Process-wide; for tests and tools.
inline std::atomic<block_observer>& block_observer_slot() {
  static std::atomic<block_observer> slot{nullptr};
  return slot;
}

}  // namespace tessel::run
