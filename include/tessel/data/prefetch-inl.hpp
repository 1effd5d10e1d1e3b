// Definitions of tessel/data/prefetch.hpp's producer thread: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "tessel/data/prefetch.hpp"
#include "tessel/profile/profiler.hpp"

namespace tessel::data::detail {

struct prefetch_worker::shared {
  shared(std::size_t d, std::function<result()> p) : depth(d), produce(std::move(p)) {}
  std::size_t depth;
  std::function<result()> produce;
  std::mutex mutex;
  std::condition_variable ready;  // the consumer waits for a result or an error
  std::condition_variable space;  // the producer waits for room or for stopping
  std::deque<result> queue;
  std::exception_ptr error;
  bool stopping = false;
  prefetch_stats stats;
  std::thread worker;

  void run() noexcept {
    profile::set_thread_name("tessel prefetch");
    try {
      while (true) {
        {
          std::unique_lock lock(mutex);
          space.wait(lock, [&] { return stopping || queue.size() < depth; });
          if (stopping) return;
        }
        const auto t0 = profile::clock::now();
        result r;
        {
          profile::scope producing("data.produce", "data");
          r = produce();
        }
        const auto took = profile::clock::now() - t0;
        {
          std::lock_guard lock(mutex);
          stats.producer_time += std::chrono::duration_cast<std::chrono::nanoseconds>(took);
          ++stats.produced;
          queue.push_back(std::move(r));
        }
        ready.notify_one();
      }
    } catch (...) {
      {
        std::lock_guard lock(mutex);
        error = std::current_exception();
      }
      ready.notify_one();
    }
  }

  void stop() noexcept {
    if (!worker.joinable()) return;
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    space.notify_all();
    worker.join();
  }
};

prefetch_worker::prefetch_worker(std::size_t depth, std::function<result()> produce)
    : state_(std::make_unique<shared>(depth, std::move(produce))) {}

prefetch_worker::prefetch_worker(prefetch_worker&&) noexcept = default;

prefetch_worker& prefetch_worker::operator=(prefetch_worker&& other) noexcept {
  if (this != &other) {
    if (state_) state_->stop();
    state_ = std::move(other.state_);
  }
  return *this;
}

prefetch_worker::~prefetch_worker() {
  if (state_) state_->stop();
}

prefetch_worker::result prefetch_worker::take() {
  shared& s = *state_;
  if (!s.worker.joinable()) s.worker = std::thread([&s] { s.run(); });
  std::unique_lock lock(s.mutex);
  if (s.queue.empty() && !s.error) {
    const auto t0 = profile::clock::now();
    {
      profile::scope waiting("data.wait", "data");
      s.ready.wait(lock, [&] { return !s.queue.empty() || s.error; });
    }
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(profile::clock::now() - t0);
    s.stats.consumer_wait += waited;
    s.stats.last_wait = waited;
    profile::add_input_wait(waited);
  } else {
    s.stats.last_wait = {};
  }
  if (s.queue.empty()) std::rethrow_exception(s.error);
  result r = std::move(s.queue.front());
  s.queue.pop_front();
  ++s.stats.consumed;
  lock.unlock();
  s.space.notify_one();
  return r;
}

void prefetch_worker::reset() noexcept {
  shared& s = *state_;
  s.stop();
  s.queue.clear();
  s.error = nullptr;
  s.stopping = false;
}

prefetch_stats prefetch_worker::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

}  // namespace tessel::data::detail
