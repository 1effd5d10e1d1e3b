// Definitions of tessel/run/check_finite.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include "tessel/run/check_finite.hpp"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "tessel/plan/describe.hpp"

namespace tessel::run {

std::string non_finite_kernel::to_string() const {
  const char* what = std::isnan(value) ? "NaN" : value > 0 ? "inf" : "-inf";
  return "kernel " + std::to_string(index) + " of " + std::to_string(kernels) + " (" + kernel + ") stored " + what +
         " at element " + std::to_string(element) + " (" + std::to_string(count) + " of its " + std::to_string(size) +
         " elements are not finite)";
}

namespace detail {
struct finite_state {
  std::mutex mutex;
  std::optional<non_finite_kernel> first;
  std::atomic<bool> found{false};
  kernel_observer previous = nullptr;
  bool on = false;
};
finite_state& finite() {
  static finite_state s;
  return s;
}

void check_kernel(const kernel_report& k) noexcept {
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

void check_finite(bool on) {
  detail::finite_state& s = detail::finite();
  std::lock_guard lock(s.mutex);
  if (on == s.on) return;
  s.on = on;
  if (on) s.previous = kernel_observer_slot().exchange(&detail::check_kernel);
  else kernel_observer_slot().store(s.previous), s.previous = nullptr;
}

std::optional<non_finite_kernel> first_non_finite() {
  detail::finite_state& s = detail::finite();
  if (!s.found.load(std::memory_order_relaxed)) return std::nullopt;
  std::lock_guard lock(s.mutex);
  return s.first;
}

void clear_non_finite() {
  detail::finite_state& s = detail::finite();
  std::lock_guard lock(s.mutex);
  s.first.reset();
  s.found.store(false, std::memory_order_relaxed);
}

}  // namespace tessel::run
