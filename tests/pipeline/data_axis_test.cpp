// A pipeline on a data x stage mesh: each replica accumulates its half of the batch through its stages,
// and the replicas' sums are added in order and scaled once; bit for bit the same computed on one device.
// And what a call reports: every step, the bytes each device kept (1F1B: at most S/M of GPipe's).
#include <gtest/gtest.h>

#include "model.hpp"

namespace {
using namespace tessel;
using namespace pipeline_model;

template <class X>
X half(const batch_t& full, std::size_t which) {
  X h(uninitialized);
  std::memcpy(h.data(), full.data() + which * X::size, X::size * sizeof(float));
  return h;
}

template <class Sched, std::size_t S, std::size_t M>
void expect_replicas_accumulated() {
  using Mesh = mesh<axis<"data", 2>, axis<"stage", S>>;
  const auto p = parameters();
  const auto x = filled<batch_t>(0.0f), t = filled<batch_t>(1.0f);
  const auto [value, grads] = pipeline<Mesh, "stage", Sched, M>(stage, loss)(p, x, t);
  // One device: each half accumulated (sums from zero, in microbatch order), the halves added, scaled.
  using half_t = tensor<float, shape<batch / 2, width>>;
  tensor<float, shape<>> want_value{};
  stack<> want{};
  for (std::size_t r = 0; r < 2; ++r) {
    const auto [v, g] = accumulate_gradients<M, loss_reduction::sum>(whole)(p, half<half_t>(x, r), half<half_t>(t, r));
    want_value.data()[0] = want_value.data()[0] + v.data()[0];
    for (std::size_t i = 0; i < g.w.size; ++i) want.w.data()[i] = want.w.data()[i] + g.w.data()[i];
    for (std::size_t i = 0; i < g.b.size; ++i) want.b.data()[i] = want.b.data()[i] + g.b.data()[i];
  }
  const float scale = 1.0f / static_cast<float>(2 * M);
  want_value.data()[0] *= scale;
  for (float& e : want.w) e *= scale;
  for (float& e : want.b) e *= scale;
  EXPECT_TRUE(same_bits(value, want_value)) << value.data()[0] << " against " << want_value.data()[0];
  EXPECT_TRUE(same_bits(grads.w, want.w));
  EXPECT_TRUE(same_bits(grads.b, want.b));
}

TEST(PipelineDataAxis, EverySchedule) {
  expect_replicas_accumulated<schedules::gpipe, 2, 4>();
  expect_replicas_accumulated<schedules::one_f_one_b, 2, 4>();
  expect_replicas_accumulated<schedules::circular<2>, 2, 4>();
  expect_replicas_accumulated<schedules::zero_bubble, 2, 4>();
  expect_replicas_accumulated<schedules::one_f_one_b, 4, 4>();
}

TEST(PipelineReport, KeepsWhatTheScheduleSays) {
  const auto p = parameters();
  const auto x = filled<batch_t>(0.0f), t = filled<batch_t>(1.0f);
  constexpr std::size_t act_bytes = batch / 8 * width * sizeof(float);
  auto check = [&](auto pipe, std::size_t steps_per_device) -> std::vector<std::size_t> {
    const auto r = pipe.run(p, x, t);
    if (r.report.devices.size() != 4u) {
      ADD_FAILURE() << r.report.devices.size() << " devices";
      return {0, 0, 0, 0};
    }
    for (std::size_t d = 0; d < 4; ++d) {
      EXPECT_EQ(r.report.devices[d].size(), steps_per_device);
      EXPECT_EQ(r.report.peak_kept_bytes[d], decltype(pipe)::table.peak_on(d) * act_bytes) << "device " << d;
      for (const auto& e : r.report.devices[d]) EXPECT_LE(e.begin_ns, e.end_ns);
    }
    const double b = r.report.bubble();
    EXPECT_GE(b, 0.0);
    EXPECT_LT(b, 1.0);
    return r.report.peak_kept_bytes;
  };
  const auto gpipe = check(pipeline<mesh<axis<"stage", 4>>, "stage", schedules::gpipe, 8>(stage, loss), 16);
  const auto ofob = check(pipeline<mesh<axis<"stage", 4>>, "stage", schedules::one_f_one_b, 8>(stage, loss), 16);
  check(pipeline<mesh<axis<"stage", 4>>, "stage", schedules::zero_bubble, 8>(stage, loss), 24);
  EXPECT_EQ(gpipe[0], 8 * act_bytes);
  EXPECT_EQ(ofob[0], 4 * act_bytes);  // S/M of GPipe's
  EXPECT_EQ(ofob[3], act_bytes);
}

TEST(PipelineDump, ShowsTheSchedule) {
  const auto p = parameters();
  const auto x = filled<batch_t>(0.0f), t = filled<batch_t>(1.0f);
  const std::string text = pipeline<mesh<axis<"stage", 2>>, "stage", schedules::gpipe, 4>(stage, loss).dump(p, x, t);
  EXPECT_NE(text.find("pipeline: schedule gpipe, 2 stages over axis 'stage', 4 microbatches of 512 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("  device 0  F0F1F2F3........B0B0B0B1B1B1B2B2B2B3B3B3"), std::string::npos) << text;
  EXPECT_NE(text.find("bubble 0.200000 = (S-1)/(R M+S-1) = 1/5"), std::string::npos) << text;
  EXPECT_NE(text.find("per device: 4 (2048 bytes) 4 (2048 bytes)"), std::string::npos) << text;
  EXPECT_NE(text.find("transfers: each F of virtual stage v < 1 sends its output (512 bytes) to the device of v+1, each B of v > 0 "
                      "the input's cotangent back to the device of v-1: 4 each way per call"),
            std::string::npos)
      << text;
}

}  // namespace
