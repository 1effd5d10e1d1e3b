// Memory reuse: buffer donation (tessel::donate) writes results into the buffers of donated arguments
// where that is safe, with results identical to the undonated call in every case, safe or not; the
// executor's arena is reused from one call to the next.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <tuple>

#include "reference.hpp"
#include "tessel/ops.hpp"
#include "tessel/jit.hpp"

namespace {
using tessel::donate;
using tessel::jit;
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;
using m44 = tensor<float, shape<4, 4>>;

// An SGD-with-momentum-like update: both results can take the donated buffers.
constexpr auto update = [](auto w, auto m, auto g) {
  auto m2 = m * 0.9f + g;
  return std::make_tuple(w - m2 * 0.1f, m2);
};

TEST(Donation, UpdateWritesIntoTheDonatedBuffers) {
  const auto w0 = random_tensor<float, shape<4, 4>>(1);
  const auto m0 = random_tensor<float, shape<4, 4>>(2);
  const auto g = random_tensor<float, shape<4, 4>>(3);
  const auto [want_w, want_m] = jit(update)(w0, m0, g);
  m44 w = w0, m = m0;
  const float* w_buffer = w.data();
  const float* m_buffer = m.data();
  auto [w1, m1] = jit(update)(donate(w), donate(m), g);
  EXPECT_EQ(w.data(), nullptr) << "a donated argument is left empty";
  EXPECT_EQ(w1.data(), w_buffer);
  EXPECT_EQ(m1.data(), m_buffer);
  for (std::size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(w1[i], want_w[i]);
    EXPECT_EQ(m1[i], want_m[i]);
  }
}

// Programs where writing a result over a donated input early would corrupt a later read.
template <class F>
void expect_same_as_undonated(F f) {
  const auto w0 = random_tensor<float, shape<4, 4>>(4);
  const auto x = random_tensor<float, shape<4, 4>>(5);
  const auto want = jit(f)(w0, x);
  m44 w = w0;
  const auto got = jit(f)(donate(w), x);
  tessel::tree::for_each(want, [&, leaf = 0](const auto& t) mutable {
    const auto& g = [&]() -> const m44& {
      const m44* found = nullptr;
      int i = 0;
      tessel::tree::for_each(got, [&](const auto& u) {
        if (i++ == leaf) found = &u;
      });
      return *found;
    }();
    for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(g[i], t[i]) << "result " << leaf << " element " << i;
    ++leaf;
  });
}

TEST(Donation, UnsafeReusesAreRefused) {
  // The transpose reads all of w; a matmul reads all of w while writing; two results read w.
  expect_same_as_undonated([](auto w, auto x) { return std::make_tuple(tessel::transpose<1, 0>(w), w + x); });
  expect_same_as_undonated([](auto w, auto x) { return std::make_tuple(tessel::matmul(w, x) + 1.0f, w * 3.0f); });
  expect_same_as_undonated([](auto w, auto x) { return std::make_tuple(w * 2.0f + x, w * 3.0f); });
  expect_same_as_undonated([](auto w, auto x) { return std::make_tuple(w + tessel::sum(w * x), x * 2.0f); });
  expect_same_as_undonated([](auto w, auto x) { return std::make_tuple(tessel::matmul(w, w), w - x); });
}

TEST(Donation, RowKernelsWriteOverTheRowsTheyRead) {
  // Softmax and a centring by the row mean are row kernels: each pass reads its rows whole, then stores
  // them, so a donated input of the result's shape takes the result. Rows spread over threads and passes.
  using rows = tensor<float, shape<96, 300>>;
  const auto x0 = random_tensor<float, shape<96, 300>>(9);
  const auto softmax = [](auto x) { return tessel::softmax(x); };
  const auto centre = [](auto x) { return x - tessel::broadcast_in_dim<shape<96, 300>, 0>(tessel::mean<1>(x)); };
  const auto want_softmax = jit(softmax)(x0);
  const auto want_centre = jit(centre)(x0);
  rows a = x0, b = x0;
  const float* a_buffer = a.data();
  const float* b_buffer = b.data();
  const rows got_softmax = jit(softmax)(donate(a));
  const rows got_centre = jit(centre)(donate(b));
  EXPECT_EQ(got_softmax.data(), a_buffer);
  EXPECT_EQ(got_centre.data(), b_buffer);
  for (std::size_t i = 0; i < rows::size; ++i) {
    ASSERT_EQ(got_softmax[i], want_softmax[i]) << i;
    ASSERT_EQ(got_centre[i], want_centre[i]) << i;
  }
  // A row kernel that also reads the donated input another way keeps a new buffer.
  expect_same_as_undonated([](auto w, auto x) { return std::make_tuple(tessel::softmax(w) + tessel::transpose<1, 0>(w), x); });
}

TEST(Donation, RepeatedStepsMatch) {
  auto w = random_tensor<float, shape<4, 4>>(6);
  auto m = random_tensor<float, shape<4, 4>>(7);
  auto w_ref = w, m_ref = m;
  const auto g = random_tensor<float, shape<4, 4>>(8);
  for (int step = 0; step < 5; ++step) {
    std::tie(w, m) = jit(update)(donate(w), donate(m), g);
    std::tie(w_ref, m_ref) = jit(update)(w_ref, m_ref, g);
  }
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(w[i], w_ref[i]);
}
}  // namespace

namespace {
long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The executor keeps the calling thread's arena from one call to the next: a program called again maps
// no new pages (minor faults, counted by getrusage), where a fresh arena per call (2 MiB of intermediates
// here) would fault on every page it touches.
TEST(Arena, ACallAgainMapsNoNewPages) {
  const auto f = [](auto w, auto x) {
    auto h = tessel::relu(tessel::matmul(x, w));
    auto y = tessel::tanh(tessel::matmul(h, w));
    return tessel::sum(y * y);
  };
  const auto w = random_tensor<float, shape<512, 512>>(11);
  const auto x = random_tensor<float, shape<512, 512>>(12);
  const long before_first = minor_faults();
  float first = jit(f)(w, x)[0];
  const long first_faults = minor_faults() - before_first;
  EXPECT_GT(first_faults, 0) << "the first call touches its arena's pages for the first time";
  long fewest = first_faults;
  for (int call = 0; call < 3; ++call) {
    const long before = minor_faults();
    const float again = jit(f)(w, x)[0];
    fewest = std::min(fewest, minor_faults() - before);
    EXPECT_EQ(again, first);
  }
  EXPECT_EQ(fewest, 0) << "first call: " << first_faults << " minor faults";
}
}  // namespace
