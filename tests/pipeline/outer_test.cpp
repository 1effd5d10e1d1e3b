// The pipeline with first and last parts (pipeline(first, stage, last)): an input layer on the first stage,
// an output layer and the loss on the last, both with parameters outside the stacked layers, and a side
// input every stage reads (a gate per row, as a transformer's mask). Untied, the gradients are one
// device's accumulation bit for bit; an input layer tied to the output layer gets the sum of both
// stages' contributions, which is one device's to rounding.
#include <gtest/gtest.h>

#include "model.hpp"

namespace {
using namespace tessel;
using namespace pipeline_model;

constexpr std::size_t features = 12;

template <template <class, class> class T = tensor>
struct ends {
  BOOST_HANA_DEFINE_STRUCT(ends, (T<float, shape<features, width>>, w_in), (T<float, shape<width, features>>, w_out));
};

constexpr auto first = [](const auto& o, const auto& in) { return tanh(matmul(std::get<0>(in), o.w_in)); };
constexpr auto gated = [](const auto& p, const auto& a, const auto& in) { return stage(p, a) * std::get<1>(in); };
constexpr auto last = [](const auto& o, const auto& a, const auto&, const auto& t) { return loss(matmul(a, o.w_out), t); };
// Tied: the output layer is the input layer's transpose.
constexpr auto last_tied = [](const auto& o, const auto& a, const auto&, const auto& t) { return loss(matmul(a, transpose<1, 0>(o.w_in)), t); };

template <class Last>
constexpr auto whole_of(Last) {
  return [](const auto& all, const auto& in, const auto& t) {
    const auto& o = std::get<0>(all);
    return Last{}(o, gated(std::get<1>(all), first(o, in), in), in, t);
  };
}

using inputs_t = std::tuple<tensor<float, shape<batch, features>>, tensor<float, shape<batch, width>>>;
using targets_t = tensor<float, shape<batch, features>>;

ends<> outer_parameters() {
  ends<> o;
  for (std::size_t i = 0; i < o.w_in.size; ++i) o.w_in.data()[i] = 0.2f * std::cos(0.9f * static_cast<float>(i));
  for (std::size_t i = 0; i < o.w_out.size; ++i) o.w_out.data()[i] = 0.2f * std::sin(1.1f * static_cast<float>(i));
  return o;
}
inputs_t inputs() {
  inputs_t in{filled<tensor<float, shape<batch, features>>>(0.5f), {}};
  for (std::size_t i = 0; i < std::get<1>(in).size; ++i) std::get<1>(in).data()[i] = (i / width) % 3 == 0 ? 0.0f : 1.0f;
  return in;
}

template <class Sched, std::size_t S, std::size_t M>
void expect_untied_exact() {
  const auto o = outer_parameters();
  const auto p = parameters();
  const auto in = inputs();
  const auto t = filled<targets_t>(2.0f);
  const auto [value, grads] = pipeline<mesh<axis<"stage", S>>, "stage", Sched, M>(first, gated, last)(o, p, in, t);
  const auto& [outer_grads, layer_grads] = grads;
  const auto [want_value, want] = accumulate_gradients<M>(whole_of(last))(std::tuple{o, p}, in, t);
  EXPECT_TRUE(same_bits(value, want_value)) << value.data()[0] << " against " << want_value.data()[0];
  EXPECT_TRUE(same_bits(outer_grads.w_in, std::get<0>(want).w_in));
  EXPECT_TRUE(same_bits(outer_grads.w_out, std::get<0>(want).w_out));
  EXPECT_TRUE(same_bits(layer_grads.w, std::get<1>(want).w));
  EXPECT_TRUE(same_bits(layer_grads.b, std::get<1>(want).b));
}

TEST(PipelineOuter, UntiedIsOneDevicesAccumulation) {
  expect_untied_exact<schedules::one_f_one_b, 2, 4>();
  expect_untied_exact<schedules::zero_bubble, 4, 4>();
  expect_untied_exact<schedules::circular<2>, 2, 4>();
  expect_untied_exact<schedules::gpipe, 1, 4>();  // one stage: first, layers and last in one program
}

// The first stage keeps its microbatch's inputs (f32[8,12] and f32[8,16]), the others an activation
// (f32[8,16]): each device's peak is the schedule's, weighed so.
TEST(PipelineOuter, KeptBytesWeighTheFirstStagesInputs) {
  const auto pipe = pipeline<mesh<axis<"stage", 2>>, "stage", schedules::gpipe, 4>(first, gated, last);
  const auto r = pipe.run(outer_parameters(), parameters(), inputs(), filled<targets_t>(2.0f));
  constexpr std::size_t in_bytes = 8 * (features + width) * sizeof(float), act_bytes = 8 * width * sizeof(float);
  EXPECT_EQ(r.report.peak_kept_bytes[0], 4 * in_bytes);
  EXPECT_EQ(r.report.peak_kept_bytes[1], 4 * act_bytes);
  EXPECT_EQ(r.report.peak_kept_bytes[0], decltype(pipe)::table.peak_on(0, in_bytes, act_bytes));
  EXPECT_NE(pipe.dump(outer_parameters(), parameters(), inputs(), filled<targets_t>(2.0f)).find("per device: 4 (3584 bytes) 4 (2048 bytes)"),
            std::string::npos);
}

TEST(PipelineOuter, TiedGetsBothStagesContributions) {
  const auto o = outer_parameters();
  const auto p = parameters();
  const auto in = inputs();
  const auto t = filled<targets_t>(2.0f);
  const auto [value, grads] = pipeline<mesh<axis<"stage", 4>>, "stage", schedules::one_f_one_b, 4>(first, gated, last_tied)(o, p, in, t);
  const auto [want_value, want] = accumulate_gradients<4>(whole_of(last_tied))(std::tuple{o, p}, in, t);
  EXPECT_TRUE(same_bits(value, want_value));
  const auto& got = std::get<0>(grads).w_in;
  const auto& expected = std::get<0>(want).w_in;
  float largest = 0;
  for (std::size_t i = 0; i < got.size; ++i) largest = std::max(largest, std::abs(expected.data()[i]));
  ASSERT_GT(largest, 0.0f);
  for (std::size_t i = 0; i < got.size; ++i) EXPECT_NEAR(got.data()[i], expected.data()[i], 1e-6f * largest) << i;
  EXPECT_TRUE(same_bits(std::get<1>(grads).w, std::get<1>(want).w));  // the layers' are untouched by the tie
}

}  // namespace
