#pragma once
// A program's command line: each flag declared once, with its kind, its variable and its help line. parse()
// reads argv strictly and reports every problem of the line at once (each names the flag, the value and
// what is allowed); the usage text is made from the same declarations.
//
//   tessel::io::command_line cl("train", "Trains a model.");
//   cl.whole("--steps", o.steps, {1, 1'000'000}, "N", "train steps (default 100)");
//   cl.choice("--precision", o.precision, {"f32", "bf16"}, "the compute dtype (default f32)");
//   cl.positive("--learning-rate", o.learning_rate, "X", "the peak learning rate (default 0.001)");
//   cl.path("--checkpoint-dir", o.checkpoint_dir, "DIR", "where checkpoints go");
//   cl.toggle("--resume", o.resume, "continue the run in --checkpoint-dir");
//   if (const auto stop = cl.parse(argc, argv, [&] { return rules_between_flags(o); })) return *stop;
//
// The grammar: `--flag value` or `--flag=value`; a whole number is digits only (no sign, space, fraction
// or exponent) within its range; a positive number is a finite float greater than 0, the whole token; a
// choice is one of its listed values; a toggle takes no value; a flag given twice keeps its last value.
// The exit status of a program that uses it follows one rule: 0, 1 (a failure while running), 2 (a
// refusal of its flags, paths or directories, before it starts the work).

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel::io {

inline constexpr int exit_failed = 1;   // a failure while running
inline constexpr int exit_refused = 2;  // flags, paths or directories refused before the work starts

// The range of a whole-number flag; `lowest_means`, when set, says what the lowest value does
// ("0 (the whole epoch)" in messages and help).
struct whole_range {
  long long lowest = 0;
  long long highest = std::numeric_limits<int>::max();
  const char* lowest_means = nullptr;
};

class command_line {
 public:
  // `program` starts every message ("program: --steps 'x' ..."); `about` heads the usage text.
  explicit command_line(std::string program, std::string about = {});

  template <class Int>
    requires std::is_integral_v<Int> && (!std::is_same_v<Int, bool>)
  command_line& whole(std::string name, Int& to, whole_range range, std::string metavar, std::string help) {
    help += " (" + std::to_string(range.lowest) + " to " + std::to_string(range.highest) + ")";
    return add(std::move(name), std::move(metavar), std::move(help), [&to, range](const std::string& v) {
      long long n = 0;
      if (auto why = parse_whole(v, range, n)) return why;
      to = static_cast<Int>(n);
      return std::optional<std::string>();
    });
  }
  // A finite float greater than 0.
  command_line& positive(std::string name, float& to, std::string metavar, std::string help);
  // One of `allowed`, as text or as a whole number (the usage shows them: "--precision f32|bf16").
  command_line& choice(std::string name, std::string& to, std::initializer_list<const char*> allowed, std::string help);
  command_line& choice(std::string name, int& to, std::initializer_list<int> allowed, std::string help);
  // Any text, the empty text included.
  command_line& text(std::string name, std::string& to, std::string metavar, std::string help);
  // A file or directory name: not empty.
  command_line& path(std::string name, std::string& to, std::string metavar, std::string help);
  // Present or not: takes no value.
  command_line& toggle(std::string name, bool& to, std::string help);
  // A paragraph after the flags in the usage text (what the output is, say).
  command_line& epilogue(std::string text);

  // Reads argv[1..argc). Returns nullopt when the program goes on, or the status main returns: 0 after
  // --help (the usage printed on stdout), exit_refused after a refusal. A refusal prints every problem on
  // stderr, one line each, and then "see --help". `rules` runs after the flags were read (when all of them
  // were good) and returns the problems between flags ("--resume needs --checkpoint-dir").
  std::optional<int> parse(int argc, const char* const* argv, const std::function<std::vector<std::string>()>& rules = {});
  std::optional<int> parse(int argc, char** argv, const std::function<std::vector<std::string>()>& rules = {}) {
    return parse(argc, const_cast<const char* const*>(argv), rules);
  }

  // The problems of the last parse(), in order; empty when it went on.
  const std::vector<std::string>& problems() const noexcept { return problems_; }
  std::string usage() const;

  // Why `text` is not a whole number in `range`, or nullopt (then in `out`).
  static std::optional<std::string> parse_whole(const std::string& text, whole_range range, long long& out);
  // Why `text` is not a finite float greater than 0, or nullopt (then in `out`).
  static std::optional<std::string> parse_positive(const std::string& text, float& out);

 private:
  using setter = std::function<std::optional<std::string>(const std::string&)>;
  struct flag {
    std::string name, metavar, help;
    setter set;          // empty for a toggle
    bool* toggled = nullptr;
  };
  command_line& add(std::string name, std::string metavar, std::string help, setter set);
  const flag* find(const std::string& name) const;
  std::string nearest(const std::string& name) const;

  std::string program_, about_;
  std::vector<std::string> epilogue_;
  std::vector<flag> flags_;
  std::vector<std::string> problems_;
};

}  // namespace tessel::io

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/flags-inl.hpp"
#endif
