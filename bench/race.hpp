#pragma once
// Side-by-side timing for the ratio benchmarks. This machine is shared and noisy: absolute times drift,
// ratios measured together hold. So every Google Benchmark iteration runs each contestant once, as a
// block of calls of a few milliseconds, one after the other; load changes hit all of them alike. A
// ratio is the ratio of the contestants' best per-call block times over all iterations: other users'
// work only ever adds time (a stalled thread of a statically split peer can add a whole time slice),
// so each contestant's fastest block is the estimate of its speed on an otherwise idle machine.
//
//   tessel_bench::race r(3);
//   for (auto _ : state) {
//     state.SetIterationTime(r.run(0, [&] { ours(); }, reps));   // the headline time is ours
//     r.run(1, [&] { peer(); }, reps);
//   }
//   state.counters["vs_peer"] = r.speedup(0, 1);   // peer time / our time: > 1 means faster than the peer
//   ...
//   BENCHMARK(f)->UseManualTime()->Iterations(tessel_bench::rounds);   // see `rounds`

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include <tessel/kernels/thread_pool.hpp>

namespace tessel_bench {

class race {
 public:
  explicit race(std::size_t contestants) : times_(contestants) {}

  // Calls fn reps times; records and returns seconds per call, divided by `units` (the amount of
  // work done per call relative to the others', for contestants whose call does a different amount).
  template <class F>
  double run(std::size_t contestant, F&& fn, int reps = 1, double units = 1.0) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    const double per_call = dt.count() / reps / units;
    times_[contestant].push_back(per_call);
    return per_call;
  }

  // run() for a machine limit (a peak loop): first a wait, untimed, for the threads the last contestant
  // left spinning to sleep (libgomp's workers spin for milliseconds after oneDNN's or libtorch's parallel
  // region), or they hold a core the loop wants. AMD EPYC, 2 threads: run right after oneDNN, the
  // vdpbf16ps loop measured 0.65-0.8 of its rate alone, and oneDNN and tessel both ran at "1.2-1.9x the
  // peak". The implementations themselves race warm, one block right after the other, as a program
  // calls them; a wait before each of them measured a vCPU woken from idle instead.
  template <class F>
  double run_settled(std::size_t contestant, F&& fn, int reps = 1, double units = 1.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return run(contestant, std::forward<F>(fn), reps, units);
  }

  // Seconds per call of the contestant's fastest block.
  double best(std::size_t contestant) const {
    const std::vector<double>& t = times_[contestant];
    return t.empty() ? 0 : *std::min_element(t.begin(), t.end());
  }

  // Seconds per call of the contestant's median block (the upper middle one of an even count).
  double median(std::size_t contestant) const {
    std::vector<double> t = times_[contestant];
    if (t.empty()) return 0;
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    return t[t.size() / 2];
  }

  // How many times faster `ours` is than `reference` (reference time / our time).
  double speedup(std::size_t ours, std::size_t reference) const { return best(reference) / best(ours); }

 private:
  std::vector<std::vector<double>> times_;
};

// Google Benchmark iterations (rounds) per benchmark. Fixed, because each iteration runs every
// contestant while the time it reports is ours alone: left to itself, Google Benchmark would size the
// run by that time and take several times longer than it thinks.
inline constexpr int rounds = 12;

// Calls per block so that a block lasts about `block_seconds` (one call takes `seconds_per_call`).
inline int reps_for(double seconds_per_call, double block_seconds = 4e-3) {
  return std::max(1, static_cast<int>(block_seconds / std::max(seconds_per_call, 1e-9)));
}

// Seconds of one call of fn, after a warm-up call.
template <class F>
double time_once(F&& fn) {
  fn();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// body(begin, end) on `threads` threads of tessel's host pool (the pool tessel's kernels run on), over
// [0, n) cut into `threads` equal contiguous parts: the static split of a STREAM kernel.
template <class F>
void split(std::size_t threads, std::size_t n, F&& body) {
  auto& pool = tessel::kernels::thread_pool::host();
  threads = std::min(threads, pool.size());
  pool.parallel_for(threads, 1, [&](std::size_t first, std::size_t last, std::size_t) {
    for (std::size_t part = first; part < last; ++part) body(n * part / threads, n * (part + 1) / threads);
  });
}

// The machine's limits (peaks.cpp, bf16_peak.cpp). Each runs `flops` of register-only work split
// over `threads` threads and returns nothing; time it to get the peak.
void fma_f32_loop(std::uint64_t flops, std::size_t threads);     // vfmadd231ps zmm: 32 flops each
void dpbf16_loop(std::uint64_t flops, std::size_t threads);      // vdpbf16ps zmm: 64 flops each
// tdpbf16ps on four accumulator tiles (16 x 16 x 32: 16384 flops each), where machine::amx_bf16; false
// (nothing run) elsewhere.
bool amx_loop(std::uint64_t flops, std::size_t threads);

}  // namespace tessel_bench
