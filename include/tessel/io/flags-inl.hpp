// Definitions of tessel/io/flags.hpp's functions: compiled once, in the tessel library (src/tessel.cpp), or
// in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before including
// tessel/tessel.hpp.
#pragma once

#include "tessel/io/flags.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>

namespace tessel::io {

namespace detail {

// "a, b or c"
inline std::string one_of(const std::vector<std::string>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  return out;
}

inline std::string expected_whole(whole_range range) {
  const std::string lowest = range.lowest_means ? range.lowest_means : std::to_string(range.lowest);
  return "expected a whole number from " + lowest + " to " + std::to_string(range.highest);
}

// Edits (insertions, deletions, substitutions) between two flag names.
inline std::size_t edits(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "a|b|c": a choice's metavar.
inline std::string alternatives(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : "|") + v;
  return out;
}

}  // namespace detail

command_line::command_line(std::string program, std::string about) : program_(std::move(program)), about_(std::move(about)) {}

std::optional<std::string> command_line::parse_whole(const std::string& text, whole_range range, long long& out) {
  const std::string expected = "; " + detail::expected_whole(range);
  if (text.empty()) return "is empty" + expected;
  if (text[0] == '-') return "is negative" + expected;
  if (text[0] == '+') return "has a sign" + expected;
  if (text[0] < '0' || text[0] > '9') return "is not a whole number" + expected;
  unsigned long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (end != text.data() + text.size()) return "is not a whole number" + expected;
  if (ec == std::errc::result_out_of_range || v > static_cast<unsigned long long>(range.highest) ||
      static_cast<long long>(v) < range.lowest)
    return "is out of range" + expected;
  out = static_cast<long long>(v);
  return std::nullopt;
}

std::optional<std::string> command_line::parse_positive(const std::string& text, float& out) {
  const std::string expected = "; expected a finite number greater than 0, such as 0.001";
  if (text.empty()) return "is empty" + expected;
  float v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::invalid_argument) return "is not a number" + expected;
  if (end != text.data() + text.size()) return "is not a number (it goes on after '" + std::string(text.data(), end) + "')" + expected;
  if (ec == std::errc::result_out_of_range) return "is out of a float's range" + expected;
  if (!std::isfinite(v)) return "is not finite" + expected;
  if (!(v > 0)) return "is not greater than 0" + expected;
  out = v;
  return std::nullopt;
}

command_line& command_line::add(std::string name, std::string metavar, std::string help, setter set) {
  flags_.push_back({std::move(name), std::move(metavar), std::move(help), std::move(set), nullptr});
  return *this;
}

command_line& command_line::positive(std::string name, float& to, std::string metavar, std::string help) {
  return add(std::move(name), std::move(metavar), std::move(help), [&to](const std::string& v) { return parse_positive(v, to); });
}

command_line& command_line::choice(std::string name, std::string& to, std::initializer_list<const char*> allowed, std::string help) {
  std::vector<std::string> values(allowed.begin(), allowed.end());
  return add(std::move(name), detail::alternatives(values), std::move(help), [&to, values](const std::string& v) -> std::optional<std::string> {
    if (std::find(values.begin(), values.end(), v) == values.end()) return "is not allowed; expected " + detail::one_of(values);
    to = v;
    return std::nullopt;
  });
}

command_line& command_line::choice(std::string name, int& to, std::initializer_list<int> allowed, std::string help) {
  std::vector<std::string> values;
  for (const int a : allowed) values.push_back(std::to_string(a));
  return add(std::move(name), detail::alternatives(values), std::move(help), [&to, values](const std::string& v) -> std::optional<std::string> {
    if (std::find(values.begin(), values.end(), v) == values.end()) return "is not allowed; expected " + detail::one_of(values);
    to = std::stoi(v);
    return std::nullopt;
  });
}

command_line& command_line::text(std::string name, std::string& to, std::string metavar, std::string help) {
  return add(std::move(name), std::move(metavar), std::move(help), [&to](const std::string& v) {
    to = v;
    return std::optional<std::string>();
  });
}

command_line& command_line::path(std::string name, std::string& to, std::string metavar, std::string help) {
  return add(std::move(name), std::move(metavar), std::move(help), [&to](const std::string& v) -> std::optional<std::string> {
    if (v.empty()) return "is empty; expected a path";
    to = v;
    return std::nullopt;
  });
}

command_line& command_line::toggle(std::string name, bool& to, std::string help) {
  flags_.push_back({std::move(name), "", std::move(help), {}, &to});
  return *this;
}

command_line& command_line::epilogue(std::string text) {
  epilogue_.push_back(std::move(text));
  return *this;
}

const command_line::flag* command_line::find(const std::string& name) const {
  for (const flag& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

// " (did you mean --steps?)" for a name one or two edits from a declared flag's.
std::string command_line::nearest(const std::string& name) const {
  const flag* best = nullptr;
  std::size_t fewest = 3;
  for (const flag& f : flags_)
    if (const std::size_t e = detail::edits(name, f.name); e < fewest) best = &f, fewest = e;
  return best ? " (did you mean " + best->name + "?)" : "";
}

std::optional<int> command_line::parse(int argc, const char* const* argv, const std::function<std::vector<std::string>()>& rules) {
  problems_.clear();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage().c_str(), stdout);
      return 0;
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!arg.starts_with("--")) {
      problems_.push_back("unexpected argument '" + arg + "' (flags start with --)");
      continue;
    }
    std::optional<std::string> value;
    if (const std::size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    const flag* f = find(arg);
    if (f == nullptr) {
      problems_.push_back("unknown flag " + arg + nearest(arg));
      // What follows, if not a flag, is taken as its value: one mistake, one problem.
      if (!value && i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--")) ++i;
      continue;
    }
    if (f->toggled != nullptr) {
      if (value) problems_.push_back(arg + " takes no value (given '" + *value + "')");
      else *f->toggled = true;
      continue;
    }
    if (!value) {
      if (i + 1 >= argc || std::string_view(argv[i + 1]).starts_with("--")) {
        const std::string next = i + 1 < argc ? " (the next argument is the flag " + std::string(argv[i + 1]) + ")" : "";
        problems_.push_back(arg + " needs a value" + next);
        continue;
      }
      value = argv[++i];
    }
    if (const auto why = f->set(*value)) problems_.push_back(arg + " '" + *value + "' " + *why);
  }
  if (problems_.empty() && rules) problems_ = rules();
  if (problems_.empty()) return std::nullopt;
  for (const std::string& p : problems_) std::fprintf(stderr, "%s: %s\n", program_.c_str(), p.c_str());
  std::fprintf(stderr, "%s: see --help\n", program_.c_str());
  return exit_refused;
}

std::string command_line::usage() const {
  std::string out = "usage: " + program_ + " [flags]   (--flag value or --flag=value)\n";
  if (!about_.empty()) out += about_ + "\n";
  std::vector<flag> rows = flags_;
  rows.push_back({"--help", "", "this text", {}, nullptr});
  std::size_t width = 0;  // of the widest "--flag METAVAR" up to 22 characters; a wider one has its help below it
  for (const flag& f : rows) width = std::max(width, f.name.size() + (f.metavar.empty() ? 0 : f.metavar.size() + 1));
  const std::size_t indent = std::min<std::size_t>(width, 22) + 4;
  for (const flag& f : rows) {
    std::string head = "  " + f.name + (f.metavar.empty() ? "" : " " + f.metavar);
    head += head.size() + 2 <= indent ? std::string(indent - head.size(), ' ') : "\n" + std::string(indent, ' ');
    std::string help = f.help;  // continuation lines are indented under the first
    for (std::size_t at = 0; (at = help.find('\n', at)) != std::string::npos; at += indent + 1)
      help.insert(at + 1, std::string(indent, ' '));
    out += head + help + "\n";
  }
  for (const std::string& e : epilogue_) out += e + "\n";
  out += "Exit status: 0, 1 (a failure while running), 2 (flags, paths or directories refused: nothing was done).\n";
  return out;
}

}  // namespace tessel::io
