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

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessel/plan/describe.hpp"
#include "tessel/run/executor.hpp"

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

inline state& global() {
  static state s;
  return s;
}

inline thread_local std::string thread_name;

inline std::int64_t since_origin(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - global().origin).count();
}

// This thread's buffer, registered on first use.
inline thread_buffer& local_buffer() {
  thread_local const std::shared_ptr<thread_buffer> buffer = [] {
    auto b = std::make_shared<thread_buffer>();
    state& s = global();
    std::lock_guard lock(s.buffers_mutex);
    b->tid = s.next_tid++;
    b->name = thread_name.empty() ? "thread " + std::to_string(b->tid) : thread_name;
    s.buffers.push_back(b);
    return b;
  }();
  return *buffer;
}

// Appends e to this thread's buffer; returns its index, or SIZE_MAX if dropped.
inline std::size_t record(event&& e, thread_buffer*& where, std::uint64_t* generation = nullptr) noexcept {
  state& s = global();
  try {
    if (s.events.fetch_add(1, std::memory_order_relaxed) >= s.max_events.load(std::memory_order_relaxed)) {
      s.events.fetch_sub(1, std::memory_order_relaxed);
      s.dropped.fetch_add(1, std::memory_order_relaxed);
      return SIZE_MAX;
    }
    thread_buffer& b = local_buffer();
    std::lock_guard lock(b.mutex);
    b.events.push_back(std::move(e));
    where = &b;
    if (generation) *generation = b.generation;
    return b.events.size() - 1;
  } catch (...) {
    s.dropped.fetch_add(1, std::memory_order_relaxed);
    return SIZE_MAX;
  }
}

inline void record(event&& e) noexcept {
  thread_buffer* unused = nullptr;
  record(std::move(e), unused);
}

inline void counter_event(const char* name, double value, std::int64_t ts) {
  if (!std::isfinite(value)) return;
  event e('C', "counter", name, ts);
  e.args.emplace_back("value", value);
  record(std::move(e));
}

}  // namespace detail

// ---- switching ---------------------------------------------------------------------------------

namespace detail {
inline void observe_kernel(const run::kernel_report& k) noexcept;
}

// Starts (or stops) recording, and the executor's reports of the kernels it runs. Events already recorded
// stay until clear().
inline void enable(bool on = true) {
  detail::global();  // fixes the time origin before the first event
  detail::enabled_flag.store(on, std::memory_order_relaxed);
  run::kernel_observer_slot().store(on ? &detail::observe_kernel : nullptr, std::memory_order_relaxed);
}
inline void disable() { enable(false); }
inline bool enabled() noexcept { return detail::enabled_flag.load(std::memory_order_relaxed); }

// At most this many events are kept (default 4M, about 300 MB); later ones are counted in summary().
inline void set_max_events(std::size_t n) { detail::global().max_events.store(n, std::memory_order_relaxed); }

// Forgets every event, step, input wait, peak memory and the warm-up mark, and the buffers of threads
// that have ended. Scopes open across a clear() record nothing.
inline void clear() {
  detail::state& s = detail::global();
  {
    std::lock_guard lock(s.buffers_mutex);
    std::erase_if(s.buffers, [](const auto& b) { return b.use_count() == 1; });  // only we hold it: its thread ended
    for (const auto& b : s.buffers) {
      std::lock_guard buffer_lock(b->mutex);
      b->events.clear();
      ++b->generation;
    }
  }
  s.events.store(0);
  s.dropped.store(0);
  s.peak_memory.store(0);
  std::lock_guard lock(s.steps_mutex);
  s.steps.clear();
  s.warmup_done = false;
  s.any_step = false;
  s.input_wait_ns.store(0);
  s.wait_at_last_step = 0;
}

// Names the calling thread in the trace ("M" thread_name event); default "thread <tid>".
inline void set_thread_name(std::string_view name) {
  detail::thread_name = std::string(name);
  if (!enabled()) return;
  detail::thread_buffer& b = detail::local_buffer();
  std::lock_guard lock(b.mutex);
  b.name = std::string(name);
}

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
  void begin(std::string_view name, const char* category) noexcept {
    try {
      index_ = detail::record(detail::event('X', category, std::string(name), detail::since_origin(clock::now())),
                              buffer_, &generation_);
    } catch (...) {  // the name's copy: drop the event
      buffer_ = nullptr;
    }
  }
  void end() noexcept {
    const std::int64_t now = detail::since_origin(clock::now());
    std::lock_guard lock(buffer_->mutex);
    if (buffer_->generation == generation_ && index_ < buffer_->events.size())
      buffer_->events[index_].dur_ns = now - buffer_->events[index_].ts_ns;
  }

  detail::thread_buffer* buffer_ = nullptr;
  std::size_t index_;
  std::uint64_t generation_;
};

// A kernel run measured by its caller (the executor): an "X" event of category "kernel" on the calling
// thread, with the plan's flops, bytes and estimate as args when given. end >= start.
inline void kernel_event(std::string_view name, clock::time_point start, clock::time_point end, kernel_args args = {}) noexcept {
  if (!enabled()) [[likely]]
    return;
  try {
    detail::event e('X', "kernel", std::string(name), detail::since_origin(start),
                    std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
    if (args.flops > 0) e.args.emplace_back("flops", args.flops);
    if (args.bytes > 0) e.args.emplace_back("bytes", args.bytes);
    if (args.estimated_ns > 0) e.args.emplace_back("estimated_us", args.estimated_ns / 1000);
    detail::record(std::move(e));
  } catch (...) {
  }
}

namespace detail {
// A kernel event is named by what the kernel computes: "contraction dot_general+add+max f32[128,256]".
inline void observe_kernel(const run::kernel_report& k) noexcept {
  if (k.plan == nullptr || !enabled()) {
    kernel_event(k.kind, k.start, k.end, {.bytes = k.bytes});
    return;
  }
  try {
    kernel_event(plan::describe(*k.plan, k.index), k.start, k.end, {.bytes = k.bytes});
  } catch (...) {
  }
}
}  // namespace detail

// A moment of the calling thread ("i" event).
inline void instant(std::string_view name) noexcept {
  if (!enabled()) [[likely]]
    return;
  try {
    detail::record(detail::event('i', "mark", std::string(name), detail::since_origin(clock::now())));
  } catch (...) {
  }
}

// A named value over time ("C" event: a counter track). Non-finite values are not recorded.
inline void counter(std::string_view name, double value) noexcept {
  if (!enabled()) [[likely]]
    return;
  if (!std::isfinite(value)) return;
  try {
    detail::event e('C', "counter", std::string(name), detail::since_origin(clock::now()));
    e.args.emplace_back("value", value);
    detail::record(std::move(e));
  } catch (...) {
  }
}

// Time the training loop waited for its input; prefetch reports its consumer's waits here itself.
inline void add_input_wait(std::chrono::nanoseconds wait) noexcept {
  if (!enabled()) [[likely]]
    return;
  detail::global().input_wait_ns.fetch_add(wait.count(), std::memory_order_relaxed);
}

// The peak memory of the run (bytes): the plan's estimate or a measurement. Keeps the maximum reported
// and records a "peak_memory_bytes" counter.
inline void record_peak_memory(std::uint64_t bytes) noexcept {
  if (!enabled()) [[likely]]
    return;
  std::atomic<std::uint64_t>& peak = detail::global().peak_memory;
  std::uint64_t seen = peak.load();
  while (seen < bytes && !peak.compare_exchange_weak(seen, bytes)) {
  }
  try {
    detail::counter_event("peak_memory_bytes", static_cast<double>(std::max(seen, bytes)), detail::since_origin(clock::now()));
  } catch (...) {
  }
}

// Ends the warm-up: steps that have ended so far are warm-up (compilation, first touches), later ones
// steady state, which summarize() reports. Records a global "i" event "warmup_end". Later calls do
// nothing. Without a call, every step is steady state.
inline void mark_warmup_end() noexcept {
  if (!enabled()) [[likely]]
    return;
  detail::state& s = detail::global();
  {
    std::lock_guard lock(s.steps_mutex);
    if (s.warmup_done) return;
    s.warmup_done = true;
  }
  try {
    detail::event e('i', "mark", "warmup_end", detail::since_origin(clock::now()));
    e.instant_scope = 'g';
    detail::record(std::move(e));
  } catch (...) {
  }
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
  void end() noexcept {
    using std::chrono::nanoseconds;
    const clock::time_point now = clock::now();
    detail::state& s = detail::global();
    step_record r;
    r.index = index_;
    r.start = start_;
    r.end = now;
    r.items = items_;
    r.duration = std::chrono::duration_cast<nanoseconds>(now - start_);
    try {
      std::lock_guard lock(s.steps_mutex);
      const std::int64_t wait = s.input_wait_ns.load(std::memory_order_relaxed);
      r.input_wait = nanoseconds(wait - s.wait_at_last_step);
      r.interval = s.any_step ? std::chrono::duration_cast<nanoseconds>(now - s.last_step_end) : r.duration + r.input_wait;
      r.warmup = !s.warmup_done;
      s.wait_at_last_step = wait;
      s.last_step_end = now;
      s.any_step = true;
      s.steps.push_back(r);
    } catch (...) {
      return;
    }
    try {
      const std::int64_t ts = detail::since_origin(start_), end_ts = detail::since_origin(now);
      detail::event e('X', "step", "step", ts, end_ts - ts);
      e.args = {{"step", static_cast<double>(index_)}, {"items", items_}};
      detail::record(std::move(e));
      detail::counter_event("step_time_ms", static_cast<double>(r.duration.count()) / 1e6, end_ts);
      detail::counter_event("input_wait_ms", static_cast<double>(r.input_wait.count()) / 1e6, end_ts);
      if (items_ > 0 && r.interval.count() > 0)
        detail::counter_event("throughput", items_ * 1e9 / static_cast<double>(r.interval.count()), end_ts);
    } catch (...) {
    }
  }

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
  std::string to_string() const {
    const auto ms = [](std::chrono::nanoseconds d) {
      std::string s = std::to_string(static_cast<double>(d.count()) / 1e6);
      return s.substr(0, s.find('.') + 4) + " ms";
    };
    std::string out = "steps: " + std::to_string(steps) + " (" + std::to_string(warmup_steps) + " warm-up)\n";
    out += "step time: mean " + ms(step_mean) + ", median " + ms(step_median) + ", min " + ms(step_min) + ", max " +
           ms(step_max) + "\n";
    out += "throughput: " + std::to_string(items_per_second) + " items/s\n";
    out += "input wait: " + ms(input_wait) + " (" + std::to_string(input_wait_fraction * 100) + "% of step time)\n";
    out += "peak memory: " + std::to_string(peak_memory_bytes) + " bytes\n";
    out += "events: " + std::to_string(events) + " (" + std::to_string(dropped_events) + " dropped)\n";
    return out;
  }
};

// Every step recorded since the last clear(), in order.
inline std::vector<step_record> steps() {
  detail::state& s = detail::global();
  std::lock_guard lock(s.steps_mutex);
  std::vector<step_record> out = s.steps;
  if (!s.warmup_done)  // no warm-up was marked: every step is steady state
    for (step_record& r : out) r.warmup = false;
  return out;
}

inline summary summarize() {
  detail::state& s = detail::global();
  summary out;
  out.events = s.events.load();
  out.dropped_events = s.dropped.load();
  out.peak_memory_bytes = s.peak_memory.load();
  const std::vector<step_record> all = steps();
  out.steps = all.size();
  std::vector<std::chrono::nanoseconds> durations;
  std::chrono::nanoseconds total_interval{};
  double items = 0;
  for (const step_record& r : all) {
    if (r.warmup) {
      ++out.warmup_steps;
      continue;
    }
    durations.push_back(r.duration);
    total_interval += r.interval;
    out.input_wait += r.input_wait;
    items += r.items;
  }
  if (durations.empty()) return out;
  std::chrono::nanoseconds sum{};
  for (const auto d : durations) sum += d;
  out.step_mean = sum / static_cast<std::int64_t>(durations.size());
  std::sort(durations.begin(), durations.end());
  out.step_median = durations[durations.size() / 2];
  out.step_min = durations.front();
  out.step_max = durations.back();
  if (total_interval.count() > 0) {
    out.items_per_second = items * 1e9 / static_cast<double>(total_interval.count());
    out.input_wait_fraction = static_cast<double>(out.input_wait.count()) / static_cast<double>(total_interval.count());
  }
  return out;
}

}  // namespace tessel::profile
