// The crash test of issue 7: a child (checkpoint_crash_writer) saves checkpoints in a loop and is killed
// with SIGKILL at random moments, 60 times; after every kill the newest intact checkpoint must restore
// and hold exactly what was saved for its step, and the steps never go back.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "crash_content.hpp"
#include "test_files.hpp"

#ifndef TESSEL_CRASH_WRITER
#error "TESSEL_CRASH_WRITER: the path of checkpoint_crash_writer (tests/checkpoint/CMakeLists.txt)"
#endif

namespace {
namespace io = tessel::io;

TEST(CheckpointCrash, SigkillAtRandomMomentsLeavesALoadableCheckpoint) {
  checkpoint_test::temp_dir dir;
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> delay_us(0, 60000);
  std::uint64_t last_step = 0;
  int restored = 0, skipped_files = 0, mid_write = 0;
  constexpr int kills = 60;
  for (int round = 0; round < kills; ++round) {
    int saving[2];  // the child prints "saving" on it once start-up and its restore are over
    ASSERT_EQ(::pipe(saving), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::dup2(saving[1], STDOUT_FILENO);
      ::close(saving[0]);
      ::close(saving[1]);
      ::execl(TESSEL_CRASH_WRITER, TESSEL_CRASH_WRITER, dir.path().c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(saving[1]);
    // Odd rounds wait until the child saves before the random delay, so that kills land during writes
    // however slowly a sanitizer build starts; even rounds kill anywhere, during start-up or a restore too.
    if (round % 2 == 1) {
      pollfd ready{.fd = saving[0], .events = POLLIN, .revents = 0};
      ASSERT_EQ(::poll(&ready, 1, 20000), 1) << "round " << round << ": the writer did not start saving in 20 s";
    }
    // The first round lets the child write a checkpoint before the kill.
    if (round == 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      const auto written = [&] {  // not through a manager: its constructor removes the child's temporary files
        for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
          if (entry.path().extension() == ".safetensors") return true;
        return false;
      };
      while (!written() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ::close(saving[0]);  // only now: a child that printed to a closed pipe would die of SIGPIPE
    // A child that exited by itself failed (it restores and checks the newest checkpoint on start).
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "round " << round << ": the writer exited with status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) ++mid_write;
    io::checkpoint_manager mgr(dir.path(), {.keep = 3, .asynchronous = false});
    const auto last = mgr.restore_latest();
    if (!last) {
      ASSERT_EQ(restored, 0) << "round " << round << ": every checkpoint was lost";
      continue;
    }
    skipped_files += static_cast<int>(last->skipped.size());
    crash_content::state s;
    last->load(io::slot("state", s));
    ASSERT_TRUE(crash_content::matches(s, last->step)) << "round " << round << ", step " << last->step;
    ASSERT_EQ(last->key(), crash_content::key_of(last->step));
    if (restored > 0) {
      ASSERT_GE(last->step, last_step) << "round " << round;
    }
    last_step = last->step;
    ++restored;
    // Each killed writer may leave one file it had not yet pruned; the next save prunes to 3.
    tessel::io::snapshot next(last->step + 1);
    next.add("state", crash_content::content_of(last->step + 1)).set_key(crash_content::key_of(last->step + 1));
    mgr.save(std::move(next));
    ASSERT_EQ(mgr.steps().size(), 3u);
    ASSERT_EQ(mgr.steps().back(), last->step + 1);
  }
  EXPECT_EQ(restored, kills);
  EXPECT_GT(last_step, 60u);
  EXPECT_GT(mid_write, 0) << "no kill landed during a write: the test proves little";
  std::printf("%d kills (%d during a write: a temporary file left), %d restores, last step %llu, %d unreadable newest "
              "files skipped\n", kills, mid_write, restored, static_cast<unsigned long long>(last_step), skipped_files);
}

}  // namespace
