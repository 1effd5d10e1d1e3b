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
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include "tessel/data/dataset.hpp"

namespace tessel::data {

struct prefetch_stats {
  std::chrono::nanoseconds consumer_wait{};  // total time next() blocked for lack of a ready result
  std::chrono::nanoseconds last_wait{};      // of the latest next() (0 if a result was ready)
  std::chrono::nanoseconds producer_time{};  // total time the producer spent in upstream next()
  std::uint64_t produced = 0;                // results made (end-of-epoch markers included)
  std::uint64_t consumed = 0;                // results taken by next()
};

namespace detail {
// A prefetch_stream's producer thread and the synchronisation of its queue, for results of any type:
// each result is a shared_ptr<void> that the typed stream's `produce` made, so this is compiled once
// (prefetch-inl.hpp), not once per stream type.
class prefetch_worker {
 public:
  using result = std::shared_ptr<void>;

  // `produce` makes the next result (it runs on the producer thread; it may throw).
  prefetch_worker(std::size_t depth, std::function<result()> produce);
  prefetch_worker(prefetch_worker&&) noexcept;
  prefetch_worker& operator=(prefetch_worker&&) noexcept;  // stops this one's thread first
  ~prefetch_worker();                                      // stops the thread

  // The oldest ready result, waiting for one (the first call starts the thread); once the results made
  // before an exception of `produce` are taken, that exception, on this and every later call.
  result take();
  // Stops the thread (see the contract of prefetch above) and drops the ready results and the exception.
  void reset() noexcept;
  prefetch_stats stats() const;

 private:
  struct shared;
  std::unique_ptr<shared> state_;  // on the heap: the producer thread refers to it
};
}  // namespace detail

template <Stream Up>
class prefetch_stream {
 public:
  using value_type = typename Up::value_type;

  // Throws std::invalid_argument if depth == 0.
  prefetch_stream(Up up, std::size_t depth)
      : up_(std::make_unique<Up>(std::move(up))), worker_(checked(depth), [u = up_.get()] { return produce(*u); }) {
    position_ = up_->position();
  }
  prefetch_stream(prefetch_stream&&) noexcept = default;
  prefetch_stream& operator=(prefetch_stream&& other) noexcept {
    if (this != &other) {
      worker_ = std::move(other.worker_);  // first: stops this stream's thread before its upstream goes
      up_ = std::move(other.up_);
      position_ = std::move(other.position_);
    }
    return *this;
  }

  // The next result of the upstream, in order; see the contract above for exceptions.
  std::optional<value_type> next() {
    const std::shared_ptr<entry> e = std::static_pointer_cast<entry>(worker_.take());
    position_ = std::move(e->after);
    return std::move(e->value);
  }

  // The position after the last result next() returned (not the producer's, which is ahead).
  stream_position position() const { return position_; }

  // Stops the thread, drops the ready results and any captured exception, and restores the upstream.
  void restore(const stream_position& p) {
    worker_.reset();
    up_->restore(p);
    position_ = up_->position();
  }

  prefetch_stats stats() const { return worker_.stats(); }

 private:
  struct entry {
    std::optional<value_type> value;
    stream_position after;  // the upstream's position after producing it
  };

  static std::size_t checked(std::size_t depth) {
    if (depth == 0) throw std::invalid_argument("tessel::data::prefetch: the depth must be at least 1");
    return depth;
  }
  static std::shared_ptr<void> produce(Up& up) {
    auto e = std::make_shared<entry>();
    e->value = up.next();
    e->after = up.position();
    return e;
  }

  // Declared first, destroyed last: the worker's thread, which uses the upstream, stops before it goes.
  // On the heap, so that the stream object may move while the thread runs.
  std::unique_ptr<Up> up_;
  detail::prefetch_worker worker_;
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

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/data/prefetch-inl.hpp"
#endif
