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

#include <condition_variable>
#include <cstddef>
#include <cstdint>
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
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/io/atomic_file.hpp"
#include "tessel/io/safetensors.hpp"
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

template <class T, class S>
std::string describe_leaf() {
  return std::string(describe<tensor_type<T, S>>().view());
}

// "bf16[4]" for a BF16 [4] entry (the format's name for dtypes tessel does not have).
std::string describe_entry(const safetensors_entry& e);

// What loaded_checkpoint and sharded_checkpoint share: a metadata entry (throws checkpoint_error naming
// `who`, the path and the key when it is missing), the random key's text "k0,k1" and its parser, and the
// error of a load whose trees do not match, listing every problem.
const std::string& metadata_entry(const std::map<std::string, std::string>& metadata, std::string_view key,
                                  const std::filesystem::path& path, std::string_view who);
std::string key_text(random::key k);
random::key key_of_metadata(const std::map<std::string, std::string>& metadata, const std::filesystem::path& path,
                            std::string_view who);
[[noreturn]] void throw_mismatch(std::string_view who, const std::filesystem::path& path, const std::vector<std::string>& problems);

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
  snapshot& set(std::string key, std::string value);
  // The random key to resume with (read back by loaded_checkpoint::key()).
  snapshot& set_key(random::key k);
  // The identity of the run this checkpoint belongs to ("tessel.run"; checkpoint_manager sets it from
  // checkpoint_options::run).
  snapshot& set_run(std::string run);
  std::uint64_t step() const noexcept { return step_; }

  // The name of the first floating-point tensor (F32, F64, BF16, F16) holding a NaN or an infinity, or
  // nullopt when every value is finite: a program can refuse to save a diverged state.
  std::optional<std::string> first_non_finite() const;

  // The safetensors file to write, with the format tag, step and checksum filled in.
  safetensors_file finish() &&;

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

  bool has(std::string_view key) const;
  // The metadata entry `key`; throws checkpoint_error if there is none.
  const std::string& get(std::string_view key) const;
  // The random key saved with snapshot::set_key; throws checkpoint_error if none was saved.
  random::key key() const;

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
    if (!problems.empty()) detail::throw_mismatch("tessel::io::loaded_checkpoint::load", path, problems);
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
loaded_checkpoint check_checkpoint(safetensors_file file, const std::filesystem::path& path);

// Reads `path` as a checkpoint (read_safetensors, then check_checkpoint). Throws format_error (or its
// subclass checkpoint_error) naming the file if it is missing, truncated, malformed or corrupted; never
// reads past the file or allocates more than its size.
loaded_checkpoint read_checkpoint(const std::filesystem::path& path);

// Any safetensors file, for load() to fill trees from: one that another tool wrote
// (safetensors.torch.save_file, a consolidated JAX state) carries no tessel metadata or checksum, so only
// the format is checked (read_safetensors); the step is 0. Throws format_error naming the file.
loaded_checkpoint import_safetensors(const std::filesystem::path& path);

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
  std::string run() const;
};

// Every checkpoint file ("ckpt-<12 digits>.safetensors") of `dir`, oldest first, each read whole and
// checked (read_checkpoint): intact ones with their metadata, the others with the reason. An empty list
// when the directory is missing or holds none. Reads every byte of every file.
std::vector<checkpoint_file> list_checkpoints(const std::filesystem::path& dir);

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
  explicit directory_lock(const std::filesystem::path& dir);
  directory_lock(const directory_lock&) = delete;
  directory_lock& operator=(const directory_lock&) = delete;
  ~directory_lock();
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
  explicit checkpoint_manager(std::filesystem::path dir, checkpoint_options options = {});
  checkpoint_manager(const checkpoint_manager&) = delete;
  checkpoint_manager& operator=(const checkpoint_manager&) = delete;
  // Waits for the queued saves; an error of the last ones is lost (call wait() to see it).
  ~checkpoint_manager();

  const std::filesystem::path& directory() const noexcept { return dir_; }

  // The file name of step `step`'s checkpoint.
  std::filesystem::path path_of(std::uint64_t step) const;

  // Writes `s` as step s.step()'s checkpoint (replacing one of the same step), then deletes the oldest
  // beyond `keep`. Asynchronous: returns once queued (the checksum and the write happen on the saver
  // thread); if a save is already waiting, waits for it to start.
  // Rethrows the error of an earlier asynchronous save; synchronous: throws the write's error.
  void save(snapshot s);

  // Waits until every queued save is on disk; rethrows the first error of one.
  void wait();

  // The steps of the checkpoint files present (complete or not), oldest first.
  std::vector<std::uint64_t> steps() const;

  // Every checkpoint file of the directory, read and checked (list_checkpoints). Waits for queued saves.
  std::vector<checkpoint_file> list();

  // The newest intact checkpoint (read_checkpoint), skipping newer files that are truncated, corrupted or
  // unreadable (listed in `skipped`); nullopt when there is none. Waits for queued saves first.
  std::optional<loaded_checkpoint> restore_latest();

 private:
  // The checksum, the file and the pruning: on the saver thread when asynchronous.
  void write(snapshot s);

  void run();

  void rethrow_locked(std::unique_lock<std::mutex>&);

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

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/checkpoint-inl.hpp"
#endif
