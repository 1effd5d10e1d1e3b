#pragma once
// The host's cores as a pool: parallel_for hands out chunks of an index range to the calling thread
// and to one worker per remaining thread. Between calls a worker spins for a short while (250 us, or
// TESSEL_SPIN_US) before it sleeps, and the caller spins before it sleeps waiting for the workers: a
// kernel lasts tens of microseconds, about what waking a sleeping thread takes, and a step runs a
// thousand of them. The pool every kernel uses,
// thread_pool::host(), has as many threads as the process may run on (its CPU affinity mask), or
// TESSEL_NUM_THREADS where that is set (read once, at the first use). Compiled once in the tessel
// library (kernels/implementation.hpp).

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::kernels {

// The threads the host pool starts with: TESSEL_NUM_THREADS if set to a positive integer, else the CPUs
// of this process's affinity mask (std::thread::hardware_concurrency() where the mask is unknown).
std::size_t default_thread_count();

class thread_pool {
 public:
  explicit thread_pool(std::size_t threads = default_thread_count());
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  std::size_t size() const { return workers_.size() + 1; }

  // Calls body(begin, end, thread_index) on disjoint chunks of [0, count) of at most `grain` items,
  // on every thread of the pool; returns when all are done. thread_index < size().
  void parallel_for(std::size_t count, std::size_t grain, const std::function<void(std::size_t, std::size_t, std::size_t)>& body);

  // Which threads ran at least one chunk in the last parallel_for that had more than one chunk: bit i for
  // thread i (threads past 63 share bit 63). Work is handed out dynamically, so this says what happened,
  // not what must happen; a test of the pool's use reads it.
  std::uint64_t last_participants() const { return participants_.load(std::memory_order_relaxed); }

  // The process's pool (made at the first call).
  static thread_pool& host();

  // Set on a thread that runs as one device of a mesh among several (run/mesh.hpp): its parallel_for calls
  // run on it alone, so the devices share the cores as whole threads and none waits for the pool.
  static bool& serial_here();

 private:
  void drain(std::size_t thread_index);
  void work(std::size_t thread_index);

  std::vector<std::thread> workers_;
  std::mutex mutex_, call_mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t, std::size_t, std::size_t)>* body_ = nullptr;
  // Written under mutex_ (so the sleepers' predicates see them) and read by spinners without it.
  std::atomic<std::size_t> busy_{0}, generation_{0};
  std::atomic<bool> stopping_{false};
  std::size_t count_ = 0, grain_ = 1;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::uint64_t> participants_{0};
};

}  // namespace tessel::kernels
