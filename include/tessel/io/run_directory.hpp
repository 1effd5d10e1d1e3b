#pragma once
// A training run's checkpoint directory and the policy around it, in one place for every training program:
// - the directory is created and locked (directory_lock) for the run's life; a second writer is refused;
// - a new run into a directory holding checkpoint files is refused, unless it overwrites them (each file
//   deleted is named);
// - a resumed run continues the newest intact checkpoint; refused when the settings that shape the state
//   differ from that run's (each difference named, with the flags that fix it), when the directory mixes
//   runs, or when nothing intact is there (resume-or-start then starts a new run);
// - every checkpoint records the run's random id ("tessel.run") and its settings; the run's newest `keep`
//   are kept, damaged files deleted at the next save (checkpoint_manager).
//
//   tessel::io::run_directory dir("ckpt", {.program = "train", .start = tessel::io::run_start::resume_or_start,
//                                          .settings = {{"--seed", "seed", "0"}}, .keep = 3});
//   if (auto last = dir.take_resume()) last->load(tessel::io::slot("params", params));
//   dir.save(tessel::io::snapshot(step).add("params", params));
//
// Messages speak of the flags --checkpoint-dir, --resume, --resume-or-start and --overwrite, as the
// programs that use it spell them. A refusal throws run_refused (the program exits with exit_refused, 2);
// a failure of the file system (a file that cannot be deleted or read) throws what the file system threw.

#include "tessel/io/checkpoint.hpp"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessel::io {

enum class run_start {
  new_run,          // refused where checkpoint files are
  overwrite,        // a new run that deletes the checkpoint files there first
  resume,           // the newest intact checkpoint's run; refused where there is none
  resume_or_start,  // resume where there is an intact checkpoint, else a new run
};

// What a program's run-directory flags ask for (--checkpoint-dir given, --resume, --resume-or-start,
// --overwrite, --save-every above 0): the rules between them, one problem a line for
// command_line::parse's rules ("--resume needs --checkpoint-dir"), and the run_start they choose.
struct run_request {
  bool directory = false;
  bool resume = false;
  bool resume_or_start = false;
  bool overwrite = false;
  bool save_every = false;
  std::vector<std::string> problems() const;
  run_start start() const;
};

// A setting that shapes a run's state: its flag (in messages), the checkpoint metadata entry that records
// it, its value in this run, and, for a setting added after checkpoints were first written, the value a
// checkpoint that does not record it was run with. A value "true" or "false" is a toggle's.
struct run_setting {
  std::string flag;
  std::string key;
  std::string value;
  std::optional<std::string> unrecorded{};
};

struct run_directory_options {
  std::string program;  // in messages: "written by an older <program>", and the default notice's prefix
  run_start start = run_start::new_run;
  std::vector<run_setting> settings{};
  std::size_t keep = 3;  // checkpoints of this run kept
  // False in a process of a run over several that only reads what to resume: it takes no lock and writes
  // nothing (a new run leaves the directory to the writer).
  bool writer = true;
  // Each file deleted or skipped, as it happens. Default: a line on stderr, "<program>: <text>".
  std::function<void(const std::string&)> notice{};
};

// The directory cannot be used as asked: another writer holds it, another run's files are there, the
// flags shape another run, nothing is there to resume, it mixes runs. The message says which and the fix.
class run_refused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class run_directory {
 public:
  run_directory(std::filesystem::path dir, run_directory_options options);
  run_directory(const run_directory&) = delete;
  run_directory& operator=(const run_directory&) = delete;

  const std::filesystem::path& path() const noexcept { return dir_; }
  // This run's id: 16 hex digits, new for a new run, the checkpoint's for a resumed one.
  const std::string& run() const noexcept { return run_; }
  bool writer() const noexcept { return options_.writer; }
  // The checkpoint to resume from, read and checked; nullopt for a new run and after the first call.
  std::optional<loaded_checkpoint> take_resume() { return std::exchange(resume_, std::nullopt); }
  // Records the run's settings in `s` and saves it (checkpoint_manager::save: asynchronous). Writer only.
  void save(snapshot s);
  // The writer's checkpoint_manager (wait, steps, path_of); throws std::logic_error in a reader.
  checkpoint_manager& checkpoints();
  // "step 2 of run 3f9c0d2e1a2b3c4d (--seed 1 --model mlp)", or "damaged: <why>".
  std::string describe(const checkpoint_file& f) const;

 private:
  void start_new(const std::vector<checkpoint_file>& files);
  void resume(const std::vector<checkpoint_file>& files);
  void notice(const std::string& text) const;

  std::filesystem::path dir_;
  run_directory_options options_;
  std::string run_;
  std::optional<directory_lock> lock_;  // before the manager: released after its last save
  std::optional<checkpoint_manager> checkpoints_;
  std::optional<loaded_checkpoint> resume_;
};

// 16 random hex digits (std::random_device, mixed with the clock and the process id where it has no
// entropy).
std::string new_run_id();

}  // namespace tessel::io

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/run_directory-inl.hpp"
#endif
