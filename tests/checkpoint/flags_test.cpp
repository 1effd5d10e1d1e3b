// flags.hpp: the grammar of each kind of flag (strict whole numbers and ranges, positive floats, choices,
// paths, toggles, --flag=value), every problem of a line reported at once and alone, unknown flags named
// as unknown (with the nearest declared one), the rules between flags, --help, and the usage text.
#include <gtest/gtest.h>

#include <tessel/io/flags.hpp>

#include <string>
#include <vector>

namespace {
namespace io = tessel::io;

struct options {
  int steps = 10;
  std::uint32_t seed = 0;
  float learning_rate = 1e-3f;
  std::string precision = "f32";
  int devices = 1;
  std::string prompt = "The ";
  std::string checkpoint_dir;
  bool resume = false;
};

// Parses `args` with the flags of `o`; the problems (stderr is not read) and the status in `status`.
struct parsed {
  std::optional<int> status;
  std::vector<std::string> problems;
};
parsed parse(options& o, std::vector<std::string> args) {
  io::command_line cl("prog", "A test program.");
  cl.whole("--steps", o.steps, {1, 1000}, "N", "train steps")
      .whole("--seed", o.seed, {0, 4294967295LL}, "N", "the seed")
      .positive("--learning-rate", o.learning_rate, "X", "the peak rate")
      .choice("--precision", o.precision, {"f32", "bf16"}, "the dtype")
      .choice("--devices", o.devices, {1, 2, 4}, "the mesh")
      .text("--prompt", o.prompt, "TEXT", "the prompt")
      .path("--checkpoint-dir", o.checkpoint_dir, "DIR", "checkpoints\nthere")
      .toggle("--resume", o.resume, "continue");
  args.insert(args.begin(), "prog");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  const auto status = cl.parse(static_cast<int>(argv.size()), argv.data(), [&] {
    std::vector<std::string> rules;
    if (o.resume && o.checkpoint_dir.empty()) rules.push_back("--resume needs --checkpoint-dir");
    return rules;
  });
  return {status, cl.problems()};
}

TEST(Flags, ReadsEveryKindInBothSpellings) {
  options o;
  const auto r = parse(o, {"--steps", "20", "--seed=4294967295", "--learning-rate", "2e-3", "--precision=bf16", "--devices", "4",
                           "--prompt=", "--checkpoint-dir", "ckpt", "--resume"});
  EXPECT_FALSE(r.status.has_value());
  EXPECT_TRUE(r.problems.empty());
  EXPECT_EQ(o.steps, 20);
  EXPECT_EQ(o.seed, 4294967295u);
  EXPECT_FLOAT_EQ(o.learning_rate, 2e-3f);
  EXPECT_EQ(o.precision, "bf16");
  EXPECT_EQ(o.devices, 4);
  EXPECT_EQ(o.prompt, "");
  EXPECT_EQ(o.checkpoint_dir, "ckpt");
  EXPECT_TRUE(o.resume);
}

TEST(Flags, RefusesEachBadValueNamingTheFlagTheValueAndWhatIsAllowed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--steps", "1.5"}, "--steps '1.5' is not a whole number; expected a whole number from 1 to 1000"},
      {{"--steps", "0"}, "--steps '0' is out of range; expected a whole number from 1 to 1000"},
      {{"--steps", "+3"}, "--steps '+3' has a sign"},
      {{"--steps", "-3"}, "--steps '-3' is negative"},
      {{"--steps", "3 "}, "--steps '3 ' is not a whole number"},
      {{"--steps="}, "--steps '' is empty"},
      {{"--seed", "4294967296"}, "--seed '4294967296' is out of range; expected a whole number from 0 to 4294967295"},
      {{"--seed", "99999999999999999999999"}, "is out of range"},
      {{"--learning-rate", "nan"}, "--learning-rate 'nan' is not finite; expected a finite number greater than 0"},
      {{"--learning-rate", "0"}, "--learning-rate '0' is not greater than 0"},
      {{"--learning-rate", "1e-3x"}, "--learning-rate '1e-3x' is not a number (it goes on after '1e-3')"},
      {{"--learning-rate", "1e39"}, "is out of a float's range"},
      {{"--precision", "f16"}, "--precision 'f16' is not allowed; expected f32 or bf16"},
      {{"--devices", "3"}, "--devices '3' is not allowed; expected 1, 2 or 4"},
      {{"--checkpoint-dir="}, "--checkpoint-dir '' is empty; expected a path"},
      {{"--resume=yes", "--checkpoint-dir", "c"}, "--resume takes no value (given 'yes')"},
      {{"--steps"}, "--steps needs a value"},
      {{"--steps", "--resume"}, "--steps needs a value (the next argument is the flag --resume)"},
      {{"--stesp", "3"}, "unknown flag --stesp (did you mean --steps?)"},
      {{"--frobnicate"}, "unknown flag --frobnicate"},
      {{"steps"}, "unexpected argument 'steps' (flags start with --)"},
      {{"--resume"}, "--resume needs --checkpoint-dir"},
  };
  for (const auto& [args, message] : cases) {
    options o;
    const auto r = parse(o, args);
    ASSERT_EQ(r.status, io::exit_refused) << args[0];
    ASSERT_EQ(r.problems.size(), 1u) << args[0];
    EXPECT_NE(r.problems[0].find(message), std::string::npos) << r.problems[0];
    EXPECT_EQ(r.problems[0].find("did you mean"), message.find("did you mean")) << r.problems[0];
  }
}

TEST(Flags, ReportsEveryProblemOfALineAndLeavesRulesForAGoodOne) {
  options o;
  const auto r = parse(o, {"--steps", "x", "--precision", "f64", "--bogus", "--resume"});
  ASSERT_EQ(r.status, io::exit_refused);
  ASSERT_EQ(r.problems.size(), 3u);  // the rule between flags waits until every flag is good
  EXPECT_NE(r.problems[0].find("--steps 'x'"), std::string::npos);
  EXPECT_NE(r.problems[1].find("--precision 'f64'"), std::string::npos);
  EXPECT_NE(r.problems[2].find("unknown flag --bogus"), std::string::npos);
  EXPECT_EQ(o.steps, 10);  // a refused value leaves the default
}

TEST(Flags, TheLastOfARepeatedFlagWins) {
  options o;
  EXPECT_FALSE(parse(o, {"--steps", "3", "--steps=5"}).status.has_value());
  EXPECT_EQ(o.steps, 5);
}

TEST(Flags, HelpPrintsTheUsageAndStops) {
  options o;
  testing::internal::CaptureStdout();
  const auto r = parse(o, {"--steps", "x", "--help"});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(out.find("usage: prog [flags]"), std::string::npos) << out;
  EXPECT_NE(out.find("A test program."), std::string::npos) << out;
  EXPECT_NE(out.find("  --checkpoint-dir DIR  checkpoints\n                        there\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  --resume              continue\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Exit status: 0, 1 (a failure while running), 2"), std::string::npos) << out;
}

}  // namespace
