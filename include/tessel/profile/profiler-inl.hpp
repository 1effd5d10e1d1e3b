// Definitions of tessel/profile/profiler.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include <algorithm>
#include <cmath>

#include "tessel/plan/describe.hpp"
#include "tessel/profile/profiler.hpp"
#include "tessel/run/executor.hpp"

namespace tessel::profile {
namespace detail {

state& global() {
  static state s;
  return s;
}

thread_local std::string thread_name;

std::int64_t since_origin(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - global().origin).count();
}

// This thread's buffer, registered on first use.
thread_buffer& local_buffer() {
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
std::size_t record(event&& e, thread_buffer*& where, std::uint64_t* generation) noexcept {
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

void record(event&& e) noexcept {
  thread_buffer* unused = nullptr;
  record(std::move(e), unused);
}

void counter_event(const char* name, double value, std::int64_t ts) {
  if (!std::isfinite(value)) return;
  event e('C', "counter", name, ts);
  e.args.emplace_back("value", value);
  record(std::move(e));
}

void observe_kernel(const run::kernel_report& k) noexcept;

}  // namespace detail

void enable(bool on) {
  detail::global();  // fixes the time origin before the first event
  detail::enabled_flag.store(on, std::memory_order_relaxed);
  run::kernel_observer_slot().store(on ? &detail::observe_kernel : nullptr, std::memory_order_relaxed);
}

void set_max_events(std::size_t n) { detail::global().max_events.store(n, std::memory_order_relaxed); }

void clear() {
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

void set_thread_name(std::string_view name) {
  detail::thread_name = std::string(name);
  if (!enabled()) return;
  detail::thread_buffer& b = detail::local_buffer();
  std::lock_guard lock(b.mutex);
  b.name = std::string(name);
}

void scope::begin(std::string_view name, const char* category) noexcept {
  try {
    index_ = detail::record(detail::event('X', category, std::string(name), detail::since_origin(clock::now())),
                            buffer_, &generation_);
  } catch (...) {  // the name's copy: drop the event
    buffer_ = nullptr;
  }
}

void scope::end() noexcept {
  const std::int64_t now = detail::since_origin(clock::now());
  std::lock_guard lock(buffer_->mutex);
  if (buffer_->generation == generation_ && index_ < buffer_->events.size())
    buffer_->events[index_].dur_ns = now - buffer_->events[index_].ts_ns;
}

void detail::kernel_event(std::string_view name, clock::time_point start, clock::time_point end, kernel_args args) noexcept {
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
clock::time_point at(std::int64_t steady_ns) {  // run::kernel_report's times
  return clock::time_point(std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(steady_ns)));
}

// A kernel event is named by what the kernel computes: "contraction dot_general+add+max f32[128,256]".
void observe_kernel(const run::kernel_report& k) noexcept {
  if (k.plan == nullptr || !enabled()) {
    kernel_event(k.kind, at(k.start_ns), at(k.end_ns), {.bytes = k.bytes});
    return;
  }
  try {
    kernel_event(plan::describe(*k.plan, k.index), at(k.start_ns), at(k.end_ns), {.bytes = k.bytes});
  } catch (...) {
  }
}
}  // namespace detail

void detail::instant(std::string_view name) noexcept {
  try {
    detail::record(detail::event('i', "mark", std::string(name), detail::since_origin(clock::now())));
  } catch (...) {
  }
}

void detail::counter(std::string_view name, double value) noexcept {
  if (!std::isfinite(value)) return;
  try {
    detail::event e('C', "counter", std::string(name), detail::since_origin(clock::now()));
    e.args.emplace_back("value", value);
    detail::record(std::move(e));
  } catch (...) {
  }
}

void detail::add_input_wait(std::chrono::nanoseconds wait) noexcept {
  detail::global().input_wait_ns.fetch_add(wait.count(), std::memory_order_relaxed);
}

void detail::record_peak_memory(std::uint64_t bytes) noexcept {
  std::atomic<std::uint64_t>& peak = detail::global().peak_memory;
  std::uint64_t seen = peak.load();
  while (seen < bytes && !peak.compare_exchange_weak(seen, bytes)) {
  }
  try {
    detail::counter_event("peak_memory_bytes", static_cast<double>(std::max(seen, bytes)), detail::since_origin(clock::now()));
  } catch (...) {
  }
}

void detail::mark_warmup_end() noexcept {
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

void step::end() noexcept {
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

std::string summary::to_string() const {
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

std::vector<step_record> steps() {
  detail::state& s = detail::global();
  std::lock_guard lock(s.steps_mutex);
  std::vector<step_record> out = s.steps;
  if (!s.warmup_done)  // no warm-up was marked: every step is steady state
    for (step_record& r : out) r.warmup = false;
  return out;
}

summary summarize() {
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
