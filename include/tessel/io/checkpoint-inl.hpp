// Definitions of tessel/io/checkpoint.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include "tessel/io/checkpoint.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "tessel/io/atomic_file.hpp"
#include "tessel/io/safetensors.hpp"
#include "tessel/profile/profiler.hpp"
#include "tessel/random/key.hpp"

namespace tessel::io {

namespace detail {

std::uint64_t mix64(std::uint64_t h) noexcept {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// A 64-bit hash of bytes, eight at a time (not cryptographic: it detects corruption, not tampering).
class hasher {
 public:
  void bytes(const void* data, std::size_t n) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      word(w);
    }
    std::uint64_t tail = 0;
    if (n > i) std::memcpy(&tail, p + i, n - i);
    word(tail ^ (static_cast<std::uint64_t>(n - i) << 56));
  }
  void text(std::string_view s) noexcept {
    word(s.size());
    bytes(s.data(), s.size());
  }
  void word(std::uint64_t w) noexcept {
    h_ = std::rotl(h_ ^ (w * 0x9e3779b97f4a7c15ULL), 27) * 0x100000001b3ULL + 0x2545f4914f6cdd1dULL;
  }
  std::uint64_t value() const noexcept { return mix64(h_); }

 private:
  std::uint64_t h_ = 0x6a09e667f3bcc908ULL;
};

// 16 lowercase hex digits: how checksums and block hashes are written.
std::string hex64(std::uint64_t v) {
  char out[17];
  for (int i = 0; i < 16; ++i) out[i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 15];
  out[16] = '\0';
  return out;
}

// A step as checkpoint names write it: 12 digits, zero-padded, so that names sort as steps do.
std::string step_digits(std::uint64_t step) {
  std::string digits = std::to_string(step);
  if (digits.size() < 12) digits.insert(0, 12 - digits.size(), '0');
  return digits;
}

// The checksum of a checkpoint file: names, dtypes, shapes and bytes in file order, then the metadata
// (sorted by key) except "tessel.checksum" itself; as 16 hex digits.
std::string checkpoint_checksum(const safetensors_file& f) {
  hasher h;
  h.word(f.tensors.size());
  for (const safetensors_entry& e : f.tensors) {
    h.text(e.name);
    h.text(e.dtype);
    h.word(e.shape.size());
    for (const std::uint64_t d : e.shape) h.word(d);
    h.word(e.bytes.size());
    h.bytes(e.bytes.data(), e.bytes.size());
  }
  for (const auto& [k, v] : f.metadata) {
    if (k == "tessel.checksum") continue;
    h.text(k);
    h.text(v);
  }
  return hex64(h.value());
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string describe_entry(const safetensors_entry& e) {
  const safetensors_dtype* info = find_safetensors_dtype(e.dtype);
  return std::string(info ? info->tessel_name : std::string_view(e.dtype)) + io::dims_text(e.shape);
}

const std::string& metadata_entry(const std::map<std::string, std::string>& metadata, std::string_view key,
                                  const std::filesystem::path& path, std::string_view who) {
  const auto it = metadata.find(std::string(key));
  if (it == metadata.end())
    throw checkpoint_error(std::string(who) + ": " + quoted(path) + ": no metadata entry '" + std::string(key) + "'");
  return it->second;
}

std::string key_text(random::key k) { return std::to_string(k.words[0]) + "," + std::to_string(k.words[1]); }

random::key key_of_metadata(const std::map<std::string, std::string>& metadata, const std::filesystem::path& path,
                            std::string_view who) {
  const std::string& text = metadata_entry(metadata, "tessel.rng_key", path, who);
  const std::size_t comma = text.find(',');
  const auto k0 = parse_u64(std::string_view(text).substr(0, comma));
  const auto k1 = comma == std::string::npos ? std::nullopt : parse_u64(std::string_view(text).substr(comma + 1));
  if (!k0 || !k1 || *k0 > 0xffffffffu || *k1 > 0xffffffffu)
    throw checkpoint_error(std::string(who) + ": " + quoted(path) + ": 'tessel.rng_key' is '" + text +
                           "', expected two 32-bit words 'k0,k1'");
  return random::key(static_cast<std::uint32_t>(*k0), static_cast<std::uint32_t>(*k1));
}

void throw_mismatch(std::string_view who, const std::filesystem::path& path, const std::vector<std::string>& problems) {
  std::string message = std::string(who) + ": " + quoted(path) + " does not match the program (" + std::to_string(problems.size()) +
                        (problems.size() == 1 ? " problem" : " problems") + "):";
  for (const std::string& p : problems) message += "\n  " + p;
  message += "\nfix: restore into the trees the checkpoint was saved from, or start without --resume";
  throw checkpoint_error(message);
}

}  // namespace detail

snapshot& snapshot::set(std::string key, std::string value) {
  if (key.starts_with("tessel."))
    throw std::invalid_argument("tessel::io::snapshot::set: the key '" + key + "' is reserved (\"tessel.\" prefix)");
  file_.metadata[std::move(key)] = std::move(value);
  return *this;
}

snapshot& snapshot::set_key(random::key k) {
  file_.metadata["tessel.rng_key"] = detail::key_text(k);
  return *this;
}

snapshot& snapshot::set_run(std::string run) {
  file_.metadata[std::string(checkpoint_run_key)] = std::move(run);
  return *this;
}

std::optional<std::string> snapshot::first_non_finite() const {
  for (const safetensors_entry& e : file_.tensors) {
    const std::byte* p = e.bytes.data();
    const std::size_t n = e.bytes.size();
    auto any = [&]<class U>(U exponent_mask) {
      for (std::size_t i = 0; i + sizeof(U) <= n; i += sizeof(U)) {
        U bits;
        std::memcpy(&bits, p + i, sizeof(U));
        if ((bits & exponent_mask) == exponent_mask) return true;  // all exponent bits set: inf or NaN
      }
      return false;
    };
    const bool bad = e.dtype == "F32"    ? any(std::uint32_t{0x7f800000u})
                     : e.dtype == "F64"  ? any(std::uint64_t{0x7ff0000000000000ull})
                     : e.dtype == "BF16" ? any(std::uint16_t{0x7f80u})
                     : e.dtype == "F16"  ? any(std::uint16_t{0x7c00u})
                                         : false;
    if (bad) return e.name;
  }
  return std::nullopt;
}

safetensors_file snapshot::finish() && {
  file_.metadata["tessel.format"] = std::string(checkpoint_format);
  file_.metadata["tessel.step"] = std::to_string(step_);
  file_.metadata["tessel.checksum"] = detail::checkpoint_checksum(file_);
  return std::move(file_);
}

bool loaded_checkpoint::has(std::string_view key) const { return file.metadata.contains(std::string(key)); }

const std::string& loaded_checkpoint::get(std::string_view key) const {
  return detail::metadata_entry(file.metadata, key, path, "tessel::io::loaded_checkpoint::get");
}

random::key loaded_checkpoint::key() const {
  return detail::key_of_metadata(file.metadata, path, "tessel::io::loaded_checkpoint::key");
}

loaded_checkpoint check_checkpoint(safetensors_file file, const std::filesystem::path& path) {
  loaded_checkpoint out;
  out.path = path;
  out.file = std::move(file);
  const std::string prefix = "tessel::io::read_checkpoint: " + quoted(path) + ": ";
  const auto meta = [&](const char* key) -> const std::string* {
    const auto it = out.file.metadata.find(key);
    return it == out.file.metadata.end() ? nullptr : &it->second;
  };
  const std::string* format = meta("tessel.format");
  if (!format || *format != checkpoint_format)
    throw checkpoint_error(prefix + "not a tessel checkpoint (metadata 'tessel.format' is " +
                           (format ? "'" + *format + "'" : std::string("missing")) + ", expected '" +
                           std::string(checkpoint_format) + "')");
  const std::string* checksum = meta("tessel.checksum");
  if (!checksum) throw checkpoint_error(prefix + "metadata 'tessel.checksum' is missing");
  if (const std::string actual = detail::checkpoint_checksum(out.file); actual != *checksum)
    throw checkpoint_error(prefix + "corrupted: the checksum of the contents is " + actual + ", the file records " + *checksum);
  const std::string* step = meta("tessel.step");
  const auto value = step ? detail::parse_u64(*step) : std::nullopt;
  if (!value) throw checkpoint_error(prefix + "metadata 'tessel.step' is missing or not a number");
  out.step = *value;
  return out;
}

loaded_checkpoint read_checkpoint(const std::filesystem::path& path) {
  return check_checkpoint(read_safetensors(path), path);
}

loaded_checkpoint import_safetensors(const std::filesystem::path& path) {
  loaded_checkpoint out;
  out.path = path;
  out.file = read_safetensors(path);
  return out;
}

std::string checkpoint_file::run() const {
  const auto it = metadata.find(std::string(checkpoint_run_key));
  return it == metadata.end() ? std::string() : it->second;
}

namespace detail {

std::filesystem::path checkpoint_path(const std::filesystem::path& dir, std::uint64_t step) {
  return dir / ("ckpt-" + step_digits(step) + ".safetensors");
}

std::vector<std::uint64_t> checkpoint_steps(const std::filesystem::path& dir) {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 5 + 12 + 12 || !name.starts_with("ckpt-") || !name.ends_with(".safetensors")) continue;
    if (const auto step = parse_u64(std::string_view(name).substr(5, 12))) out.push_back(*step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Reads and checks step `step`'s file of `dir`; throws format_error (or checkpoint_error) if it is not an
// intact checkpoint of that step.
loaded_checkpoint read_checkpoint_of_step(const std::filesystem::path& dir, std::uint64_t step) {
  const std::filesystem::path p = checkpoint_path(dir, step);
  loaded_checkpoint c = read_checkpoint(p);
  if (c.step != step)
    throw checkpoint_error("tessel::io::read_checkpoint: " + quoted(p) + ": the file name says step " + std::to_string(step) +
                           ", the file records step " + std::to_string(c.step));
  return c;
}

}  // namespace detail

std::vector<checkpoint_file> list_checkpoints(const std::filesystem::path& dir) {
  std::vector<checkpoint_file> out;
  for (const std::uint64_t step : detail::checkpoint_steps(dir)) {
    checkpoint_file f;
    f.step = step;
    f.path = detail::checkpoint_path(dir, step);
    try {
      f.metadata = detail::read_checkpoint_of_step(dir, step).file.metadata;
    } catch (const std::exception& e) {  // format_error, checkpoint_error, bad_alloc of a huge header
      f.problem = e.what();
      if (f.problem.empty()) f.problem = "unreadable";
    }
    out.push_back(std::move(f));
  }
  return out;
}

directory_lock::directory_lock(const std::filesystem::path& dir) : path_(dir / "lock") {
  std::filesystem::create_directories(dir);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0)
    throw std::system_error(errno, std::generic_category(), "tessel::io::directory_lock: cannot open " + quoted(path_));
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EINTR) continue;
    long holder = 0;
    if (error == EWOULDBLOCK) {
      char text[32] = {};
      const ::ssize_t n = ::pread(fd_, text, sizeof text - 1, 0);
      if (n > 0) holder = std::strtol(text, nullptr, 10);
    }
    ::close(std::exchange(fd_, -1));
    if (error != EWOULDBLOCK)
      throw std::system_error(error, std::generic_category(), "tessel::io::directory_lock: cannot lock " + quoted(path_));
    throw directory_busy("tessel::io::directory_lock: " + quoted(dir) + " is in use by another writer (" +
                             (holder > 0 ? "process " + std::to_string(holder) : std::string("a process")) +
                             " holds " + quoted(path_) + "); wait for it to end, or use another directory",
                         holder);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<::ssize_t>(pid.size())) {
    // The lock holds without the pid; a contender's message then names no process.
  }
}

directory_lock::~directory_lock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

checkpoint_manager::checkpoint_manager(std::filesystem::path dir, checkpoint_options options)
    : dir_(std::move(dir)), options_(options) {
  if (options_.keep == 0) options_.keep = 1;
  std::filesystem::create_directories(dir_);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("ckpt-") && name.find(".safetensors.tmp-") != std::string::npos)
      std::filesystem::remove(entry.path(), ec);
  }
}

checkpoint_manager::~checkpoint_manager() {
  {
    std::unique_lock lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::filesystem::path checkpoint_manager::path_of(std::uint64_t step) const { return detail::checkpoint_path(dir_, step); }

void checkpoint_manager::save(snapshot s) {
  if (!options_.asynchronous) {
    write(std::move(s));
    return;
  }
  std::unique_lock lock(mutex_);
  rethrow_locked(lock);
  if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
  changed_.wait(lock, [&] { return !pending_; });
  rethrow_locked(lock);
  pending_.emplace(std::move(s));
  changed_.notify_all();
}

void checkpoint_manager::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !pending_ && !writing_; });
  rethrow_locked(lock);
}

std::vector<std::uint64_t> checkpoint_manager::steps() const { return detail::checkpoint_steps(dir_); }

std::vector<checkpoint_file> checkpoint_manager::list() {
  if (options_.asynchronous) wait();
  return list_checkpoints(dir_);
}

std::optional<loaded_checkpoint> checkpoint_manager::restore_latest() {
  if (options_.asynchronous) wait();
  std::vector<std::string> skipped;
  const std::vector<std::uint64_t> all = steps();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::filesystem::path p = path_of(*it);
    try {
      loaded_checkpoint c = detail::read_checkpoint_of_step(dir_, *it);
      c.skipped = std::move(skipped);
      return c;
    } catch (const std::exception& e) {  // format_error, checkpoint_error, bad_alloc of a huge header
      skipped.push_back(p.string() + ": " + e.what());
    }
  }
  return std::nullopt;
}

void checkpoint_manager::write(snapshot s) {
  profile::scope scope("checkpoint.write", "io");
  const std::uint64_t step = s.step();
  if (!options_.run.empty()) s.set_run(options_.run);
  write_safetensors(path_of(step), std::move(s).finish());
  std::error_code ec;
  if (options_.run.empty()) {
    const std::vector<std::uint64_t> all = steps();
    // Only older files go, so the one just written (the newest) always stays.
    for (std::size_t i = 0; i + options_.keep < all.size() && all[i] < step; ++i) std::filesystem::remove(path_of(all[i]), ec);
    return;
  }
  // This run's files (those written here are known; others are read once), damaged ones, other runs'.
  ours_.insert(step);
  others_.erase(step);
  std::vector<std::uint64_t> mine;
  for (const std::uint64_t other : steps()) {
    if (!ours_.contains(other) && !others_.contains(other)) {
      try {
        const loaded_checkpoint c = detail::read_checkpoint_of_step(dir_, other);
        (c.has(checkpoint_run_key) && c.get(checkpoint_run_key) == options_.run ? ours_ : others_).insert(other);
      } catch (const std::exception&) {
        std::filesystem::remove(path_of(other), ec);  // damaged: never usable, whatever its step
        continue;
      }
    }
    if (ours_.contains(other)) mine.push_back(other);
  }
  // Only older files of the run go, so the one just written always stays.
  for (std::size_t i = 0; i + options_.keep < mine.size() && mine[i] < step; ++i) {
    std::filesystem::remove(path_of(mine[i]), ec);
    ours_.erase(mine[i]);
  }
}

void checkpoint_manager::run() {
  profile::set_thread_name("tessel checkpoint");
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return pending_ || stop_; });
    if (!pending_) return;
    snapshot next = std::move(*pending_);
    pending_.reset();
    writing_ = true;
    changed_.notify_all();
    lock.unlock();
    std::exception_ptr error;
    try {
      write(std::move(next));
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    writing_ = false;
    if (error && !error_) error_ = error;
    changed_.notify_all();
  }
}

void checkpoint_manager::rethrow_locked(std::unique_lock<std::mutex>&) {
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace tessel::io
