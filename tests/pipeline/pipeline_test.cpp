// Every schedule's loss and gradient, over 2 and 4 stages, bit for bit those of one device accumulating the
// same microbatches in order (accumulate_gradients of the whole model).
#include <gtest/gtest.h>

#include "model.hpp"

namespace {
using namespace tessel;
using namespace pipeline_model;

template <class Mesh, class Sched, std::size_t M>
void expect_accumulation() {
  const auto p = parameters();
  const auto x = filled<batch_t>(0.0f), t = filled<batch_t>(1.0f);
  const auto [value, grads] = pipeline<Mesh, "stage", Sched, M>(stage, loss)(p, x, t);
  const auto [want_value, want] = accumulate_gradients<M>(whole)(p, x, t);
  EXPECT_TRUE(same_bits(value, want_value)) << value.data()[0] << " against " << want_value.data()[0];
  EXPECT_TRUE(same_bits(grads.w, want.w));
  EXPECT_TRUE(same_bits(grads.b, want.b));
}

TEST(Pipeline, GPipe) {
  expect_accumulation<mesh<axis<"stage", 2>>, schedules::gpipe, 4>();
  expect_accumulation<mesh<axis<"stage", 4>>, schedules::gpipe, 8>();
}
TEST(Pipeline, OneFOneB) {
  expect_accumulation<mesh<axis<"stage", 2>>, schedules::one_f_one_b, 4>();
  expect_accumulation<mesh<axis<"stage", 4>>, schedules::one_f_one_b, 8>();
}
TEST(Pipeline, Circular) {
  expect_accumulation<mesh<axis<"stage", 2>>, schedules::circular<2>, 4>();  // 4 virtual stages of 2 layers
  expect_accumulation<mesh<axis<"stage", 4>>, schedules::circular<2>, 4>();  // 8 of 1
}
TEST(Pipeline, ZeroBubble) {
  expect_accumulation<mesh<axis<"stage", 2>>, schedules::zero_bubble, 4>();
  expect_accumulation<mesh<axis<"stage", 4>>, schedules::zero_bubble, 8>();
}

// The comparison sees a difference in the order of the sums: 4 microbatches are not 2.
TEST(Pipeline, ControlOtherMicrobatchesDiffer) {
  const auto p = parameters();
  const auto x = filled<batch_t>(0.0f), t = filled<batch_t>(1.0f);
  const auto [value, grads] = pipeline<mesh<axis<"stage", 2>>, "stage", schedules::gpipe, 4>(stage, loss)(p, x, t);
  const auto [other_value, other] = accumulate_gradients<2>(whole)(p, x, t);
  EXPECT_FALSE(same_bits(grads.w, other.w));
}

}  // namespace
