#pragma once
// Pipeline schedules as types: every device's sequence of work over S stages and M microbatches, fixed in
// constant evaluation, with the timeline it gives at unit costs, its bubble and its activations in flight.
// tessel::pipeline (pipeline.hpp) runs the sequences as they are; nothing is scheduled at run time.
//
//   constexpr auto t = pipeline_schedule::make<schedules::one_f_one_b, 4, 8>();   // 4 stages, 8 microbatches
//   t.bubble();            // 3/11: (S-1)/(M+S-1)
//   t.peak_in_flight();    // 4: 1F1B keeps at most S microbatches' inputs where GPipe keeps M (peak_on(d): device d's)
//
// The work: forward F(v, m) of virtual stage v on microbatch m; backward B(v, m), the input's cotangent
// and, unless the schedule splits it, the weights' too; W(v, m), the weights' cotangent where it is split
// (zero bubble). Virtual stage v runs on device v mod S (circular schedules: R virtual stages per device,
// MaxText's layout). Every device does a virtual stage's backwards in microbatch order, so its gradient
// is summed in the order one device accumulating the microbatches would sum it.
// A stage keeps its input from F until its weights' cotangent is taken (B, or W where split); a split
// backward also keeps the output's cotangent from B to W (but the last stage's, which W recomputes from
// the loss). That is what "in flight" counts.

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel {
namespace schedules {

// GPipe: all forwards, then all backwards. Bubble (S-1)/(M+S-1); M microbatches' inputs in flight.
struct gpipe {
  static constexpr std::string_view name = "gpipe";
  static constexpr std::size_t repeats = 1, min_microbatches_per_stage = 0;
  static constexpr bool split_backward = false, one_forward_one_backward = false;
};
// Circular (MaxText's): R repeats of the S stages, virtual stage v on device v mod S; each device runs its
// R virtual stages in turn over all microbatches, forwards then backwards. Bubble (S-1)/(R M+S-1); needs
// M >= S so that a microbatch is back at the first device when that device starts its next repeat.
template <std::size_t R>
struct circular {
  static constexpr std::string_view name = "circular";
  static constexpr std::size_t repeats = R, min_microbatches_per_stage = 1;
  static constexpr bool split_backward = false, one_forward_one_backward = false;
};
// 1F1B (PipeDream-flush): S-1-s warm-up forwards on device s, then one forward and one backward in turn,
// then the remaining backwards. GPipe's bubble, at most S microbatches in flight; needs M >= S.
struct one_f_one_b {
  static constexpr std::string_view name = "1f1b";
  static constexpr std::size_t repeats = 1, min_microbatches_per_stage = 1;
  static constexpr bool split_backward = false, one_forward_one_backward = true;
};
// Zero bubble (after ZB-H1, Qi et al. 2023): 1F1B's forwards and input backwards, with each weight backward
// deferred into the time the device would otherwise wait (at unit costs), and taken before a forward that
// would hold more inputs than S-s+1 on device s (1F1B holds S-s). At S=4, M=8 its bubble is 0.17 against
// 1F1B's 0.27, but B and W each recompute the stage's forward (cost_of), so its span is 48 units against
// 44: it wins where a forward is cheap beside the weights' cotangent.
struct zero_bubble {
  static constexpr std::string_view name = "zero_bubble";
  static constexpr std::size_t repeats = 1, min_microbatches_per_stage = 1;
  static constexpr bool split_backward = true, one_forward_one_backward = true;
};

// What a schedule type gives: its name, its repeats (virtual stages per device), the fewest microbatches
// per stage it needs, whether it splits the backward, and its order: every forward first, or (after S-1-s
// warm-up forwards on device s) one forward and one backward in turn.
template <class T>
concept Schedule = requires {
  { T::name } -> std::convertible_to<std::string_view>;
  { T::repeats } -> std::convertible_to<std::size_t>;
  { T::min_microbatches_per_stage } -> std::convertible_to<std::size_t>;
  { T::split_backward } -> std::convertible_to<bool>;
  { T::one_forward_one_backward } -> std::convertible_to<bool>;
};

}  // namespace schedules

namespace pipeline_schedule {

enum class work : std::uint8_t { forward, backward, weight };

struct step {
  work kind = work::forward;
  std::uint16_t stage = 0;       // the virtual stage
  std::uint16_t microbatch = 0;
  std::uint32_t begin = 0, end = 0;  // at unit costs (cost_of)
};

// Unit costs of the predicted timeline, in forwards of a stage: a stage keeps only its input, so each
// backward first recomputes its forward (GPipe's re-materialization); then the input's and the weights'
// cotangents cost about a forward each. A backward is 3; split, B and W are 2 each.
constexpr std::uint32_t cost_of(work k, bool split) { return k == work::forward ? 1 : split ? 2 : 3; }

template <std::size_t S, std::size_t V, std::size_t M>
struct table {
  static constexpr std::size_t stages = S, virtual_stages = V, microbatches = M;
  static constexpr std::size_t per_device = (V / S) * M * 3;
  bool split = false;
  bool complete = false;  // false: the sequences deadlock (no schedule here does)
  std::array<std::array<step, per_device>, S> steps{};
  std::array<std::size_t, S> count{};

  constexpr std::uint32_t span() const {
    std::uint32_t first = ~0u, last = 0;
    for (std::size_t d = 0; d < S; ++d)
      if (count[d] != 0) first = std::min(first, steps[d][0].begin), last = std::max(last, steps[d][count[d] - 1].end);
    return last - first;
  }
  constexpr std::uint32_t busy(std::size_t d) const {
    std::uint32_t b = 0;
    for (std::size_t i = 0; i < count[d]; ++i) b += steps[d][i].end - steps[d][i].begin;
    return b;
  }
  // The pipeline's idle share: 1 - (work of all devices) / (S x the span from the first work to the last).
  constexpr double bubble() const {
    std::uint32_t total = 0;
    for (std::size_t d = 0; d < S; ++d) total += busy(d);
    return 1.0 - static_cast<double>(total) / (static_cast<double>(S) * span());
  }
  // The most microbatch activations a device holds at once: a stage's input from F to its weights'
  // cotangent, and a split backward's output cotangent from B to W (in units of one activation). Weighed:
  // the bytes, where the first stage's input (the batch's data) is `first_input` bytes and any other
  // input or cotangent `activation` bytes.
  constexpr std::size_t peak_on(std::size_t d, std::size_t first_input = 1, std::size_t activation = 1) const {
    std::size_t held = 0, most = 0;
    for (std::size_t i = 0; i < count[d]; ++i) {
      const step& s = steps[d][i];
      const std::size_t input = s.stage == 0 ? first_input : activation;
      const bool cotangent = split && s.stage + 1 != V;  // the last stage's W recomputes its loss instead
      if (s.kind == work::forward) held += input;
      else if (s.kind == work::backward && split) held += cotangent ? activation : 0;  // the cotangent kept for W
      else held -= input + (s.kind == work::weight && cotangent ? activation : 0);     // the input (and the cotangent) let go
      most = std::max(most, held);
    }
    return most;
  }
  constexpr std::size_t peak_in_flight(std::size_t first_input = 1, std::size_t activation = 1) const {
    std::size_t most = 0;
    for (std::size_t d = 0; d < S; ++d) most = std::max(most, peak_on(d, first_input, activation));
    return most;
  }
};

namespace detail {

// What a step waits for on other devices: F(v, m) for F(v+1, m); B(v+1, m) (or F(V-1, m), where the loss
// is) for B(v, m). W waits only for its own device's B.
struct dependency {
  bool any = false;
  work kind = work::forward;
  std::size_t stage = 0, microbatch = 0;
};
template <std::size_t V>
constexpr dependency dependency_of(const step& s) {
  if (s.kind == work::forward) return s.stage == 0 ? dependency{} : dependency{true, work::forward, s.stage - 1u, s.microbatch};
  if (s.kind == work::backward)
    return s.stage + 1 == V ? dependency{true, work::forward, s.stage, s.microbatch} : dependency{true, work::backward, s.stage + 1u, s.microbatch};
  return {};
}

// End times of scheduled steps, by (kind, stage, microbatch); 0: not yet.
template <std::size_t V, std::size_t M>
struct finish_times {
  std::array<std::uint32_t, 3 * V * M> at{};
  constexpr std::uint32_t& operator()(work k, std::size_t v, std::size_t m) {
    return at[(static_cast<std::size_t>(k) * V + v) * M + m];
  }
};

// The sequence each device runs, in order (all but zero bubble, which is built as it is simulated).
template <class Sched, std::size_t S, std::size_t V, std::size_t M>
constexpr void orders(table<S, V, M>& t) {
  constexpr std::size_t R = V / S;
  auto push = [&](std::size_t d, work k, std::size_t v, std::size_t m) {
    t.steps[d][t.count[d]++] = step{k, static_cast<std::uint16_t>(v), static_cast<std::uint16_t>(m)};
  };
  for (std::size_t d = 0; d < S; ++d) {
    if constexpr (Sched::one_forward_one_backward) {
      const std::size_t warm = std::min(S - d - 1, M);
      for (std::size_t m = 0; m < warm; ++m) push(d, work::forward, d, m);
      for (std::size_t i = 0; i + warm < M; ++i) push(d, work::forward, d, warm + i), push(d, work::backward, d, i);
      for (std::size_t m = M - warm; m < M; ++m) push(d, work::backward, d, m);
    } else {  // gpipe, circular: every forward, repeat by repeat; then the backwards, last repeat first
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t m = 0; m < M; ++m) push(d, work::forward, r * S + d, m);
      for (std::size_t r = R; r-- > 0;)
        for (std::size_t m = 0; m < M; ++m) push(d, work::backward, r * S + d, m);
    }
  }
}

}  // namespace detail

// The schedule's sequences and their timeline at unit costs. Each device takes its next step as soon as it
// is free and the step's input has arrived; zero bubble also takes a held-back W whenever its next F or B
// cannot start yet, or before a forward that would hold more than S-s+1 inputs, and the rest at the end.
template <schedules::Schedule Sched, std::size_t S, std::size_t M>
constexpr auto make() {
  static_assert(!Sched::one_forward_one_backward || Sched::repeats == 1,
                "tessel::pipeline_schedule: one forward and one backward in turn over several repeats (interleaved 1F1B) is not built; "
                "fix: use circular<R> for repeats, or one_f_one_b");
  constexpr std::size_t V = S * Sched::repeats;
  table<S, V, M> t;
  t.split = Sched::split_backward;
  detail::orders<Sched, S, V, M>(t);
  // Simulated in time order: the free device with the earliest clock acts next.
  std::array<std::array<step, table<S, V, M>::per_device>, S> planned = t.steps;
  std::array<std::size_t, S> planned_count = t.count, next{}, held_back{}, first_held{}, held_inputs{};
  std::array<std::uint32_t, S> clock{};
  t.count = {};
  detail::finish_times<V, M> done;
  std::array<bool, S> waiting{};  // its next step's input is not scheduled yet
  for (;;) {
    std::size_t d = S;
    for (std::size_t e = 0; e < S; ++e) {
      const bool has_work = next[e] < planned_count[e] || held_back[e] != 0;
      if (has_work && !waiting[e] && (d == S || clock[e] < clock[d])) d = e;
    }
    if (d == S) break;
    auto run = [&](step s) {
      s.begin = clock[d];
      s.end = s.begin + cost_of(s.kind, t.split);
      clock[d] = s.end;
      done(s.kind, s.stage, s.microbatch) = s.end;
      if (s.kind == work::forward) ++held_inputs[d];
      else if (s.kind == work::weight || !t.split) --held_inputs[d];
      t.steps[d][t.count[d]++] = s;
      waiting.fill(false);  // a step done may be what another device waits for
    };
    auto run_held_back = [&] {
      const step& b = t.steps[d][first_held[d]];  // its B; W's go in microbatch order
      run(step{work::weight, b.stage, b.microbatch});
      --held_back[d];
      for (++first_held[d]; held_back[d] != 0 && t.steps[d][first_held[d]].kind != work::backward; ++first_held[d]) {}
    };
    if (next[d] == planned_count[d]) {  // only held-back W's left
      run_held_back();
      continue;
    }
    const step s = planned[d][next[d]];
    const detail::dependency dep = detail::dependency_of<V>(s);
    const std::uint32_t ready = dep.any ? done(dep.kind, dep.stage, dep.microbatch) : 0;
    const bool can_hold = t.split && held_back[d] != 0;
    const bool over_memory = s.kind == work::forward && held_inputs[d] >= S - d + 1;  // one past 1F1B's bound
    if (can_hold && (over_memory || (dep.any && (ready == 0 || ready > clock[d])))) {
      run_held_back();
      continue;
    }
    if (dep.any && ready == 0) {
      waiting[d] = true;
      continue;
    }
    clock[d] = std::max(clock[d], ready);
    ++next[d];
    run(s);
    if (t.split && s.kind == work::backward && held_back[d]++ == 0) first_held[d] = t.count[d] - 1;
  }
  t.complete = true;
  for (std::size_t d = 0; d < S; ++d) t.complete = t.complete && next[d] == planned_count[d] && held_back[d] == 0;
  return t;
}

// The timeline as text, one row per device, two columns per unit of time: F, B or W and the microbatch's
// last digit ("F3", a backward "B3B3"), ".." idle.
template <std::size_t S, std::size_t V, std::size_t M>
std::string timeline(const table<S, V, M>& t) {
  std::string out;
  const std::uint32_t span = t.span();
  for (std::size_t d = 0; d < S; ++d) {
    std::string row(2 * std::size_t{span}, '.');
    for (std::size_t i = 0; i < t.count[d]; ++i) {
      const step& s = t.steps[d][i];
      for (std::uint32_t u = s.begin; u < s.end; ++u) {
        row[2 * u] = s.kind == work::forward ? 'F' : s.kind == work::backward ? 'B' : 'W';
        row[2 * u + 1] = static_cast<char>('0' + s.microbatch % 10);
      }
    }
    out += "  device " + std::to_string(d) + "  " + row + "\n";
  }
  return out;
}

}  // namespace pipeline_schedule
}  // namespace tessel
