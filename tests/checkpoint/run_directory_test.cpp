// run_directory.hpp: a training run's checkpoint directory. A new run, its lock and its identity in every
// checkpoint; refusals (another writer, another run's files, settings that shape another run, nothing to
// resume, mixed runs, a file without an identity), each with its fix; --overwrite naming what it deletes;
// resume-or-start; a reading process; keep-N; the rules between the run-directory flags.
#include <gtest/gtest.h>

#include <tessel/io/run_directory.hpp>

#include <string>
#include <vector>

#include "test_files.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using namespace checkpoint_test;
namespace io = tessel::io;

std::vector<io::run_setting> settings(std::string seed, std::string tp = "false") {
  return {{"--seed", "seed", std::move(seed)}, {"--tensor-parallel", "tensor_parallel", std::move(tp), "false"}};
}

struct recorder {
  std::vector<std::string> lines;
  std::function<void(const std::string&)> notice() {
    return [this](const std::string& s) { lines.push_back(s); };
  }
};

io::run_directory_options options(io::run_start start, std::string seed, recorder& r, std::string tp = "false") {
  return {.program = "prog", .start = start, .settings = settings(std::move(seed), std::move(tp)), .keep = 3, .notice = r.notice()};
}

void save_steps(io::run_directory& rd, std::initializer_list<std::uint64_t> steps) {
  for (const std::uint64_t s : steps) {
    tensor<float, shape<2>> w;
    w[0] = static_cast<float>(s), w[1] = 1;
    rd.save(io::snapshot(s).add("w", w));
  }
  rd.checkpoints().wait();
}

TEST(RunDirectory, ANewRunLocksTheDirectoryAndRecordsItsIdentity) {
  temp_dir tmp;
  recorder r;
  const auto dir = tmp / "ckpt";
  io::run_directory rd(dir, options(io::run_start::new_run, "1", r));
  EXPECT_EQ(rd.run().size(), 16u);
  EXPECT_EQ(rd.run().find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_FALSE(rd.take_resume());
  EXPECT_TRUE(throws_with<io::run_refused>([&] { io::run_directory second(dir, options(io::run_start::resume, "1", r)); },
                                           {"--checkpoint-dir: ", "is in use by another writer"}));
  save_steps(rd, {1, 2});
  const auto files = io::list_checkpoints(dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1].run(), rd.run());
  EXPECT_EQ(files[1].metadata.at("seed"), "1");
  EXPECT_EQ(files[1].metadata.at("tensor_parallel"), "false");
  EXPECT_EQ(rd.describe(files[1]), "step 2 of run " + rd.run() + " (--seed 1)");
  EXPECT_TRUE(r.lines.empty());
}

TEST(RunDirectory, ANewRunIntoAnotherRunsFilesIsRefusedUnlessItOverwritesThem) {
  temp_dir tmp;
  recorder r;
  const auto dir = tmp / "ckpt";
  std::string first;
  {
    io::run_directory rd(dir, options(io::run_start::new_run, "1", r));
    save_steps(rd, {2});
    first = rd.run();
  }
  EXPECT_TRUE(throws_with<io::run_refused>([&] { io::run_directory rd(dir, options(io::run_start::new_run, "2", r)); },
                                           {" holds checkpoints of another run:\n  ", "ckpt-000000000002.safetensors: step 2 of run " + first,
                                            "fix: --resume to continue that run, --overwrite"}));
  EXPECT_TRUE(std::filesystem::exists(dir / "ckpt-000000000002.safetensors"));  // refused: nothing lost
  io::run_directory rd(dir, options(io::run_start::overwrite, "2", r));
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_NE(r.lines[0].find("--overwrite: deleted "), std::string::npos);
  EXPECT_NE(r.lines[0].find("ckpt-000000000002.safetensors: step 2 of run " + first + " (--seed 1)"), std::string::npos) << r.lines[0];
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt-000000000002.safetensors"));
  EXPECT_NE(rd.run(), first);
}

TEST(RunDirectory, ResumesTheNewestIntactCheckpointOfItsRun) {
  temp_dir tmp;
  recorder r;
  const auto dir = tmp / "ckpt";
  std::string run;
  {
    io::run_directory rd(dir, options(io::run_start::new_run, "1", r));
    save_steps(rd, {1, 2, 3});
    run = rd.run();
  }
  write_bytes(dir / "ckpt-000000000004.safetensors", bytes_of("truncated"));
  io::run_directory rd(dir, options(io::run_start::resume, "1", r));
  EXPECT_EQ(rd.run(), run);
  auto last = rd.take_resume();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->step, 3u);
  EXPECT_FALSE(rd.take_resume());
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_NE(r.lines[0].find("skipped a damaged checkpoint (deleted at the next save): "), std::string::npos) << r.lines[0];
  save_steps(rd, {4});  // the damaged file of step 4 is replaced
  EXPECT_TRUE(io::list_checkpoints(dir).back().intact());
}

TEST(RunDirectory, RefusesToResumeWithSettingsOfAnotherRunNamingEachAndTheFix) {
  temp_dir tmp;
  recorder r;
  const auto dir = tmp / "ckpt";
  {
    io::run_directory rd(dir, options(io::run_start::new_run, "1", r, "true"));
    save_steps(rd, {2});
  }
  EXPECT_TRUE(throws_with<io::run_refused>([&] { io::run_directory rd(dir, options(io::run_start::resume, "0", r)); },
                                           {"cannot resume: ", "ckpt-000000000002.safetensors is step 2 of run ",
                                            "(--seed 1 --tensor-parallel), and these flags shape another run:",
                                            "\n  --seed: the run has 1, these flags give 0",
                                            "\n  --tensor-parallel: the run has true, these flags give false",
                                            "fix: give the run's flags (--seed 1 --tensor-parallel)"}));
}

TEST(RunDirectory, ASettingAddedLaterReadsAsItsOldValueWhereUnrecorded) {
  temp_dir tmp;
  recorder r;
  const auto dir = tmp / "ckpt";
  {
    io::checkpoint_manager old(dir, {.asynchronous = false, .run = "0123456789abcdef"});
    old.save(io::snapshot(5).set("seed", "1"));  // written before --tensor-parallel was recorded
  }
  io::run_directory rd(dir, options(io::run_start::resume, "1", r));
  EXPECT_EQ(rd.run(), "0123456789abcdef");
  EXPECT_EQ(rd.take_resume()->step, 5u);
}

TEST(RunDirectory, NothingToResumeIsRefusedOrStartsANewRun) {
  temp_dir tmp;
  recorder r;
  EXPECT_TRUE(throws_with<io::run_refused>([&] { io::run_directory rd(tmp / "empty", options(io::run_start::resume, "1", r)); },
                                           {"--resume: no intact checkpoint in ", "(it holds no checkpoint files)",
                                            "fix: --resume-or-start"}));
  const auto dir = tmp / "ckpt";
  std::filesystem::create_directories(dir);
  write_bytes(dir / "ckpt-000000000010.safetensors", bytes_of("not a checkpoint"));
  EXPECT_TRUE(throws_with<io::run_refused>([&] { io::run_directory rd(dir, options(io::run_start::resume, "1", r)); },
                                           {"ckpt-000000000010.safetensors: damaged: "}));
  io::run_directory rd(dir, options(io::run_start::resume_or_start, "1", r));
  EXPECT_FALSE(rd.take_resume());
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_NE(r.lines[0].find(": starting a new run (the damaged files are deleted at its first save):"), std::string::npos);
  save_steps(rd, {1});
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt-000000000010.safetensors"));
}

TEST(RunDirectory, RefusesADirectoryThatMixesRunsOrAFileWithoutAnIdentity) {
  temp_dir tmp;
  recorder r;
  const auto dir = tmp / "ckpt";
  {
    io::checkpoint_manager other(dir, {.asynchronous = false, .run = "ffffffffffffffff"});
    other.save(io::snapshot(1).set("seed", "1"));
  }
  {
    io::run_directory rd(dir, options(io::run_start::resume_or_start, "1", r));  // resumes run ffff...
    EXPECT_EQ(rd.run(), "ffffffffffffffff");
  }
  {
    io::checkpoint_manager mine(dir, {.asynchronous = false, .run = "1111111111111111"});
    mine.save(io::snapshot(2).set("seed", "1"));
  }
  EXPECT_TRUE(throws_with<io::run_refused>([&] { io::run_directory rd(dir, options(io::run_start::resume, "1", r)); },
                                           {" mixes runs: the newest intact checkpoint is ", "of other runs:",
                                            "step 1 of run ffffffffffffffff", "fix: move the other runs' files elsewhere"}));
  const auto old = tmp / "old";
  {
    io::checkpoint_manager anonymous(old, {.asynchronous = false});
    anonymous.save(io::snapshot(1));
  }
  EXPECT_TRUE(throws_with<io::run_refused>([&] { io::run_directory rd(old, options(io::run_start::resume, "1", r)); },
                                           {"records no run identity (it was written by an older prog)", "--overwrite"}));
}

TEST(RunDirectory, AReadingProcessTakesNoLockAndWritesNothing) {
  temp_dir tmp;
  recorder r;
  const auto dir = tmp / "ckpt";
  io::run_directory writer(dir, options(io::run_start::new_run, "1", r));
  save_steps(writer, {3});
  auto reading = options(io::run_start::resume, "1", r);
  reading.writer = false;
  io::run_directory reader(dir, reading);  // the writer's lock does not stop it
  EXPECT_EQ(reader.run(), writer.run());
  EXPECT_EQ(reader.take_resume()->step, 3u);
  EXPECT_THROW(reader.checkpoints(), std::logic_error);
  auto fresh = options(io::run_start::new_run, "1", r);
  fresh.writer = false;
  io::run_directory new_reader(tmp / "elsewhere", fresh);
  EXPECT_FALSE(std::filesystem::exists(tmp / "elsewhere"));
}

TEST(RunDirectory, KeepsTheNewestOfItsRun) {
  temp_dir tmp;
  recorder r;
  auto two = options(io::run_start::new_run, "1", r);
  two.keep = 2;
  io::run_directory rd(tmp / "ckpt", two);
  save_steps(rd, {1, 2, 3, 4, 5});
  EXPECT_EQ(rd.checkpoints().steps(), (std::vector<std::uint64_t>{4, 5}));
}

}  // namespace

namespace {
TEST(RunRequest, NamesTheFlagsThatNeedADirectoryOrContradictAndChoosesTheStart) {
  namespace io = tessel::io;
  EXPECT_TRUE((io::run_request{.directory = true, .resume = true}.problems().empty()));
  EXPECT_EQ((io::run_request{.resume = true, .save_every = true}.problems()),
            (std::vector<std::string>{"--resume needs --checkpoint-dir", "--save-every needs --checkpoint-dir"}));
  EXPECT_EQ((io::run_request{.directory = true, .resume_or_start = true, .overwrite = true}.problems()),
            (std::vector<std::string>{"--overwrite starts a new run and --resume-or-start continues one: give one of them"}));
  EXPECT_EQ((io::run_request{.directory = true}.start()), io::run_start::new_run);
  EXPECT_EQ((io::run_request{.directory = true, .resume = true}.start()), io::run_start::resume);
  EXPECT_EQ((io::run_request{.directory = true, .resume = true, .resume_or_start = true}.start()), io::run_start::resume_or_start);
  EXPECT_EQ((io::run_request{.directory = true, .overwrite = true}.start()), io::run_start::overwrite);
}
}  // namespace
