#pragma once
// The host's cores as a pool: parallel_for hands out chunks of an index range to the calling thread
// and to one worker per remaining hardware thread. Workers sleep between calls; one pool per process.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::backend {

class thread_pool {
 public:
  explicit thread_pool(std::size_t threads = std::max(1u, std::thread::hardware_concurrency())) {
    for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  std::size_t size() const { return workers_.size() + 1; }

  // Calls body(begin, end, thread_index) on disjoint chunks of [0, count) of at most `grain` items,
  // on every thread of the pool; returns when all are done. thread_index < size().
  void parallel_for(std::size_t count, std::size_t grain, const std::function<void(std::size_t, std::size_t, std::size_t)>& body) {
    if (count == 0) return;
    grain = std::max<std::size_t>(grain, 1);
    if (workers_.empty() || count <= grain) {
      body(0, count, 0);
      return;
    }
    std::unique_lock call_lock(call_mutex_);  // one parallel_for at a time
    {
      std::lock_guard lock(mutex_);
      body_ = &body;
      count_ = count;
      grain_ = grain;
      next_.store(0);
      busy_ = workers_.size();
      ++generation_;
    }
    wake_.notify_all();
    drain(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
    body_ = nullptr;
  }

  static thread_pool& host() {
    static thread_pool pool;
    return pool;
  }

 private:
  void drain(std::size_t thread_index) {
    for (;;) {
      const std::size_t begin = next_.fetch_add(grain_);
      if (begin >= count_) return;
      (*body_)(begin, std::min(count_, begin + grain_), thread_index);
    }
  }
  void work(std::size_t thread_index) {
    std::size_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      drain(thread_index);
      {
        std::lock_guard lock(mutex_);
        if (--busy_ == 0) done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_, call_mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t, std::size_t, std::size_t)>* body_ = nullptr;
  std::size_t count_ = 0, grain_ = 1, busy_ = 0, generation_ = 0;
  std::atomic<std::size_t> next_{0};
  bool stopping_ = false;
};

}  // namespace tessel::backend
