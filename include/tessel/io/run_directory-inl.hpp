// Definitions of tessel/io/run_directory.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include "tessel/io/run_directory.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <system_error>
#include <utility>

namespace tessel::io {

std::string new_run_id() {
  std::uint64_t v = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
                    (static_cast<std::uint64_t>(::getpid()) << 40);
  try {
    std::random_device device;
    v ^= (static_cast<std::uint64_t>(device()) << 32) ^ device();
  } catch (const std::exception&) {  // no entropy source: the clock and the pid
  }
  for (int round = 0; round < 2; ++round) {  // splitmix64's finaliser: every input bit moves every output bit
    v += 0x9e3779b97f4a7c15ULL;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ULL;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebULL;
    v ^= v >> 31;
  }
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i) out[static_cast<std::size_t>(i)] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 15];
  return out;
}

std::vector<std::string> run_request::problems() const {
  std::vector<std::string> out;
  if (!directory)
    for (const auto& [given, flag] : {std::pair{resume, "--resume"}, std::pair{resume_or_start, "--resume-or-start"},
                                      std::pair{overwrite, "--overwrite"}, std::pair{save_every, "--save-every"}})
      if (given) out.push_back(std::string(flag) + " needs --checkpoint-dir");
  if (overwrite && (resume || resume_or_start))
    out.push_back("--overwrite starts a new run and --resume" + std::string(resume ? "" : "-or-start") + " continues one: give one of them");
  return out;
}

run_start run_request::start() const {
  return overwrite ? run_start::overwrite : resume_or_start ? run_start::resume_or_start : resume ? run_start::resume : run_start::new_run;
}

run_directory::run_directory(std::filesystem::path dir, run_directory_options options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  const bool resuming = options_.start == run_start::resume || options_.start == run_start::resume_or_start;
  if (options_.writer) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw run_refused("--checkpoint-dir '" + dir_.string() + "': cannot create it: " + ec.message());
    try {
      lock_.emplace(dir_);
    } catch (const directory_busy& e) {
      throw run_refused(std::string("--checkpoint-dir: ") + e.what());
    }
  } else if (!resuming) {
    return;  // a new run: the writer decides and writes
  }
  const std::vector<checkpoint_file> files = list_checkpoints(dir_);
  if (resuming) resume(files);
  if (run_.empty()) start_new(files);
  if (options_.writer) checkpoints_.emplace(dir_, checkpoint_options{.keep = std::max<std::size_t>(options_.keep, 1), .run = run_});
}

void run_directory::notice(const std::string& text) const {
  if (options_.notice) options_.notice(text);
  else std::fprintf(stderr, "%s: %s\n", options_.program.c_str(), text.c_str());
}

std::string run_directory::describe(const checkpoint_file& f) const {
  if (!f.intact()) return "damaged: " + f.problem;
  const std::string run = f.run();
  std::string settings;
  for (const run_setting& s : options_.settings) {
    const auto it = f.metadata.find(s.key);
    const std::string value = it != f.metadata.end() ? it->second : s.unrecorded.value_or("?");
    if (value == "false") continue;
    settings += " " + s.flag + (value == "true" ? "" : " " + value);
  }
  return "step " + std::to_string(f.step) + " of " +
         (run.empty() ? "a run without an identity (an older " + options_.program + ")" : "run " + run) +
         (settings.empty() ? "" : " (" + settings.substr(1) + ")");
}

namespace detail {
// "\n  <path>: <describe>" for each file `which` picks.
std::string listing(const run_directory& rd, const std::vector<checkpoint_file>& files, auto&& which) {
  std::string out;
  for (const checkpoint_file& f : files)
    if (which(f)) out += "\n  " + f.path.string() + ": " + rd.describe(f);
  return out;
}
}  // namespace detail

void run_directory::start_new(const std::vector<checkpoint_file>& files) {
  run_ = new_run_id();
  if (!options_.writer) return;
  if (options_.start == run_start::resume_or_start) return;  // the damaged files go at the first save
  if (!files.empty() && options_.start != run_start::overwrite)
    throw run_refused(dir_.string() + " holds checkpoints of another run:" + detail::listing(*this, files, [](auto&) { return true; }) +
                      "\nfix: --resume to continue that run, --overwrite to delete these files and start a new run, or "
                      "another --checkpoint-dir");
  for (const checkpoint_file& f : files) {
    std::error_code ec;
    std::filesystem::remove(f.path, ec);
    if (ec) throw std::system_error(ec, "--overwrite: cannot delete " + f.path.string());
    notice("--overwrite: deleted " + f.path.string() + ": " + describe(f));
  }
}

void run_directory::resume(const std::vector<checkpoint_file>& files) {
  const auto all = [](const checkpoint_file&) { return true; };
  const auto newest = std::find_if(files.rbegin(), files.rend(), [](const checkpoint_file& f) { return f.intact(); });
  if (newest == files.rend()) {
    const std::string where = "no intact checkpoint in " + dir_.string();
    if (options_.start == run_start::resume)
      throw run_refused("--resume: " + where +
                        (files.empty() ? std::string(" (it holds no checkpoint files)") : ":" + detail::listing(*this, files, all)) +
                        "\nfix: --resume-or-start to start a new run when there is none, --overwrite to delete them and "
                        "start a new run, or another --checkpoint-dir");
    if (options_.writer)
      notice("--resume-or-start: " + where + ": starting a new run" +
             (files.empty() ? std::string() : " (the damaged files are deleted at its first save):" + detail::listing(*this, files, all)));
    return;  // run_ stays empty: a new run
  }
  const std::string run = newest->run();
  const std::string name = newest->path.string();
  if (run.empty())
    throw run_refused("cannot resume: " + name + " records no run identity (it was written by an older " + options_.program +
                      ")\nfix: start a new run with --overwrite, or another --checkpoint-dir");
  const bool records_settings = std::any_of(options_.settings.begin(), options_.settings.end(), [&](const run_setting& s) {
    return newest->metadata.contains(s.key);
  });
  if (!options_.settings.empty() && !records_settings)
    throw run_refused("cannot resume: " + name + " records none of the settings that shape a run (it was written by an older " +
                      options_.program + ")\nfix: start a new run with --overwrite, or another --checkpoint-dir");
  std::string differences, fix;
  for (const run_setting& s : options_.settings) {
    const auto it = newest->metadata.find(s.key);
    const std::string have = it != newest->metadata.end() ? it->second : s.unrecorded.value_or("?");
    if (have == s.value) continue;
    differences += "\n  " + s.flag + ": the run has " + have + ", these flags give " + s.value;
    fix += have == "true" ? " " + s.flag : have == "false" ? " without " + s.flag : " " + s.flag + " " + have;
  }
  if (!differences.empty())
    throw run_refused("cannot resume: " + name + " is " + describe(*newest) + ", and these flags shape another run:" + differences +
                      "\nfix: give the run's flags (" + fix.substr(1) + "), or start a new run with --overwrite or another "
                      "--checkpoint-dir");
  const std::string mixed = detail::listing(*this, files, [&](const checkpoint_file& f) { return f.intact() && f.run() != run; });
  if (!mixed.empty())
    throw run_refused("cannot resume: " + dir_.string() + " mixes runs: the newest intact checkpoint is " + name + ", " +
                      describe(*newest) + "; of other runs:" + mixed + "\nfix: move the other runs' files elsewhere");
  if (options_.writer)
    for (const checkpoint_file& f : files)
      if (!f.intact()) notice("skipped a damaged checkpoint (deleted at the next save): " + f.path.string() + ": " + f.problem);
  resume_ = read_checkpoint(newest->path);
  run_ = run;
}

void run_directory::save(snapshot s) {
  for (const run_setting& setting : options_.settings) s.set(setting.key, setting.value);
  checkpoints().save(std::move(s));
}

checkpoint_manager& run_directory::checkpoints() {
  if (!checkpoints_) throw std::logic_error("tessel::io::run_directory: " + dir_.string() + " is not written by this process");
  return *checkpoints_;
}

}  // namespace tessel::io
