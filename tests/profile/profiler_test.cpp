// The profiler: a Chrome trace that tessel's strict JSON reader parses and that follows the Trace Event
// Format's rules per phase; nothing recorded when disabled; steps, warm-up, input wait and peak memory in
// the summary; events from several threads, the prefetch thread among them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tessel/data/pipeline.hpp"
#include "tessel/io/json.hpp"
#include "tessel/profile/profiler.hpp"
#include "tessel/io/chrome_trace.hpp"
#include "tessel/kernels/gemm.hpp"
#include "chrome_trace_schema.hpp"

namespace {

namespace tp = tessel::profile;
namespace json = tessel::io::json;
using namespace std::chrono_literals;

class Profiler : public ::testing::Test {
 protected:
  void SetUp() override {
    tp::disable();
    tp::clear();
    tp::set_max_events(std::size_t{1} << 22);
  }
  void TearDown() override {
    tp::disable();
    tp::clear();
  }
};

// Checks one event against the Trace Event Format (chrome_trace_schema.hpp).
::testing::AssertionResult valid_event(const json::value& e) {
  const std::string problem = chrome_trace::event_problem(e);
  if (problem.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << problem;
}

// Parses a trace and checks its shape; returns the events.
std::vector<json::value> parse_trace(const std::string& text) {
  json::value root;
  EXPECT_NO_THROW(root = json::parse(text, "chrome trace")) << text.substr(0, 400);
  EXPECT_EQ(root.type, json::kind::object);
  const json::value* events = root.find("traceEvents");
  const json::value* unit = root.find("displayTimeUnit");
  EXPECT_TRUE(events && events->type == json::kind::array);
  EXPECT_TRUE(unit && unit->type == json::kind::string && (unit->text == "ms" || unit->text == "ns"));
  if (!events) return {};
  for (const json::value& e : events->items) EXPECT_TRUE(valid_event(e));
  return events->items;
}

double number(const json::value& e, const char* key) { return std::stod(e.find(key)->text); }

std::vector<const json::value*> named(const std::vector<json::value>& events, const std::string& name, const std::string& ph) {
  std::vector<const json::value*> out;
  for (const json::value& e : events)
    if (e.find("name")->text == name && e.find("ph")->text == ph) out.push_back(&e);
  return out;
}

TEST_F(Profiler, DisabledRecordsNothing) {
  ASSERT_FALSE(tp::enabled());
  {
    tp::scope s("not recorded");
    tp::step st(0, 10);
    tp::counter("c", 1);
    tp::instant("i");
    tp::kernel_event("k", tp::clock::now(), tp::clock::now());
    tp::add_input_wait(5ms);
    tp::record_peak_memory(123);
    tp::mark_warmup_end();
  }
  const auto events = parse_trace(tp::chrome_trace_json());
  ASSERT_EQ(events.size(), 2u);  // the process's name and labels alone
  EXPECT_EQ(events[0].find("name")->text, "process_name");
  EXPECT_EQ(events[1].find("name")->text, "process_labels");
  EXPECT_NE(events[1].find("args")->find("labels")->text.find(std::string("bf16 x bf16 products: ") + tessel::kernels::hwy_gemm_bf16_path()),
            std::string::npos);
  const tp::summary s = tp::summarize();
  EXPECT_EQ(s.events, 0u);
  EXPECT_EQ(s.steps, 0u);
  EXPECT_EQ(s.peak_memory_bytes, 0u);
  EXPECT_TRUE(tp::steps().empty());
}

TEST_F(Profiler, TraceFollowsTheChromeSchema) {
  tp::enable();
  tp::set_thread_name("main");
  auto pipeline = tessel::data::from_indices(12) | tessel::data::map([](std::size_t i) { return static_cast<int>(i); }) |
                  tessel::data::batch<4>() | tessel::data::prefetch(2);
  for (std::uint64_t i = 0; i < 4; ++i) {
    auto b = pipeline.next();
    tp::step st(i, 4);
    {
      tp::scope outer("forward");
      tp::scope inner("matmul \"quoted\" \xff");  // escaped, and the invalid byte replaced
      const auto t0 = tp::clock::now();
      std::this_thread::sleep_for(1ms);
      tp::kernel_event("fused_dot_add", t0, tp::clock::now(), {.flops = 2e6, .bytes = 4096, .estimated_ns = 800});
    }
    tp::counter("loss", 2.5 - static_cast<double>(i));
    if (i == 2) tp::mark_warmup_end();  // inside step 2: it ends after the mark, so it is steady
  }
  std::thread other([] {
    tp::set_thread_name("worker");
    tp::scope s("on another thread");
    tp::instant("worker mark");
  });
  other.join();
  tp::record_peak_memory(1000);
  tp::record_peak_memory(500);

  const auto dir = std::filesystem::temp_directory_path() / ("tessel-trace-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  tp::write_chrome_trace(dir / "trace.json");
  std::stringstream text;
  text << std::ifstream(dir / "trace.json").rdbuf();
  std::filesystem::remove_all(dir);
  const auto events = parse_trace(text.str());

  std::map<std::uint64_t, std::string> thread_names;
  for (const auto* m : named(events, "thread_name", "M")) thread_names[*m->find("tid")->integer] = m->find("args")->find("name")->text;
  const auto thread_of = [&](const json::value* e) { return thread_names[*e->find("tid")->integer]; };

  const auto steps = named(events, "step", "X");
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(number(*steps[2]->find("args"), "step"), 2);
  EXPECT_EQ(number(*steps[2]->find("args"), "items"), 4);
  EXPECT_EQ(thread_of(steps[0]), "main");

  const auto warmup = named(events, "warmup_end", "i");
  ASSERT_EQ(warmup.size(), 1u);
  EXPECT_EQ(warmup[0]->find("s")->text, "g");
  EXPECT_GT(number(*warmup[0], "ts"), number(*steps[2], "ts"));
  EXPECT_LT(number(*warmup[0], "ts"), number(*steps[3], "ts"));

  const auto outer = named(events, "forward", "X");
  const auto inner = named(events, "matmul \"quoted\" ?", "X");
  ASSERT_EQ(outer.size(), 4u);
  ASSERT_EQ(inner.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {  // nested: inside its parent, which is inside its step
    EXPECT_GE(number(*inner[i], "ts"), number(*outer[i], "ts"));
    EXPECT_LE(number(*inner[i], "ts") + number(*inner[i], "dur"), number(*outer[i], "ts") + number(*outer[i], "dur"));
    EXPECT_LE(number(*outer[i], "ts") + number(*outer[i], "dur"), number(*steps[i], "ts") + number(*steps[i], "dur"));
    EXPECT_GE(number(*inner[i], "dur"), 1000);  // it slept 1 ms: dur is in microseconds
  }

  const auto kernels = named(events, "fused_dot_add", "X");
  ASSERT_EQ(kernels.size(), 4u);
  EXPECT_EQ(kernels[0]->find("cat")->text, "kernel");
  EXPECT_EQ(number(*kernels[0]->find("args"), "flops"), 2e6);
  EXPECT_EQ(number(*kernels[0]->find("args"), "estimated_us"), 0.8);

  const auto produced = named(events, "data.produce", "X");
  ASSERT_GE(produced.size(), 4u);
  EXPECT_EQ(thread_of(produced[0]), "tessel prefetch");
  EXPECT_EQ(thread_of(named(events, "on another thread", "X").at(0)), "worker");
  EXPECT_EQ(named(events, "worker mark", "i").size(), 1u);

  const auto loss = named(events, "loss", "C");
  ASSERT_EQ(loss.size(), 4u);
  EXPECT_EQ(number(*loss[3]->find("args"), "value"), -0.5);
  EXPECT_EQ(named(events, "step_time_ms", "C").size(), 4u);
  EXPECT_EQ(named(events, "throughput", "C").size(), 4u);
  const auto memory = named(events, "peak_memory_bytes", "C");
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(number(*memory[1]->find("args"), "value"), 1000);
}

TEST_F(Profiler, SummaryCountsSteadyStepsOnly) {
  tp::enable();
  for (std::uint64_t i = 0; i < 6; ++i) {
    tp::add_input_wait(i < 2 ? 50ms : 1ms);  // the warm-up's waits do not count
    {
      tp::step st(i, 100);
      std::this_thread::sleep_for(i < 2 ? 20ms : 2ms);
    }
    if (i == 1) tp::mark_warmup_end();  // after step 1 ended: steps 0 and 1 are warm-up
  }
  tp::record_peak_memory(4096);
  const tp::summary s = tp::summarize();
  EXPECT_EQ(s.steps, 6u);
  EXPECT_EQ(s.warmup_steps, 2u);
  EXPECT_EQ(s.input_wait, 4ms);
  EXPECT_GE(s.step_min, 2ms);
  EXPECT_LT(s.step_median, 20ms);
  EXPECT_GT(s.items_per_second, 0);
  EXPECT_LE(s.items_per_second, 100 / 0.002);  // at most 100 items per 2 ms step
  EXPECT_GT(s.input_wait_fraction, 0);
  EXPECT_LT(s.input_wait_fraction, 1);
  EXPECT_EQ(s.peak_memory_bytes, 4096u);
  EXPECT_NE(s.to_string().find("steps: 6 (2 warm-up)"), std::string::npos) << s.to_string();
  const auto records = tp::steps();
  ASSERT_EQ(records.size(), 6u);
  EXPECT_TRUE(records[1].warmup);
  EXPECT_FALSE(records[2].warmup);
  EXPECT_EQ(records[3].input_wait, 1ms);
}

TEST_F(Profiler, PrefetchFeedsInputWait) {
  tp::enable();
  auto s = tessel::data::from_indices(3) | tessel::data::map([](std::size_t i) {
             std::this_thread::sleep_for(5ms);
             return static_cast<int>(i);
           }) |
           tessel::data::prefetch(1);
  for (std::uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.next());
    tp::step st(i, 1);
  }
  const tp::summary sum = tp::summarize();
  EXPECT_EQ(sum.warmup_steps, 0u);
  EXPECT_EQ(sum.input_wait, s.stats().consumer_wait);
  EXPECT_GE(sum.input_wait, 4ms);  // at least the first element's production
  EXPECT_FALSE(named(parse_trace(tp::chrome_trace_json()), "data.wait", "X").empty());
}

TEST_F(Profiler, ThreadsRecordConcurrentlyWithTraceWriting) {
  tp::enable();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 2000; ++i) tp::scope s("work");
    });
  for (int i = 0; i < 5; ++i) (void)parse_trace(tp::chrome_trace_json());
  for (auto& t : threads) t.join();
  EXPECT_EQ(named(parse_trace(tp::chrome_trace_json()), "work", "X").size(), 8000u);
  EXPECT_EQ(tp::summarize().events, 8000u);
}

TEST_F(Profiler, EventLimitAndClear) {
  tp::enable();
  tp::set_max_events(10);
  for (int i = 0; i < 25; ++i) tp::instant("x");
  EXPECT_EQ(tp::summarize().events, 10u);
  EXPECT_EQ(tp::summarize().dropped_events, 15u);
  tp::set_max_events(100);
  {
    tp::scope open("open across clear");
    tp::clear();
    tp::instant("after");
  }  // its end finds a cleared buffer and writes nothing
  const auto events = parse_trace(tp::chrome_trace_json());
  EXPECT_TRUE(named(events, "open across clear", "X").empty());
  EXPECT_EQ(named(events, "after", "i").size(), 1u);
}

}  // namespace
