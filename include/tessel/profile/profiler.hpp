#pragma once
// The profiler: named scopes, kernel runs, counters and training steps, recorded per thread and written
// as a Chrome trace (io/chrome_trace.hpp) that Perfetto and chrome://tracing open.
//
//   tessel::profile::enable();
//   for (std::uint64_t i = 0; auto b = pipeline.next(); ++i) {   // prefetch feeds the input wait itself
//     tessel::profile::step s(i, 128);                           // 128 samples: throughput in samples/s
//     { tessel::profile::scope fwd("forward"); ... }
//     if (i == 10) tessel::profile::mark_warmup_end();           // steps 0-9 (ended) were warm-up
//   }
//   tessel::profile::record_peak_memory(plan_peak_bytes);
//   std::cout << tessel::profile::summarize().to_string();
//   tessel::profile::write_chrome_trace("train.trace.json");     // io/chrome_trace.hpp
//
// Disabled (the default), every entry point is one relaxed load of a global flag and a branch: a
// disabled scope reads no clock and takes no lock (bench/profiler_overhead.cpp measures it). Enabled,
// each thread appends to its own buffer under its own lock (uncontended except while a trace is
// written), so scopes on the prefetch thread and on the executor's threads are safe. Buffers outlive
// their threads until clear(). At most max_events() events are kept; later ones are counted as dropped.
// Recording never throws: an event that cannot be stored (out of memory) is dropped.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::profile {

using clock = std::chrono::steady_clock;

// What a kernel_event may say beyond its time: the plan's numbers for it (0 = unknown, not written).
struct kernel_args {
  double flops = 0;
  double bytes = 0;
  double estimated_ns = 0;  // the target model's estimate, shown beside the measured duration
};

// One step as step's destructor recorded it.
struct step_record {
  std::uint64_t index = 0;
  clock::time_point start, end;
  std::chrono::nanoseconds duration{};    // of the step scope
  std::chrono::nanoseconds interval{};    // from the previous step's end to this one's (the first: duration + wait)
  std::chrono::nanoseconds input_wait{};  // add_input_wait since the previous step's end
  double items = 0;                       // samples or tokens
  bool warmup = false;                    // ended before mark_warmup_end(); false for all until it is called
};

namespace detail {

inline std::atomic<bool> enabled_flag{false};

struct event {
  event(char ph, const char* cat, std::string n, std::int64_t ts, std::int64_t dur = 0)
      : phase(ph), category(cat), name(std::move(n)), ts_ns(ts), dur_ns(dur) {}
  char phase;                 // 'X' complete, 'i' instant, 'C' counter
  char instant_scope = 't';   // 'i' only: 'g' global, 'p' process, 't' thread
  const char* category;       // a string literal
  std::string name;
  std::int64_t ts_ns;         // since the profiler's origin
  std::int64_t dur_ns;        // 'X' only
  std::vector<std::pair<const char*, double>> args;  // literal keys; a counter's values
};

struct thread_buffer {
  std::mutex mutex;
  std::uint64_t tid = 0;
  std::string name;
  std::vector<event> events;
  std::uint64_t generation = 0;  // bumped by clear(), so a scope open across it does not write
};

struct state {
  clock::time_point origin = clock::now();
  std::atomic<std::size_t> events{0}, dropped{0};
  std::atomic<std::size_t> max_events{std::size_t{1} << 22};
  std::atomic<std::int64_t> input_wait_ns{0};
  std::atomic<std::uint64_t> peak_memory{0};

  std::mutex buffers_mutex;  // never held while taking a buffer's lock in the other order
  std::vector<std::shared_ptr<thread_buffer>> buffers;
  std::uint64_t next_tid = 1;

  std::mutex steps_mutex;
  std::vector<step_record> steps;
  bool warmup_done = false;
  bool any_step = false;
  clock::time_point last_step_end{};
  std::int64_t wait_at_last_step = 0;
};

// The one recorder state; its time origin is fixed on first use.
state& global();

std::int64_t since_origin(clock::time_point t);

// Appends e to this thread's buffer; returns its index, or SIZE_MAX if dropped.
std::size_t record(event&& e, thread_buffer*& where, std::uint64_t* generation = nullptr) noexcept;

void record(event&& e) noexcept;

void counter_event(const char* name, double value, std::int64_t ts);

}  // namespace detail

// ---- switching ---------------------------------------------------------------------------------

// Starts (or stops) recording, and the executor's reports of the kernels it runs. Events already recorded
// stay until clear().
void enable(bool on = true);
inline void disable() { enable(false); }
inline bool enabled() noexcept { return detail::enabled_flag.load(std::memory_order_relaxed); }

// At most this many events are kept (default 4M, about 300 MB); later ones are counted in summary().
void set_max_events(std::size_t n);

// Forgets every event, step, input wait, peak memory and the warm-up mark, and the buffers of threads
// that have ended. Scopes open across a clear() record nothing.
void clear();

// Names the calling thread in the trace ("M" thread_name event); default "thread <tid>".
void set_thread_name(std::string_view name);

// The recording halves of the entry points below (profiler-inl.hpp), called only while profiling is
// enabled: disabled, each entry point is the load and branch the top of this file promises.
namespace detail {
void kernel_event(std::string_view name, clock::time_point start, clock::time_point end, kernel_args args) noexcept;
void instant(std::string_view name) noexcept;
void counter(std::string_view name, double value) noexcept;
void add_input_wait(std::chrono::nanoseconds wait) noexcept;
void record_peak_memory(std::uint64_t bytes) noexcept;
void mark_warmup_end() noexcept;
}  // namespace detail

// ---- events ------------------------------------------------------------------------------------

// A named span of the calling thread, from construction to destruction ("X" event). The name is copied
// when profiling is enabled; when disabled, the scope costs a load and a branch.
//   { tessel::profile::scope s("optimizer"); update(params); }
class scope {
 public:
  explicit scope(std::string_view name, const char* category = "scope") noexcept {
    if (detail::enabled_flag.load(std::memory_order_relaxed)) [[unlikely]]
      begin(name, category);
  }
  ~scope() {
    if (buffer_) [[unlikely]]
      end();
  }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

 private:
  void begin(std::string_view name, const char* category) noexcept;
  void end() noexcept;

  detail::thread_buffer* buffer_ = nullptr;
  std::size_t index_;
  std::uint64_t generation_;
};

// A kernel run measured by its caller (the executor): an "X" event of category "kernel" on the calling
// thread, with the plan's flops, bytes and estimate as args when given. end >= start.
inline void kernel_event(std::string_view name, clock::time_point start, clock::time_point end, kernel_args args = {}) noexcept {
  if (enabled()) [[unlikely]]
    detail::kernel_event(name, start, end, args);
}

// A moment of the calling thread ("i" event).
inline void instant(std::string_view name) noexcept {
  if (enabled()) [[unlikely]]
    detail::instant(name);
}

// A named value over time ("C" event: a counter track). Non-finite values are not recorded.
inline void counter(std::string_view name, double value) noexcept {
  if (enabled()) [[unlikely]]
    detail::counter(name, value);
}

// Time the training loop waited for its input; prefetch reports its consumer's waits here itself.
inline void add_input_wait(std::chrono::nanoseconds wait) noexcept {
  if (enabled()) [[unlikely]]
    detail::add_input_wait(wait);
}

// The peak memory of the run (bytes): the plan's estimate or a measurement. Keeps the maximum reported
// and records a "peak_memory_bytes" counter.
inline void record_peak_memory(std::uint64_t bytes) noexcept {
  if (enabled()) [[unlikely]]
    detail::record_peak_memory(bytes);
}

// Ends the warm-up: steps that have ended so far are warm-up (compilation, first touches), later ones
// steady state, which summarize() reports. Records a global "i" event "warmup_end". Later calls do
// nothing. Without a call, every step is steady state.
inline void mark_warmup_end() noexcept {
  if (enabled()) [[unlikely]]
    detail::mark_warmup_end();
}

// One training step, from construction to destruction: an "X" event "step" (args: step, items), a
// step_record, and counters step_time_ms, input_wait_ms and throughput (items per second of interval).
// `items`: the samples (or tokens) the step processes.
class step {
 public:
  explicit step(std::uint64_t index, double items = 0) noexcept {
    if (detail::enabled_flag.load(std::memory_order_relaxed)) [[unlikely]] {
      active_ = true;
      index_ = index;
      items_ = items;
      start_ = clock::now();
    }
  }
  ~step() {
    if (active_) [[unlikely]]
      end();
  }
  step(const step&) = delete;
  step& operator=(const step&) = delete;

 private:
  void end() noexcept;

  bool active_ = false;
  std::uint64_t index_;
  double items_;
  clock::time_point start_;
};

// ---- summary -----------------------------------------------------------------------------------

// The steady-state numbers (steps after mark_warmup_end(); all steps if it was never called).
struct summary {
  std::uint64_t steps = 0;         // all recorded
  std::uint64_t warmup_steps = 0;  // of which before the warm-up end
  std::chrono::nanoseconds step_mean{}, step_median{}, step_min{}, step_max{};
  double items_per_second = 0;             // sum of items / sum of intervals
  std::chrono::nanoseconds input_wait{};   // total
  double input_wait_fraction = 0;          // of the sum of intervals
  std::uint64_t peak_memory_bytes = 0;
  std::uint64_t events = 0, dropped_events = 0;

  // Several lines, e.g. "steps: 100 (10 warm-up)\nstep time: mean 12.3 ms, median ...".
  std::string to_string() const;
};

// Every step recorded since the last clear(), in order.
std::vector<step_record> steps();

summary summarize();

}  // namespace tessel::profile

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/profile/profiler-inl.hpp"
#endif
