#pragma once
// What jit makes of a function, as text (like XLA's --xla_dump_to): dump(f, args...) prints the host plan
// (plan/dump.hpp), dump<Target>(f, args...) the same program laid out on a target, checked at compile
// time (plan/target_view.hpp). The argument values are not used, only their types.
//
//   std::cout << tessel::dump(f, x, w, b);
//   std::cout << tessel::dump<tessel::targets::tpu_v5e>(f, x, w, b);

#include <string>

#include "tessel/jit.hpp"
#include "tessel/plan/dump.hpp"
#include "tessel/plan/target_view.hpp"

namespace tessel {

// The plan jit makes for f on arguments of these types.
template <class F, class... A>
std::string dump(F f, const A&...) {
  using t = typename decltype(jit(f))::template traced_for<A...>;
  return dump(t::plan);
}

// The same, laid out on Target (a compile error if a kernel cannot fit its VMEM).
template <target Target, class F, class... A>
std::string dump(F f, const A&...) {
  using t = typename decltype(jit(f))::template traced_for<A...>;
  static_assert(check_fits<Target, t::plan>());
  return dump_on<Target>(t::plan);
}

}  // namespace tessel
