// The schedules' sequences and their timelines at unit costs (transform/pipeline_schedule.hpp): every step
// once, each after what it waits for, backwards in microbatch order, and the bubbles and memory the
// literature gives (GPipe and circular: (S-1)/(R M+S-1); 1F1B: GPipe's bubble with S inputs kept, not M).
#include <gtest/gtest.h>

#include <array>

#include "tessel/transform/pipeline_schedule.hpp"

namespace {
using namespace tessel;
using pipeline_schedule::work;

template <class T>
void expect_valid(const T& t) {
  constexpr std::size_t S = T::stages, V = T::virtual_stages, M = T::microbatches;
  ASSERT_TRUE(t.complete);
  std::array<std::array<std::array<int, M>, V>, 3> seen{};
  std::array<std::array<std::array<std::uint32_t, M>, V>, 3> end{};
  for (std::size_t d = 0; d < S; ++d) {
    std::array<int, V> last_backward;
    last_backward.fill(-1);
    std::uint32_t clock = 0;
    for (std::size_t i = 0; i < t.count[d]; ++i) {
      const auto& s = t.steps[d][i];
      EXPECT_EQ(s.stage % S, d) << "virtual stage " << s.stage << " on device " << d;
      EXPECT_GE(s.begin, clock) << "steps of one device overlap";
      EXPECT_EQ(s.end - s.begin, pipeline_schedule::cost_of(s.kind, t.split));
      clock = s.end;
      ++seen[static_cast<int>(s.kind)][s.stage][s.microbatch];
      end[static_cast<int>(s.kind)][s.stage][s.microbatch] = s.end;
      const work grad_step = t.split ? work::weight : work::backward;
      if (s.kind == grad_step) {  // the gradient is summed in microbatch order
        EXPECT_EQ(last_backward[s.stage] + 1, static_cast<int>(s.microbatch));
        last_backward[s.stage] = static_cast<int>(s.microbatch);
      }
    }
  }
  for (std::size_t v = 0; v < V; ++v)
    for (std::size_t m = 0; m < M; ++m) {
      EXPECT_EQ(seen[0][v][m], 1);
      EXPECT_EQ(seen[1][v][m], 1);
      EXPECT_EQ(seen[2][v][m], t.split ? 1 : 0);
    }
  // Each step begins after its input has arrived.
  for (std::size_t d = 0; d < S; ++d)
    for (std::size_t i = 0; i < t.count[d]; ++i) {
      const auto& s = t.steps[d][i];
      if (s.kind == work::forward && s.stage > 0) {
        EXPECT_GE(s.begin, end[0][s.stage - 1][s.microbatch]);
      } else if (s.kind == work::backward) {
        EXPECT_GE(s.begin, std::size_t{s.stage} + 1 < V ? end[1][s.stage + 1][s.microbatch] : end[0][s.stage][s.microbatch]);
      } else if (s.kind == work::weight) {
        EXPECT_GE(s.begin, end[1][s.stage][s.microbatch]);
      }
    }
}

template <class Sched, std::size_t S, std::size_t M>
void expect_bubble(double want) {
  constexpr auto t = pipeline_schedule::make<Sched, S, M>();
  expect_valid(t);
  EXPECT_DOUBLE_EQ(t.bubble(), want) << Sched::name << " S=" << S << " M=" << M;
}

TEST(PipelineSchedule, GPipeBubbleIsTheFormula) {
  expect_bubble<schedules::gpipe, 2, 4>(1.0 / 5);
  expect_bubble<schedules::gpipe, 2, 8>(1.0 / 9);
  expect_bubble<schedules::gpipe, 4, 4>(3.0 / 7);
  expect_bubble<schedules::gpipe, 4, 8>(3.0 / 11);
}

TEST(PipelineSchedule, CircularBubbleIsTheFormula) {
  expect_bubble<schedules::circular<2>, 2, 4>(1.0 / 9);
  expect_bubble<schedules::circular<2>, 4, 8>(3.0 / 19);
  expect_bubble<schedules::circular<3>, 4, 4>(3.0 / 15);
}

TEST(PipelineSchedule, OneFOneBHasGPipesBubbleAndKeepsAtMostS) {
  expect_bubble<schedules::one_f_one_b, 2, 4>(1.0 / 5);
  expect_bubble<schedules::one_f_one_b, 4, 8>(3.0 / 11);
  constexpr auto f = pipeline_schedule::make<schedules::one_f_one_b, 4, 8>();
  constexpr auto g = pipeline_schedule::make<schedules::gpipe, 4, 8>();
  EXPECT_EQ(f.peak_in_flight(), 4u);  // device 0: S inputs
  EXPECT_EQ(f.peak_on(3), 1u);
  EXPECT_EQ(g.peak_in_flight(), 8u);  // every device: M
  EXPECT_EQ(g.peak_on(3), 8u);
}

TEST(PipelineSchedule, ZeroBubbleFillsPartOfTheBubble) {
  constexpr auto z = pipeline_schedule::make<schedules::zero_bubble, 4, 8>();
  constexpr auto f = pipeline_schedule::make<schedules::one_f_one_b, 4, 8>();
  expect_valid(z);
  EXPECT_LT(z.bubble(), f.bubble() - 0.05);
  // At most one input more than 1F1B on any device (an input and a cotangent per held-back W).
  for (std::size_t d = 0; d < 4; ++d) EXPECT_LE(z.peak_on(d), 2 * (4 - d + 1));
  expect_valid(pipeline_schedule::make<schedules::zero_bubble, 2, 4>());
  expect_valid(pipeline_schedule::make<schedules::zero_bubble, 4, 16>());
}

TEST(PipelineSchedule, TimelineShowsEveryStep) {
  const std::string text = pipeline_schedule::timeline(pipeline_schedule::make<schedules::gpipe, 2, 2>());
  EXPECT_EQ(text,
            "  device 0  F0F1........B0B0B0B1B1B1\n"
            "  device 1  ..F0F1B0B0B0B1B1B1......\n");
}

}  // namespace
