#pragma once
// A checked mode, like JAX's jax_debug_nans: after every kernel the executor runs, the buffer it stored is
// searched for a NaN or an infinity, and the first kernel that stored one is kept, named by what it
// computes (plan/describe.hpp), until cleared:
//
//   tessel::run::check_finite(true);
//   auto y = f(x);
//   if (const auto bad = tessel::run::first_non_finite()) std::cerr << bad->to_string() << "\n";
//   // kernel 2 of 5 (row reduce_sum+log f32[128]) stored NaN at element 17 (3 of its 128 elements are not finite)
//
// Process-wide, through run::kernel_observer_slot(): the checker calls the observer that was installed
// before it (the profiler's: enable the profiler first), and check_finite(false) puts that one back.
// f32 and bf16 results are searched; integers hold neither. A kernel that reads a non-finite value and
// stores one is not the first: the kernel kept is the one that made it. Every element of every kernel is
// read once more, so a checked run is slower (a debugging mode, as in JAX).

#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "tessel/plan/describe.hpp"
#include "tessel/run/executor.hpp"

namespace tessel::run {

struct non_finite_kernel {
  std::string kernel;        // plan::describe: "contraction dot_general+add+max f32[128,256]"
  int index = 0;             // its position in its plan
  int kernels = 0;           // the plan's kernel count
  std::size_t element = 0;   // the first non-finite element (row-major)
  std::size_t count = 0;     // how many of its elements are not finite
  std::size_t size = 0;      // its elements
  double value = 0;          // the first non-finite element: NaN, inf or -inf

  std::string to_string() const {
    const char* what = std::isnan(value) ? "NaN" : value > 0 ? "inf" : "-inf";
    return "kernel " + std::to_string(index) + " of " + std::to_string(kernels) + " (" + kernel + ") stored " + what +
           " at element " + std::to_string(element) + " (" + std::to_string(count) + " of its " + std::to_string(size) +
           " elements are not finite)";
  }
};

namespace detail {
struct finite_state {
  std::mutex mutex;
  std::optional<non_finite_kernel> first;
  std::atomic<bool> found{false};
  kernel_observer previous = nullptr;
  bool on = false;
};
inline finite_state& finite() {
  static finite_state s;
  return s;
}

inline void check_kernel(const kernel_report& k) noexcept {
  finite_state& s = finite();
  if (s.previous != nullptr) s.previous(k);
  if (k.plan == nullptr || k.result == nullptr || s.found.load(std::memory_order_relaxed)) return;
  const ir::node& root = k.plan->node(k.plan->kernels[static_cast<std::size_t>(k.index)].root);
  const std::size_t n = root.shape.size();
  std::size_t first = n, count = 0;
  double value = 0;
  if (root.dtype == ir::dtype_code::f32) {
    const auto* v = static_cast<const float*>(k.result);
    for (std::size_t i = 0; i < n; ++i)
      if (!std::isfinite(v[i])) {
        if (count++ == 0) first = i, value = v[i];
      }
  } else if (root.dtype == ir::dtype_code::bf16) {
    const auto* v = static_cast<const std::uint16_t*>(k.result);
    for (std::size_t i = 0; i < n; ++i)
      if ((v[i] & 0x7f80u) == 0x7f80u) {  // exponent all ones: inf or NaN
        if (count++ == 0) first = i, value = std::bit_cast<float>(static_cast<std::uint32_t>(v[i]) << 16);
      }
  }
  if (count == 0) return;
  try {
    std::lock_guard lock(s.mutex);
    if (s.first) return;  // another thread's kernel was first
    s.first = non_finite_kernel{.kernel = plan::describe(*k.plan, k.index), .index = k.index,
                                .kernels = k.plan->kernel_count, .element = first, .count = count, .size = n, .value = value};
    s.found.store(true, std::memory_order_relaxed);
  } catch (...) {
  }
}
}  // namespace detail

// Turns the check on (installing the checker after the current observer) or off (restoring it).
inline void check_finite(bool on) {
  detail::finite_state& s = detail::finite();
  std::lock_guard lock(s.mutex);
  if (on == s.on) return;
  s.on = on;
  if (on) s.previous = kernel_observer_slot().exchange(&detail::check_kernel);
  else kernel_observer_slot().store(s.previous), s.previous = nullptr;
}

// The first kernel since the check began (or since clear_non_finite) that stored a NaN or an infinity.
inline std::optional<non_finite_kernel> first_non_finite() {
  detail::finite_state& s = detail::finite();
  if (!s.found.load(std::memory_order_relaxed)) return std::nullopt;
  std::lock_guard lock(s.mutex);
  return s.first;
}

inline void clear_non_finite() {
  detail::finite_state& s = detail::finite();
  std::lock_guard lock(s.mutex);
  s.first.reset();
  s.found.store(false, std::memory_order_relaxed);
}

}  // namespace tessel::run
