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

#include <cstddef>
#include <optional>
#include <string>

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

  std::string to_string() const;
};

// Turns the check on (installing the checker after the current observer) or off (restoring it).
void check_finite(bool on);

// The first kernel since the check began (or since clear_non_finite) that stored a NaN or an infinity.
std::optional<non_finite_kernel> first_non_finite();

void clear_non_finite();

}  // namespace tessel::run

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/run/check_finite-inl.hpp"
#endif
