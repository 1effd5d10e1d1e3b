#pragma once
// prefetch(N): a background thread runs the stages before it and keeps up to N of their results ready,
// so that preparing the next batches overlaps the training step (N = 2: double buffering).
//
//   auto s = td::from_idx<tessel::shape<28, 28>>(images, labels) | td::shuffle(key) | td::batch<128>() | td::prefetch(2);
//   while (auto b = s.next()) step(*b);
//   s.stats().consumer_wait   // how long next() waited for the producer, in total
//
// Contract:
// - Order, values and positions are exactly those of the stream without prefetch; end-of-epoch nullopts
//   pass through in order, and the producer runs on into the next epoch.
// - An exception thrown by any stage before it is captured on the producer thread and rethrown by the
//   consumer's next() once the results produced before it are consumed; the same exception again on
//   every later call, until restore(). Its type and message are the original ones.
// - The thread starts on the first next() (construction, moves and restore() start nothing) and stops
//   when the stream is destroyed or restored: at once if it is waiting for space, else after the upstream
//   call it is in returns (that call cannot be interrupted). Nothing is left running: the destructor
//   joins.
// - One consumer thread: next(), position(), restore() and the destructor are not called concurrently.
//   stats() may be called from any thread.
// - With tessel::profile enabled, the producer records a "data.produce" scope per result on a thread
//   named "tessel prefetch", and each wait of next() as a "data.wait" scope and as input wait.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "tessel/data/dataset.hpp"
#include "tessel/profile/profiler.hpp"

namespace tessel::data {

struct prefetch_stats {
  std::chrono::nanoseconds consumer_wait{};  // total time next() blocked for lack of a ready result
  std::chrono::nanoseconds last_wait{};      // of the latest next() (0 if a result was ready)
  std::chrono::nanoseconds producer_time{};  // total time the producer spent in upstream next()
  std::uint64_t produced = 0;                // results made (end-of-epoch markers included)
  std::uint64_t consumed = 0;                // results taken by next()
};

template <Stream Up>
class prefetch_stream {
 public:
  using value_type = typename Up::value_type;

  // Throws std::invalid_argument if depth == 0.
  prefetch_stream(Up up, std::size_t depth) : state_(std::make_unique<shared>(std::move(up), depth)) {
    if (depth == 0) throw std::invalid_argument("tessel::data::prefetch: the depth must be at least 1");
    position_ = state_->up.position();
  }
  prefetch_stream(prefetch_stream&&) noexcept = default;
  prefetch_stream& operator=(prefetch_stream&& other) noexcept {
    if (this != &other) {
      stop();
      state_ = std::move(other.state_);
      position_ = std::move(other.position_);
    }
    return *this;
  }
  ~prefetch_stream() { stop(); }

  // The next result of the upstream, in order; see the contract above for exceptions.
  std::optional<value_type> next() {
    shared& s = *state_;
    if (!s.worker.joinable()) start();
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
    entry e = std::move(s.queue.front());
    s.queue.pop_front();
    ++s.stats.consumed;
    lock.unlock();
    s.space.notify_one();
    position_ = std::move(e.after);
    return std::move(e.value);
  }

  // The position after the last result next() returned (not the producer's, which is ahead).
  stream_position position() const { return position_; }

  // Stops the thread, drops the ready results and any captured exception, and restores the upstream.
  void restore(const stream_position& p) {
    stop();
    state_->queue.clear();
    state_->error = nullptr;
    state_->stopping = false;
    state_->up.restore(p);
    position_ = state_->up.position();
  }

  prefetch_stats stats() const {
    std::lock_guard lock(state_->mutex);
    return state_->stats;
  }

 private:
  struct entry {
    std::optional<value_type> value;
    stream_position after;  // the upstream's position after producing it
  };

  // On the heap: the producer refers to it, and the stream object itself may move.
  struct shared {
    shared(Up u, std::size_t d) : up(std::move(u)), depth(d) {}
    Up up;
    std::size_t depth;
    std::mutex mutex;
    std::condition_variable ready;  // the consumer waits for a result or an error
    std::condition_variable space;  // the producer waits for room or for stopping
    std::deque<entry> queue;
    std::exception_ptr error;
    bool stopping = false;
    prefetch_stats stats;
    std::thread worker;
  };

  void start() {
    shared* s = state_.get();
    s->worker = std::thread([s] { produce(*s); });
  }

  void stop() noexcept {
    if (!state_ || !state_->worker.joinable()) return;
    {
      std::lock_guard lock(state_->mutex);
      state_->stopping = true;
    }
    state_->space.notify_all();
    state_->worker.join();
  }

  static void produce(shared& s) noexcept {
    profile::set_thread_name("tessel prefetch");
    try {
      while (true) {
        {
          std::unique_lock lock(s.mutex);
          s.space.wait(lock, [&] { return s.stopping || s.queue.size() < s.depth; });
          if (s.stopping) return;
        }
        const auto t0 = profile::clock::now();
        entry e;
        {
          profile::scope producing("data.produce", "data");
          e.value = s.up.next();
          e.after = s.up.position();
        }
        const auto took = profile::clock::now() - t0;
        {
          std::lock_guard lock(s.mutex);
          s.stats.producer_time += std::chrono::duration_cast<std::chrono::nanoseconds>(took);
          ++s.stats.produced;
          s.queue.push_back(std::move(e));
        }
        s.ready.notify_one();
      }
    } catch (...) {
      {
        std::lock_guard lock(s.mutex);
        s.error = std::current_exception();
      }
      s.ready.notify_one();
    }
  }

  std::unique_ptr<shared> state_;
  stream_position position_;
};

struct prefetch_adaptor {
  using pipeline_adaptor = void;
  std::size_t depth;
  template <class Up>
  auto operator()(Up up) && {
    using S = stream_of_t<Up>;
    return prefetch_stream<S>(iterate(std::move(up)), depth);
  }
};

// prefetch(depth): results computed ahead on a background thread, at most `depth` ready at a time
// (default 2). Throws std::invalid_argument when applied if depth == 0.
inline prefetch_adaptor prefetch(std::size_t depth = 2) { return {depth}; }

}  // namespace tessel::data
