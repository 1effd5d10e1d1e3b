// What the executor tells its observers about each kernel: a name made of the primitives fused into it and
// the type it stores (trace events carry it), and the checked mode (run/check_finite.hpp) that names the
// first kernel storing a NaN or an infinity.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tessel/io/chrome_trace.hpp"
#include "tessel/jit.hpp"
#include "tessel/ops.hpp"
#include "tessel/plan/describe.hpp"
#include "tessel/profile/profiler.hpp"
#include "tessel/run/check_finite.hpp"

namespace {

using tessel::shape;
using tessel::tensor;

template <class T>
T filled(float v) {
  T t;
  for (std::size_t i = 0; i < T::size; ++i) t[i] = v;
  return t;
}

std::vector<std::string>& seen() {
  static std::vector<std::string> names;
  return names;
}
void remember(const tessel::run::kernel_report& k) noexcept { seen().push_back(tessel::plan::describe(*k.plan, k.index)); }

constexpr auto dense = [](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); };
constexpr auto log_softmax_sum = [](auto x) { return tessel::sum(tessel::log(x) - tessel::exp(x)); };

TEST(KernelNames, NameTheFusedPrimitivesAndTheStoredType) {
  auto x = filled<tensor<float, shape<128, 64>>>(0.5f);
  auto w = filled<tensor<float, shape<64, 256>>>(0.25f);
  auto b = filled<tensor<float, shape<256>>>(-1.0f);
  seen().clear();
  tessel::run::kernel_observer_slot().store(&remember);
  (void)tessel::jit(dense)(x, w, b);
  tessel::run::kernel_observer_slot().store(nullptr);
  ASSERT_EQ(seen().size(), 1u);
  EXPECT_EQ(seen()[0], "contraction dot_general+add+max f32[128,256]");
}

TEST(KernelNames, TraceEventsCarryThem) {
  auto x = filled<tensor<float, shape<128, 64>>>(0.5f);
  auto w = filled<tensor<float, shape<64, 256>>>(0.25f);
  auto b = filled<tensor<float, shape<256>>>(-1.0f);
  tessel::profile::clear();
  tessel::profile::enable();
  (void)tessel::jit(dense)(x, w, b);
  tessel::profile::disable();
  const auto path = std::filesystem::temp_directory_path() / ("kernel_names_" + std::to_string(::getpid()) + ".json");
  tessel::profile::write_chrome_trace(path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  EXPECT_NE(text.str().find("\"contraction dot_general+add+max f32[128,256]\""), std::string::npos) << text.str();
}

TEST(CheckFinite, NamesTheFirstKernelThatStoredANaN) {
  auto x = filled<tensor<float, shape<4, 8>>>(1.0f);
  x[5] = -1.0f;  // log(-1) is NaN
  tessel::run::check_finite(true);
  tessel::run::clear_non_finite();
  const auto y = tessel::jit(log_softmax_sum)(x);
  const auto bad = tessel::run::first_non_finite();
  tessel::run::check_finite(false);
  EXPECT_TRUE(std::isnan(y[0]));
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->index, 0);
  EXPECT_EQ(bad->element, 0u);  // the reduction's one element
  EXPECT_TRUE(std::isnan(bad->value));
  EXPECT_NE(bad->kernel.find("log"), std::string::npos) << bad->kernel;
  EXPECT_NE(bad->to_string().find("stored NaN at element 0"), std::string::npos) << bad->to_string();
  EXPECT_EQ(tessel::run::kernel_observer_slot().load(), nullptr);  // the previous observer is back
}

TEST(CheckFinite, FiniteRunsReportNothingAndAnInfinityIsNamed) {
  auto x = filled<tensor<float, shape<4, 8>>>(1.0f);
  tessel::run::check_finite(true);
  tessel::run::clear_non_finite();
  (void)tessel::jit(log_softmax_sum)(x);
  EXPECT_FALSE(tessel::run::first_non_finite().has_value());
  x[3] = std::numeric_limits<float>::max();
  (void)tessel::jit([](auto v) { return v * 2.0f; })(x);
  const auto bad = tessel::run::first_non_finite();
  tessel::run::check_finite(false);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->element, 3u);
  EXPECT_EQ(bad->count, 1u);
  EXPECT_EQ(bad->value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(bad->kernel, "loop mul f32[4,8]");
}

}  // namespace
