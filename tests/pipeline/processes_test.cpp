// A pipeline whose stage axis spans processes (mpirun -np 2 or 4, one stage each): loss and gradients
// bit for bit those of the same mesh run as threads of one process, for 1F1B, zero bubble and circular
// schedules, and with a data axis over processes too (4 processes: data 2 x stage 2); a process that stops
// answering ends the run with a message, not a hang (--stall).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "model.hpp"
#include "tessel/distributed.hpp"

namespace {
using namespace tessel;
using namespace pipeline_model;

template <class Across, class Within, class Sched, std::size_t M>
void expect_one_process() {
  const auto p = parameters();
  const auto x = filled<batch_t>(0.0f), t = filled<batch_t>(1.0f);
  const auto [value, grads] = pipeline<Across, "stage", Sched, M>(stage, loss)(p, x, t);
  const auto [want_value, want] = pipeline<Within, "stage", Sched, M>(stage, loss)(p, x, t);
  EXPECT_TRUE(same_bits(value, want_value)) << value.data()[0] << " against " << want_value.data()[0];
  EXPECT_TRUE(same_bits(grads.w, want.w));
  EXPECT_TRUE(same_bits(grads.b, want.b));
}

// Each process reports its own device's steps, and every device's kept bytes.
TEST(PipelineProcesses, ReportsThisProcesssSteps) {
  if (distributed::process_count() != 2) GTEST_SKIP() << "run under mpirun -np 2";
  const auto p = parameters();
  const auto x = filled<batch_t>(0.0f), t = filled<batch_t>(1.0f);
  const auto r = pipeline<mesh<axis<"stage", 2, over_processes>>, "stage", schedules::gpipe, 4>(stage, loss).run(p, x, t);
  const std::size_t here = distributed::process_index();
  ASSERT_EQ(r.report.devices.size(), 2u);
  EXPECT_EQ(r.report.devices[here].size(), 8u);  // 4 forwards, 4 backwards
  EXPECT_TRUE(r.report.devices[1 - here].empty());
  constexpr std::size_t act_bytes = batch / 4 * width * sizeof(float);
  EXPECT_EQ(r.report.peak_kept_bytes[0], 4 * act_bytes);
  EXPECT_EQ(r.report.peak_kept_bytes[1], 4 * act_bytes);
  EXPECT_GE(r.report.bubble(), 0.0);
  EXPECT_LT(r.report.bubble(), 1.0);
}

TEST(PipelineProcesses, StagesOverProcessesAreOneProcesss) {
  if (distributed::process_count() == 2) {
    using across = mesh<axis<"stage", 2, over_processes>>;
    using within = mesh<axis<"stage", 2>>;
    expect_one_process<across, within, schedules::one_f_one_b, 4>();
    expect_one_process<across, within, schedules::zero_bubble, 4>();
    expect_one_process<across, within, schedules::circular<2>, 4>();
    expect_one_process<across, within, schedules::gpipe, 8>();
  } else if (distributed::process_count() == 4) {
    expect_one_process<mesh<axis<"stage", 4, over_processes>>, mesh<axis<"stage", 4>>, schedules::one_f_one_b, 4>();
    expect_one_process<mesh<axis<"data", 2, over_processes>, axis<"stage", 2, over_processes>>, mesh<axis<"data", 2>, axis<"stage", 2>>,
                       schedules::one_f_one_b, 4>();
  } else {
    GTEST_SKIP() << "run under mpirun -np 2 or 4";
  }
}

}  // namespace

// --stall: process 1 never runs its stage; process 0 waits for its first cotangent at most 3 s, then ends
// the run with a message naming the transfer and the process.
int stall() {
  if (distributed::process_index() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  const auto p = parameters();
  const auto x = filled<batch_t>(0.0f), t = filled<batch_t>(1.0f);
  pipeline<mesh<axis<"stage", 2, over_processes>>, "stage", schedules::one_f_one_b, 4>(stage, loss)(p, x, t);
  return 0;
}

int main(int argc, char** argv) {
  const bool stalling = argc > 1 && std::string(argv[1]) == "--stall";
  distributed::init(argc, argv, {.timeout_seconds = stalling ? 3.0 : 60.0});
  if (stalling) return stall();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
