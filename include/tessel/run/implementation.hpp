// Defines run::execute (tessel/run/executor.hpp): the host executor over a type-erased plan, compiled once
// in the tessel library (src/tessel.cpp), or in one translation unit of a header-only user's program
// (TESSEL_IMPLEMENTATION defined before including tessel/tessel.hpp). Kernels call each primitive's
// tile functions through its descriptor, so nothing here depends on the program.
//
// One arena holds the plan's intermediate buffers (plan.arena_bytes, a constant) and each thread's
// scratch (member tile pointers, tiles, rows, GEMM panels); it is the calling thread's, reused by every
// call, and nothing is allocated inside kernels.

#ifndef TESSEL_RUN_IMPLEMENTATION_HPP
#define TESSEL_RUN_IMPLEMENTATION_HPP

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

#include "tessel/kernels/collective.hpp"
#include "tessel/prim/all.hpp"  // every primitive descriptor, so this translation unit sees them all
#include "tessel/run/contraction.hpp"
#include "tessel/run/executor.hpp"
#include "tessel/run/items.hpp"
#include "tessel/run/loops.hpp"
#include "tessel/run/mesh.hpp"
#include "tessel/run/plan_executor.hpp"

namespace tessel::run {

void execute(const plan::plan_view& plan, const void* const* parameters, void* const* outputs) {
  executor(plan, parameters, outputs).run();
}

namespace {

// The device threads past the caller's, started when a mesh first needs them and kept (each keeps its
// arena). One mesh runs at a time.
class device_threads {
 public:
  static device_threads& get() {
    static device_threads threads;
    return threads;
  }

  void run(const std::size_t* sizes, std::size_t rank, std::size_t process_axes, std::uint64_t program, void (*body)(void*, std::size_t),
           void* context) {
    std::lock_guard call(call_mutex_);
    kernels::communicator comm(sizes, rank, process_axes, program);
    const std::size_t devices = comm.local_devices();
    while (workers_.size() + 1 < devices) {
      const std::size_t device = workers_.size() + 1;
      workers_.emplace_back([this, device] { work(device); });
    }
    {
      std::lock_guard lock(mutex_);
      body_ = body;
      context_ = context;
      comm_ = &comm;
      devices_ = devices;
      pending_ = devices - 1;
      ++generation_;
    }
    wake_.notify_all();
    run_as(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    comm_ = nullptr;
  }

  ~device_threads() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

 private:
  // `local`: the device's place among this process's devices.
  void run_as(std::size_t local) {
    kernels::device_context& d = kernels::this_device();
    bool& serial = thread_pool::serial_here();
    const bool was_serial = serial;
    const std::size_t device = comm_->first_local() + local;
    d = {comm_, device};
    serial = devices_ > 1;
    body_(context_, device);
    serial = was_serial;
    d = {};
  }

  void work(std::size_t device) {
    std::size_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (device >= devices_) continue;
      }
      run_as(device);
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex call_mutex_, mutex_;
  std::condition_variable wake_, done_;
  void (*body_)(void*, std::size_t) = nullptr;
  void* context_ = nullptr;
  kernels::communicator* comm_ = nullptr;
  std::size_t devices_ = 0, pending_ = 0, generation_ = 0;
  bool stopping_ = false;
};

}  // namespace

void on_devices(const std::size_t* axis_sizes, std::size_t rank, std::size_t process_axes, std::uint64_t program,
                void (*body)(void*, std::size_t), void* context) {
  device_threads::get().run(axis_sizes, rank, process_axes, program, body, context);
}

}  // namespace tessel::run

#endif  // TESSEL_RUN_IMPLEMENTATION_HPP