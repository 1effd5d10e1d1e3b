#pragma once
// Training checkpoints: parameters, optimizer states, the step, a random key and the data position in
// one safetensors file (io/safetensors.hpp), written atomically, optionally on a background thread, the
// last N kept in a directory, and restored from the newest one that is intact.
//
//   tessel::io::checkpoint_manager ckpt("run/ckpt", {.keep = 3});
//   if (auto last = ckpt.restore_latest()) {                      // skips a corrupt or truncated newest file
//     last->load(tessel::io::slot("params", params), tessel::io::slot("opt_state", opt_state));
//     step = last->step;  key = last->key();  pipeline.restore(stream_position::from_json(last->get("data")));
//   }
//   ...
//   tessel::io::snapshot s(step);                                  // copies the tensors now
//   s.add("params", params).add("opt_state", opt_state).set_key(key).set("data", pipeline.position().to_json());
//   ckpt.save(std::move(s));                                       // returns at once; written on the saver thread
//
// Names come from the trees (core/tree.hpp): member names joined by '.', tuple parts by index, under the
// slot's name: "params.w1", "opt_state.1.w1". Tensors keep their dtype (bf16 is stored as BF16).
//
// The file is a plain safetensors file; its "__metadata__" holds "tessel.format" = "tessel.checkpoint/1",
// "tessel.step", "tessel.checksum" (a 64-bit hash of every name, dtype, shape, data byte and metadata entry,
// so that a bit flip anywhere is detected), "tessel.rng_key" when set, and the caller's entries.
//
// load() checks every tensor of the requested trees against the file (missing, wrong dtype, wrong shape,
// and tensors of the file that no tree asked for) and throws one checkpoint_error listing every mismatch;
// the trees are assigned only when everything matches, never partly.
//
// Runs: with checkpoint_options::run set, every checkpoint the manager writes records that identity as
// "tessel.run", and keep-N counts only that run's files: older files of the run and every damaged file
// (whatever its step) are deleted, other runs' intact files are left alone. list_checkpoints() reads and
// checks every file of a directory (for a program that must refuse to mix runs), and directory_lock
// makes a second writer of one directory fail at once, naming the process that holds it:
//
//   tessel::io::directory_lock lock("run/ckpt");                   // throws directory_busy if taken
//   for (const tessel::io::checkpoint_file& f : tessel::io::list_checkpoints("run/ckpt"))
//     if (!f.intact()) std::cerr << f.path << ": " << f.problem << "\n";
//   tessel::io::checkpoint_manager ckpt("run/ckpt", {.keep = 3, .run = "3f9c0d2e"});

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
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/io/atomic_file.hpp"
#include "tessel/io/safetensors.hpp"
#include "tessel/profile/profiler.hpp"
#include "tessel/random/key.hpp"

namespace tessel::io {

// A checkpoint that cannot be used: its trees do not match the program's types, or (for read_checkpoint)
// the file is not an intact tessel checkpoint. The message lists every problem, one per line.
class checkpoint_error : public format_error {
 public:
  using format_error::format_error;
};

inline constexpr std::string_view checkpoint_format = "tessel.checkpoint/1";
// The metadata entry holding the identity of the run that wrote a checkpoint (checkpoint_options::run).
inline constexpr std::string_view checkpoint_run_key = "tessel.run";

namespace detail {

inline std::uint64_t mix64(std::uint64_t h) noexcept {
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

// The checksum of a checkpoint file: names, dtypes, shapes and bytes in file order, then the metadata
// (sorted by key) except "tessel.checksum" itself; as 16 hex digits.
inline std::string checkpoint_checksum(const safetensors_file& f) {
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
  char out[17];
  const std::uint64_t v = h.value();
  for (int i = 0; i < 16; ++i) out[i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 15];
  out[16] = '\0';
  return out;
}

inline std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

template <class T, class S>
std::string describe_leaf() {
  return std::string(describe<tensor_type<T, S>>().view());
}

// "bf16[4]" for a BF16 [4] entry (the format's name for dtypes tessel does not have).
inline std::string describe_entry(const safetensors_entry& e) {
  const safetensors_dtype* info = find_safetensors_dtype(e.dtype);
  return std::string(info ? info->tessel_name : std::string_view(e.dtype)) + io::detail::dims_text(e.shape);
}

}  // namespace detail

// The contents of one checkpoint, built on the caller's thread: add() copies the trees' tensors, so the
// caller may go on updating them while a checkpoint_manager writes the snapshot.
class snapshot {
 public:
  explicit snapshot(std::uint64_t step = 0) : step_(step) {}

  // Copies every leaf of `tree` as "<name>.<path in the tree>" ("params.w1"); a leaf tree is named `name`.
  // Throws std::invalid_argument if a name is taken.
  template <class Tree>
  snapshot& add(std::string_view name, const Tree& tree) {
    tree::for_each_named(tree, [&](const std::string& leaf_name, const auto& leaf) { file_.put(leaf_name, leaf); },
                         std::string(name));
    return *this;
  }
  // A metadata entry (text); keys starting with "tessel." are reserved.
  snapshot& set(std::string key, std::string value) {
    if (key.starts_with("tessel."))
      throw std::invalid_argument("tessel::io::snapshot::set: the key '" + key + "' is reserved (\"tessel.\" prefix)");
    file_.metadata[std::move(key)] = std::move(value);
    return *this;
  }
  // The random key to resume with (read back by loaded_checkpoint::key()).
  snapshot& set_key(random::key k) {
    file_.metadata["tessel.rng_key"] = std::to_string(k.words[0]) + "," + std::to_string(k.words[1]);
    return *this;
  }
  // The identity of the run this checkpoint belongs to ("tessel.run"; checkpoint_manager sets it from
  // checkpoint_options::run).
  snapshot& set_run(std::string run) {
    file_.metadata[std::string(checkpoint_run_key)] = std::move(run);
    return *this;
  }
  std::uint64_t step() const noexcept { return step_; }

  // The name of the first floating-point tensor (F32, F64, BF16, F16) holding a NaN or an infinity, or
  // nullopt when every value is finite: a program can refuse to save a diverged state.
  std::optional<std::string> first_non_finite() const {
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

  // The safetensors file to write, with the format tag, step and checksum filled in.
  safetensors_file finish() && {
    file_.metadata["tessel.format"] = std::string(checkpoint_format);
    file_.metadata["tessel.step"] = std::to_string(step_);
    file_.metadata["tessel.checksum"] = detail::checkpoint_checksum(file_);
    return std::move(file_);
  }

 private:
  std::uint64_t step_;
  safetensors_file file_;
};

// Where load() puts a tree: slot("params", params).
template <class Tree>
struct tree_slot {
  std::string_view name;
  Tree& tree;
};
template <class Tree>
tree_slot<Tree> slot(std::string_view name, Tree& tree) {
  return {name, tree};
}

// An intact checkpoint read from disk.
class loaded_checkpoint {
 public:
  std::filesystem::path path;
  std::uint64_t step = 0;
  safetensors_file file;
  std::vector<std::string> skipped;  // newer files that were not intact: "path: reason"

  bool has(std::string_view key) const { return file.metadata.contains(std::string(key)); }
  // The metadata entry `key`; throws checkpoint_error if there is none.
  const std::string& get(std::string_view key) const {
    const auto it = file.metadata.find(std::string(key));
    if (it == file.metadata.end())
      throw checkpoint_error("tessel::io::loaded_checkpoint::get: " + quoted(path) + ": no metadata entry '" +
                             std::string(key) + "'");
    return it->second;
  }
  // The random key saved with snapshot::set_key; throws checkpoint_error if none was saved.
  random::key key() const {
    const std::string& text = get("tessel.rng_key");
    const std::size_t comma = text.find(',');
    const auto k0 = detail::parse_u64(std::string_view(text).substr(0, comma));
    const auto k1 = comma == std::string::npos ? std::nullopt : detail::parse_u64(std::string_view(text).substr(comma + 1));
    if (!k0 || !k1 || *k0 > 0xffffffffu || *k1 > 0xffffffffu)
      throw checkpoint_error("tessel::io::loaded_checkpoint::key: " + quoted(path) + ": 'tessel.rng_key' is '" + text +
                             "', expected two 32-bit words 'k0,k1'");
    return random::key(static_cast<std::uint32_t>(*k0), static_cast<std::uint32_t>(*k1));
  }

  // Fills every slot's tree from the file, or throws checkpoint_error listing every mismatch (missing
  // tensors, dtypes, shapes, tensors no slot asked for) and leaves the trees untouched.
  template <class... Trees>
  void load(tree_slot<Trees>... slots) const {
    std::tuple<Trees...> staged{slots.tree...};
    std::vector<std::string> problems;
    std::vector<bool> used(file.tensors.size(), false);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (stage(std::get<I>(staged), slots.name, problems, used), ...);
    }(std::index_sequence_for<Trees...>{});
    for (std::size_t i = 0; i < used.size(); ++i)
      if (!used[i])
        problems.push_back("tensor '" + file.tensors[i].name + "' (" + detail::describe_entry(file.tensors[i]) +
                           ") is in the file but not in the program");
    if (!problems.empty()) {
      std::string message = "tessel::io::loaded_checkpoint::load: " + quoted(path) + " does not match the program (" +
                             std::to_string(problems.size()) + (problems.size() == 1 ? " problem" : " problems") + "):";
      for (const std::string& p : problems) message += "\n  " + p;
      message += "\nfix: restore into the trees the checkpoint was saved from, or start without --resume";
      throw checkpoint_error(message);
    }
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((slots.tree = std::move(std::get<I>(staged))), ...);
    }(std::index_sequence_for<Trees...>{});
  }

 private:
  template <class Tree>
  void stage(Tree& tree, std::string_view name, std::vector<std::string>& problems, std::vector<bool>& used) const {
    tree::for_each_named(
        tree,
        [&](const std::string& leaf_name, auto& leaf) {
          using L = std::remove_cvref_t<decltype(leaf)>;
          using T = typename L::value_type;
          using S = typename L::shape_type;
          std::size_t at = file.tensors.size();
          for (std::size_t i = 0; i < file.tensors.size(); ++i)
            if (file.tensors[i].name == leaf_name) at = i;
          if (at == file.tensors.size()) {
            problems.push_back("tensor '" + leaf_name + "' (" + detail::describe_leaf<T, S>() + ") is missing");
            return;
          }
          used[at] = true;
          const safetensors_entry& e = file.tensors[at];
          const bool dtype_ok = e.dtype == safetensors_dtype_of<T>();
          const bool shape_ok = io::detail::same_dims(e.shape, S::dims);
          if (!dtype_ok || !shape_ok) {
            problems.push_back("tensor '" + leaf_name + "': the program has " + detail::describe_leaf<T, S>() +
                               ", the file " + detail::describe_entry(e) + " (" + (dtype_ok ? "" : "dtype") +
                               (!dtype_ok && !shape_ok ? " and " : "") + (shape_ok ? "" : "shape") + " differ)");
            return;
          }
          if (!e.bytes.empty()) std::memcpy(leaf.data(), e.bytes.data(), e.bytes.size());
        },
        std::string(name));
  }
};

// Checks that `file` (read from `path`) is an intact checkpoint: the format tag, a step and a checksum
// that matches its contents. Throws checkpoint_error naming the file otherwise.
inline loaded_checkpoint check_checkpoint(safetensors_file file, const std::filesystem::path& path) {
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

// Reads `path` as a checkpoint (read_safetensors, then check_checkpoint). Throws format_error (or its
// subclass checkpoint_error) naming the file if it is missing, truncated, malformed or corrupted; never
// reads past the file or allocates more than its size.
inline loaded_checkpoint read_checkpoint(const std::filesystem::path& path) {
  return check_checkpoint(read_safetensors(path), path);
}

struct checkpoint_options {
  std::size_t keep = 3;       // checkpoints kept in the directory (the newest; at least 1)
  bool asynchronous = true;   // write on a background thread (save returns once the snapshot is queued)
  // The identity of the run being written (any text; a random id and the settings that shape the state,
  // say). When set: every checkpoint records it ("tessel.run"), `keep` counts only this run's files, and
  // after each save the run's older files beyond `keep` and every damaged checkpoint file (truncated,
  // corrupted, unreadable: whatever its step) are deleted; intact files of other runs are never touched.
  // Empty: the newest `keep` files of any kind are kept and nothing newer than a save is deleted.
  std::string run{};
};

// One checkpoint file of a directory, as list_checkpoints found it.
struct checkpoint_file {
  std::uint64_t step = 0;  // from the file name
  std::filesystem::path path;
  std::string problem;                          // why it cannot be used (read_checkpoint's message); empty: intact
  std::map<std::string, std::string> metadata;  // an intact file's metadata (empty otherwise)

  bool intact() const noexcept { return problem.empty(); }
  // The run that wrote it ("tessel.run"), empty when the file is damaged or records none.
  std::string run() const {
    const auto it = metadata.find(std::string(checkpoint_run_key));
    return it == metadata.end() ? std::string() : it->second;
  }
};

namespace detail {

inline std::filesystem::path checkpoint_path(const std::filesystem::path& dir, std::uint64_t step) {
  std::string digits = std::to_string(step);
  if (digits.size() < 12) digits.insert(0, 12 - digits.size(), '0');
  return dir / ("ckpt-" + digits + ".safetensors");
}

inline std::vector<std::uint64_t> checkpoint_steps(const std::filesystem::path& dir) {
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
inline loaded_checkpoint read_checkpoint_of_step(const std::filesystem::path& dir, std::uint64_t step) {
  const std::filesystem::path p = checkpoint_path(dir, step);
  loaded_checkpoint c = read_checkpoint(p);
  if (c.step != step)
    throw checkpoint_error("tessel::io::read_checkpoint: " + quoted(p) + ": the file name says step " + std::to_string(step) +
                           ", the file records step " + std::to_string(c.step));
  return c;
}

}  // namespace detail

// Every checkpoint file ("ckpt-<12 digits>.safetensors") of `dir`, oldest first, each read whole and
// checked (read_checkpoint): intact ones with their metadata, the others with the reason. An empty list
// when the directory is missing or holds none. Reads every byte of every file.
inline std::vector<checkpoint_file> list_checkpoints(const std::filesystem::path& dir) {
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

// Another process (or another directory_lock of this one) holds the lock of a directory.
class directory_busy : public std::runtime_error {
 public:
  directory_busy(const std::string& what, long holder) : std::runtime_error(what), holder_(holder) {}
  // The holder's process id as its lock file records it; 0 when unknown.
  long holder() const noexcept { return holder_; }

 private:
  long holder_;
};

// An exclusive lock on a directory, held from construction to destruction: flock(2) on "<dir>/lock",
// which records the holder's process id. A second lock of the directory, in any process, throws
// directory_busy naming that process, at once (it does not wait). The kernel drops the lock when its
// holder exits or is killed, so a lock file left by a dead process never blocks: the file is left in
// place and reused. (flock needs a local file system; on one without it, such as some NFS setups, the
// constructor throws std::system_error.) Creates the directory if needed.
class directory_lock {
 public:
  explicit directory_lock(const std::filesystem::path& dir) : path_(dir / "lock") {
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
  directory_lock(const directory_lock&) = delete;
  directory_lock& operator=(const directory_lock&) = delete;
  ~directory_lock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// A directory of checkpoints "ckpt-<step, 12 digits>.safetensors". One manager (one process) writes a
// directory at a time: hold a directory_lock on it for the manager's lifetime to make sure of it.
class checkpoint_manager {
 public:
  // Creates the directory if needed and removes temporary files that a killed writer left behind.
  explicit checkpoint_manager(std::filesystem::path dir, checkpoint_options options = {})
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
  checkpoint_manager(const checkpoint_manager&) = delete;
  checkpoint_manager& operator=(const checkpoint_manager&) = delete;
  // Waits for the queued saves; an error of the last ones is lost (call wait() to see it).
  ~checkpoint_manager() {
    {
      std::unique_lock lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  const std::filesystem::path& directory() const noexcept { return dir_; }

  // The file name of step `step`'s checkpoint.
  std::filesystem::path path_of(std::uint64_t step) const { return detail::checkpoint_path(dir_, step); }

  // Writes `s` as step s.step()'s checkpoint (replacing one of the same step), then deletes the oldest
  // beyond `keep`. Asynchronous: returns once queued (the checksum and the write happen on the saver
  // thread); if a save is already waiting, waits for it to start.
  // Rethrows the error of an earlier asynchronous save; synchronous: throws the write's error.
  void save(snapshot s) {
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

  // Waits until every queued save is on disk; rethrows the first error of one.
  void wait() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !pending_ && !writing_; });
    rethrow_locked(lock);
  }

  // The steps of the checkpoint files present (complete or not), oldest first.
  std::vector<std::uint64_t> steps() const { return detail::checkpoint_steps(dir_); }

  // Every checkpoint file of the directory, read and checked (list_checkpoints). Waits for queued saves.
  std::vector<checkpoint_file> list() {
    if (options_.asynchronous) wait();
    return list_checkpoints(dir_);
  }

  // The newest intact checkpoint (read_checkpoint), skipping newer files that are truncated, corrupted or
  // unreadable (listed in `skipped`); nullopt when there is none. Waits for queued saves first.
  std::optional<loaded_checkpoint> restore_latest() {
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

 private:
  // The checksum, the file and the pruning: on the saver thread when asynchronous.
  void write(snapshot s) {
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

  void run() {
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

  void rethrow_locked(std::unique_lock<std::mutex>&) {
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  std::filesystem::path dir_;
  checkpoint_options options_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<snapshot> pending_;
  bool writing_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::set<std::uint64_t> ours_, others_;  // steps whose files are this run's, other runs' (intact); used by write()
  std::thread worker_;
};

}  // namespace tessel::io
