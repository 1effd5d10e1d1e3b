// Losses and their gradients against references computed here in double, with masked (-inf) and huge
// (+-3e38) logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "reference.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::shape;
using tessel::tensor;

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr std::size_t batch = 4, classes = 5;
using logits_t = tensor<float, shape<batch, classes>>;
using labels_t = tensor<std::int32_t, shape<batch>>;

constexpr auto integer_loss = [](auto logits, auto labels) {
  return tessel::nn::softmax_cross_entropy_with_integer_labels(logits, labels);
};
constexpr auto total_integer_loss = [](auto logits, auto labels) { return tessel::sum(integer_loss(logits, labels)); };
constexpr auto soft_loss = [](auto logits, auto labels) { return tessel::nn::softmax_cross_entropy(logits, labels); };
constexpr auto total_soft_loss = [](auto logits, auto labels) { return tessel::sum(soft_loss(logits, labels)); };

// Row b's max and sum(exp(logits - max)) in double, so that +-3e38 neither overflow nor swamp the sum:
// logsumexp = max + log(sum), softmax = exp(logits - max) / sum.
struct row_reference {
  double max = -std::numeric_limits<double>::infinity(), sum = 0;
  row_reference(const logits_t& logits, std::size_t b) {
    for (std::size_t c = 0; c < classes; ++c) max = std::max(max, static_cast<double>(logits(b, c)));
    for (std::size_t c = 0; c < classes; ++c) sum += std::exp(logits(b, c) - max);
  }
  double softmax(float logit) const { return std::exp(logit - max) / sum; }
};

// The loss is logsumexp - logits[label] and its gradient softmax - one_hot, each element finite. f32
// rounds the logsumexp at the scale of the largest logit, so the loss is compared relative to that scale.
void expect_integer_loss_as_reference(const logits_t& logits, const labels_t& labels) {
  const auto loss = tessel::jit(integer_loss)(logits, labels);
  const logits_t gradient = tessel::grad(total_integer_loss)(logits, labels);
  for (std::size_t b = 0; b < batch; ++b) {
    const auto label = static_cast<std::size_t>(labels[b]);
    const row_reference row(logits, b);
    const double picked = logits(b, label);
    EXPECT_TRUE(std::isfinite(loss[b])) << "row " << b << ": " << loss[b];
    EXPECT_NEAR(loss[b], (row.max - picked) + std::log(row.sum), 4e-7 * (std::abs(row.max) + std::abs(picked)) + 1e-6)
        << "row " << b;
    for (std::size_t c = 0; c < classes; ++c) {
      const double want = row.softmax(logits(b, c)) - (c == label ? 1.0 : 0.0);
      EXPECT_TRUE(std::isfinite(gradient(b, c))) << "row " << b << " class " << c << ": " << gradient(b, c);
      EXPECT_NEAR(gradient(b, c), want, 1e-6) << "row " << b << " class " << c;
    }
  }
}

// A masked logit (-inf, as attention masks and vocabulary masks write it) is a probability of 0: the
// label's logit must be picked without multiplying the others by 0 (-inf * 0 is NaN).
TEST(SoftmaxCrossEntropyWithIntegerLabels, MaskedLogitsAreFinite) {
  const logits_t logits{-inf, 1, 2, -inf, 0.5f,  //
                        -inf, -inf, 3, -inf, -inf,  //
                        0.25f, -inf, -1, 4, -inf,  //
                        2, 1, 0, -1, -inf};
  expect_integer_loss_as_reference(logits, labels_t{2, 2, 3, 1});
}

TEST(SoftmaxCrossEntropyWithIntegerLabels, HugeLogitsAreFinite) {
  const logits_t logits{3e38f, 3e38f, -3e38f, 0, 1,  //
                        -3e38f, 1, 2, 0, -1,        //
                        3e38f, -3e38f, -1, 1, 0,    //
                        -3e38f, -3e38f, 0.5f, -3e38f, -3e38f};
  expect_integer_loss_as_reference(logits, labels_t{1, 0, 0, 2});
}

TEST(SoftmaxCrossEntropyWithIntegerLabels, OrdinaryLogits) {
  const auto logits = tessel::testing::random_tensor<float, shape<batch, classes>>(7, -8, 8);
  expect_integer_loss_as_reference(logits, labels_t{0, 4, 2, 1});
}

// -sum(labels * log_softmax(logits)) and its gradient softmax * sum(labels) - labels, with soft labels.
TEST(SoftmaxCrossEntropy, MatchesReferenceWithSoftLabels) {
  const auto logits = tessel::testing::random_tensor<float, shape<batch, classes>>(8, -8, 8);
  auto labels = tessel::testing::random_tensor<float, shape<batch, classes>>(9, 0, 1);
  for (std::size_t b = 0; b < batch; ++b) {
    float total = 0;
    for (std::size_t c = 0; c < classes; ++c) total += labels(b, c);
    for (std::size_t c = 0; c < classes; ++c) labels(b, c) /= total;
  }
  const auto loss = tessel::jit(soft_loss)(logits, labels);
  const logits_t gradient = tessel::grad(total_soft_loss)(logits, labels);
  for (std::size_t b = 0; b < batch; ++b) {
    const row_reference row(logits, b);
    double want = 0, label_sum = 0;
    for (std::size_t c = 0; c < classes; ++c) {
      want -= labels(b, c) * std::log(row.softmax(logits(b, c)));
      label_sum += labels(b, c);
    }
    EXPECT_NEAR(loss[b], want, 1e-5) << "row " << b;
    for (std::size_t c = 0; c < classes; ++c)
      EXPECT_NEAR(gradient(b, c), row.softmax(logits(b, c)) * label_sum - labels(b, c), 1e-6) << "row " << b << " class " << c;
  }
}

// With one-hot labels both losses are the same function.
TEST(SoftmaxCrossEntropy, OneHotLabelsAgreeWithIntegerLabels) {
  const auto logits = tessel::testing::random_tensor<float, shape<batch, classes>>(10, -8, 8);
  const labels_t labels{3, 0, 4, 1};
  logits_t one_hot{};
  for (std::size_t b = 0; b < batch; ++b) one_hot(b, static_cast<std::size_t>(labels[b])) = 1;
  const auto soft = tessel::jit(soft_loss)(logits, one_hot);
  const auto integer = tessel::jit(integer_loss)(logits, labels);
  for (std::size_t b = 0; b < batch; ++b) EXPECT_NEAR(soft[b], integer[b], 1e-5) << "row " << b;
}
// Labels as optax reads them (jnp.take_along_axis): -1 is the last class; beyond [-classes, classes) NaN.
// tessel read -1 as no class (the loss was the whole logsumexp); the oracle suite found it.
TEST(SoftmaxCrossEntropyWithIntegerLabels, NegativeLabelsCountFromTheEndAndOutOfRangeIsNaN) {
  logits_t logits;
  for (std::size_t i = 0; i < logits.size; ++i) logits[i] = static_cast<float>(i % classes) * 0.5f;
  const labels_t labels{-1, static_cast<std::int32_t>(classes), -static_cast<std::int32_t>(classes) - 1, -static_cast<std::int32_t>(classes)};
  const auto loss = tessel::jit(integer_loss)(logits, labels);
  const labels_t same{static_cast<std::int32_t>(classes) - 1, 0, 0, 0};
  const auto want = tessel::jit(integer_loss)(logits, same);
  EXPECT_EQ(loss[0], want[0]);
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_TRUE(std::isnan(loss[2]));
  EXPECT_EQ(loss[3], want[3]);
}

}  // namespace
