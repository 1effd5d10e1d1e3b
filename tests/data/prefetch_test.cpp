// prefetch: the same results as without it, overlap of production with consumption, exceptions carried
// to the consumer, prompt shutdown without leaked threads, and positions.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessel/data/pipeline.hpp"

namespace {

namespace td = tessel::data;
using namespace std::chrono_literals;
using tessel::int32;

// Aborts the whole test program if it is still alive `limit` after construction: a hang fails loudly
// instead of stalling the suite.
class deadline {
 public:
  deadline(std::chrono::milliseconds limit, std::string what)
      : watchdog_([this, limit, what = std::move(what)] {
          std::unique_lock lock(mutex_);
          if (!done_cv_.wait_for(lock, limit, [&] { return done_; })) {
            std::fprintf(stderr, "deadline exceeded (%lld ms): %s\n", static_cast<long long>(limit.count()), what.c_str());
            std::abort();
          }
        }) {}
  ~deadline() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_one();
    watchdog_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread watchdog_;
};

std::size_t thread_count() {
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) n += entry.is_directory() ? 1 : 0;
  return n;
}

auto make_pipeline() {
  return td::from_indices(17) | td::shuffle(tessel::random::key_from_seed(5)) |
         td::map([](std::size_t i) { return static_cast<int32>(i); }) | td::batch<4>();
}

TEST(Prefetch, SameResultsAndPositionsAsWithout) {
  deadline guard(20s, "SameResultsAndPositionsAsWithout");
  for (const std::size_t depth : {1u, 2u, 5u}) {
    auto plain = make_pipeline();
    auto ahead = make_pipeline() | td::prefetch(depth);
    for (int call = 0; call < 15; ++call) {  // three epochs of 4 batches and an end each
      auto a = plain.next(), b = ahead.next();
      ASSERT_EQ(a.has_value(), b.has_value()) << "call " << call;
      if (a) {
        ASSERT_TRUE(a->data == b->data && a->count == b->count);
      }
      ASSERT_EQ(plain.position(), ahead.position()) << "call " << call;
    }
    EXPECT_EQ(ahead.stats().consumed, 15u);
    EXPECT_GE(ahead.stats().produced, 15u);
  }
  EXPECT_THROW(make_pipeline() | td::prefetch(0), std::invalid_argument);
}

// Producer 2 ms per batch, consumer 6 ms per batch: with prefetching the consumer waits for the first
// batch and then almost never, against at least 2 ms per batch without. Scheduling noise on a loaded
// machine can only add wait, so the best of up to four attempts is compared, with a bound of 20% of the
// smallest possible wait without (it passed 30 of 30 runs beside three busy loops on two cores).
TEST(Prefetch, OverlapsProductionWithConsumption) {
  deadline guard(60s, "OverlapsProductionWithConsumption");
  constexpr std::size_t batches = 40;
  constexpr auto produce = 2ms, consume = 6ms;
  const auto no_prefetch_wait = batches * std::chrono::nanoseconds(produce);  // a lower bound: sleep_for sleeps at least
  std::chrono::nanoseconds best = std::chrono::nanoseconds::max();
  for (int attempt = 0; attempt < 4 && best >= no_prefetch_wait / 5; ++attempt) {
    auto s = td::from_indices(batches) | td::map([&](std::size_t i) {
               std::this_thread::sleep_for(produce);
               return static_cast<int32>(i);
             }) |
             td::batch<1>() | td::prefetch(2);
    for (std::size_t i = 0; i < batches; ++i) {
      ASSERT_TRUE(s.next());
      std::this_thread::sleep_for(consume);
    }
    const td::prefetch_stats st = s.stats();
    EXPECT_GE(st.producer_time, no_prefetch_wait);
    best = std::min(best, st.consumer_wait);
  }
  EXPECT_LT(best, no_prefetch_wait / 5) << "consumer waited " << best.count() / 1000 << " us in the best attempt; without "
                                        << "prefetch it would wait at least " << no_prefetch_wait.count() / 1000 << " us";
}

struct bad_label : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST(Prefetch, ExceptionInAStageReachesTheConsumer) {
  deadline guard(20s, "ExceptionInAStageReachesTheConsumer");
  auto s = td::from_indices(20) | td::map([](std::size_t i) {
             if (i == 5) throw bad_label("label 42 at index 5 is not a class");
             return static_cast<int32>(i);
           }) |
           td::batch<2>() | td::prefetch(2);
  ASSERT_TRUE(s.next());  // 0, 1
  ASSERT_TRUE(s.next());  // 2, 3
  for (int again = 0; again < 2; ++again) {
    try {
      (void)s.next();
      ADD_FAILURE() << "no exception";
    } catch (const bad_label& e) {
      EXPECT_STREQ(e.what(), "label 42 at index 5 is not a class");
    }
  }
  s.restore({0, 0, {}});  // clears the error and starts over
  const auto b = s.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->data[1], 1);
}

TEST(Prefetch, DestructionMidEpochJoinsPromptlyWithoutLeaks) {
  const std::size_t threads_before = thread_count();
  {
    deadline guard(20s, "DestructionMidEpochJoinsPromptlyWithoutLeaks");
    for (const auto per_element : {0ms, 5ms}) {
      // Fast producer: blocked on a full queue when destroyed. Slow: inside the upstream call.
      std::atomic<std::size_t> made{0};
      auto s = td::from_indices(1000000) | td::map([&, per_element](std::size_t i) {
                 if (per_element.count()) std::this_thread::sleep_for(per_element);
                 ++made;
                 return static_cast<int32>(i);
               }) |
               td::batch<8>() | td::prefetch(3);
      ASSERT_TRUE(s.next());
      const auto t0 = std::chrono::steady_clock::now();
      { auto gone = std::move(s); }  // the destructor of the moved-to stream stops the thread
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
      EXPECT_LT(made.load(), 1000u);  // it stopped rather than ran through the epoch
    }
    auto never_used = make_pipeline() | td::prefetch(2);  // no thread was started: nothing to stop
  }
  EXPECT_EQ(thread_count(), threads_before);
}

TEST(Prefetch, ResumeFromAPositionSavedMidEpoch) {
  deadline guard(20s, "ResumeFromAPositionSavedMidEpoch");
  for (std::size_t before = 0; before < 8; ++before) {
    auto original = make_pipeline() | td::prefetch(2);
    for (std::size_t i = 0; i < before; ++i) (void)original.next();
    const std::string saved = original.position().to_json();
    auto resumed = make_pipeline() | td::prefetch(2);
    (void)resumed.next();  // running: restore stops and restarts it
    resumed.restore(td::stream_position::from_json(saved));
    for (int i = 0; i < 8; ++i) {
      auto a = original.next(), b = resumed.next();
      ASSERT_EQ(a.has_value(), b.has_value()) << saved << ", call " << i;
      if (a) {
        ASSERT_EQ(a->data, b->data) << saved << ", call " << i;
      }
    }
  }
}

TEST(Prefetch, BucketsAndNestedPrefetch) {
  deadline guard(20s, "BucketsAndNestedPrefetch");
  std::vector<std::vector<int32>> data;
  for (int i = 0; i < 40; ++i) data.push_back(std::vector<int32>(static_cast<std::size_t>(1 + i % 7), i));
  const auto make = [&] {
    return td::from_vector(data) | td::prefetch(3) | td::bucket_by_length<td::bucket<3, 2>, td::bucket<8, 4>>() |
           td::prefetch(2);
  };
  auto a = make();
  for (int i = 0; i < 7; ++i) (void)a.next();
  const td::stream_position p = a.position();
  auto b = make();
  b.restore(p);
  for (int i = 0; i < 20; ++i) {
    auto x = a.next(), y = b.next();
    ASSERT_EQ(x.has_value(), y.has_value());
    if (x) {
      ASSERT_EQ(x->index(), y->index());
      std::visit([&](const auto& bx) {
        const auto& by = std::get<std::remove_cvref_t<decltype(bx)>>(*y);
        EXPECT_TRUE(bx.tokens == by.tokens && bx.mask == by.mask && bx.count == by.count);
      }, *x);
    }
  }
}

}  // namespace
