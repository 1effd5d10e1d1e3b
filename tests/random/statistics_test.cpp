#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>

#include "tessel/random/distributions.hpp"
#include "tessel/random/key.hpp"

namespace {
namespace tr = tessel::random;
using tessel::shape;

constexpr std::size_t n = 100000;

template <class Range>
void mean_and_variance(const Range& xs, double& mean, double& variance) {
  mean = 0;
  for (auto x : xs) mean += static_cast<double>(x);
  mean /= n;
  variance = 0;
  for (auto x : xs) variance += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
  variance /= n - 1;
}

// Each moment within 5 standard errors: the mean's is sqrt(var / n); the sample variance's is
// sqrt((mu4 - var^2) / n), with mu4 = 1/80 for U[0, 1) and 3 for N(0, 1).
TEST(Statistics, UniformMoments) {
  double mean = 0, variance = 0;
  mean_and_variance(tr::uniform<shape<n>>(tr::key_from_seed(11)), mean, variance);
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(variance, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
}

TEST(Statistics, UniformScaledMoments) {
  double mean = 0, variance = 0;
  mean_and_variance(tr::uniform<shape<n>>(tr::key_from_seed(12), -3.0f, 5.0f), mean, variance);
  EXPECT_NEAR(mean, 1.0, 5 * 8 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(variance, 64.0 / 12, 5 * 64 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
}

TEST(Statistics, NormalMoments) {
  const auto z = tr::normal<shape<n>>(tr::key_from_seed(13));
  double mean = 0, variance = 0;
  mean_and_variance(z, mean, variance);
  EXPECT_NEAR(mean, 0.0, 5 * std::sqrt(1.0 / n));
  EXPECT_NEAR(variance, 1.0, 5 * std::sqrt(2.0 / n));
  std::size_t within_one = 0;
  for (float x : z) within_one += std::abs(x) < 1.0f;
  const double p = 0.6826894921370859;  // P(|Z| < 1)
  EXPECT_NEAR(static_cast<double>(within_one) / n, p, 5 * std::sqrt(p * (1 - p) / n));
}

TEST(Statistics, BernoulliFrequency) {
  std::size_t ones = 0;
  for (bool b : tr::bernoulli<shape<n>>(tr::key_from_seed(14), 0.3f)) ones += b;
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.3, 5 * std::sqrt(0.3 * 0.7 / n));
}

TEST(Statistics, SplitKeysGiveUncorrelatedStreams) {
  const auto [a, b] = tr::split(tr::key_from_seed(15));
  const auto x = tr::normal<shape<n>>(a);
  const auto y = tr::normal<shape<n>>(b);
  double dot = 0;
  for (std::size_t i = 0; i < n; ++i) dot += static_cast<double>(x[i]) * y[i];
  EXPECT_NEAR(dot / n, 0.0, 5 * std::sqrt(1.0 / n));
}

// Every position is equally likely to receive any value: the mean of p[i] over many keys is (N - 1) / 2.
TEST(Statistics, PermutationPositionsAreUnbiased) {
  constexpr std::size_t trials = 2000, size = 8;
  double sum_first = 0, sum_last = 0;
  for (std::uint32_t t = 0; t < trials; ++t) {
    const auto p = tr::permutation<size>(tr::fold_in(tr::key_from_seed(16), t));
    sum_first += p[0];
    sum_last += p[size - 1];
  }
  const double sd = std::sqrt((size * size - 1) / 12.0 / trials);  // discrete uniform on 0..7
  EXPECT_NEAR(sum_first / trials, 3.5, 5 * sd);
  EXPECT_NEAR(sum_last / trials, 3.5, 5 * sd);
}
}  // namespace
