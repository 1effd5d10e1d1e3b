// The child of checkpoint_crash_test: resumes from the newest intact checkpoint in argv[1] (checking it),
// then prints "saving" and saves checkpoints of steps after it in a loop, asynchronously, until it is
// killed. Every tensor is
// a function of the step (content_of), so that the parent can check whatever it restores.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "crash_content.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_crash_writer DIR\n");
    return 2;
  }
  try {
    tessel::io::checkpoint_manager mgr(argv[1], {.keep = 3});
    std::uint64_t step = 0;
    if (const auto last = mgr.restore_latest()) {
      crash_content::state s;
      last->load(tessel::io::slot("state", s));
      if (!crash_content::matches(s, last->step) || last->key() != crash_content::key_of(last->step)) {
        std::fprintf(stderr, "checkpoint_crash_writer: step %llu restored with wrong contents\n",
                     static_cast<unsigned long long>(last->step));
        return 3;
      }
      step = last->step + 1;
    }
    // Tells the parent that start-up and the restore are over, so that it can aim kills at the saves.
    std::fputs("saving\n", stdout);
    std::fflush(stdout);
    for (;; ++step) {
      const crash_content::state s = crash_content::content_of(step);
      tessel::io::snapshot snap(step);
      snap.add("state", s).set_key(crash_content::key_of(step));
      mgr.save(std::move(snap));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_crash_writer: %s\n", e.what());
    return 1;
  }
}
