#pragma once
// Files for tessel's readers and writers (POSIX): the error every reader raises, a checked input file,
// and write_file_atomically, which replaces a file so that a crash or an error leaves either the old file
// or the complete new one on disk, never a mix of the two.
//
//   tessel::io::write_file_atomically("model.safetensors", [&](tessel::io::output_file& out) {
//     out.write(std::as_bytes(std::span(header)));   // any exception here leaves the old file intact
//   });

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace tessel::io {

// A file that is not what its reader expects: missing, unreadable, truncated, corrupted or malformed.
// The message names the function, the file, what was expected and what was found.
class format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "'dir/name'": how messages show a path.
std::string quoted(const std::filesystem::path& path);

// "[60000,28,28]": how messages show dims (any range of integers: a vector, an array, a span).
template <class Dims>
std::string dims_text(const Dims& dims) {
  std::string s = "[";
  bool first = true;
  for (const auto d : dims) {
    if (!first) s += ',';
    s += std::to_string(d);  // appended, not "," + string: g++ 12 warns falsely (-Wrestrict, bug 105329)
    first = false;
  }
  return s + "]";
}

// A regular file opened for reading. Every failure (cannot open, not a regular file, read error, fewer
// bytes than asked for) is a format_error whose message starts with `who` and the quoted path.
class input_file {
 public:
  input_file(const std::filesystem::path& path, std::string_view who);
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;
  ~input_file();

  // The size when opened; readers check claimed lengths against it before allocating.
  std::uint64_t size() const noexcept { return size_; }
  std::uint64_t position() const noexcept { return position_; }
  // The text messages start with: "who: 'path': ".
  const std::string& prefix() const noexcept { return prefix_; }

  // Fills `out` or throws "truncated: expected N bytes of <what> at offset O, found M".
  void read_exact(std::span<std::byte> out, std::string_view what);
  // Moves to byte `offset` for the next read_exact; one past the end throws format_error.
  void seek(std::uint64_t offset);

  [[noreturn]] void fail(const std::string& what) const { throw format_error(prefix_ + what); }

 private:
  std::string prefix_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t position_ = 0;
};

// The sink write_file_atomically hands to its writer.
class output_file {
 public:
  output_file(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  // Writes all of `bytes` or throws std::system_error naming the file (e.g. ENOSPC).
  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  std::uint64_t bytes_written() const noexcept { return written_; }

 private:
  int fd_;
  std::filesystem::path path_;
  std::uint64_t written_ = 0;
};

namespace detail {
// The steps of write_file_atomically that do not depend on its writer (atomic_file-inl.hpp).
// Creates `temp` (atomic_temp_path(target)) for writing and returns its descriptor; throws std::system_error.
int create_atomic_temp(const std::filesystem::path& temp, const std::filesystem::path& target);
// Closes `fd` (if open) and removes `temp`: an abandoned write.
void discard_atomic_temp(int fd, const std::filesystem::path& temp) noexcept;
// Syncs and closes `fd` (then -1) and renames `temp` over `target`; throws std::system_error on failure,
// leaving `temp` for discard_atomic_temp.
void commit_atomic_temp(int& fd, const std::filesystem::path& temp, const std::filesystem::path& target);

// Makes the rename durable. Some file systems cannot fsync a directory (EINVAL): nothing more can be done.
void sync_directory(const std::filesystem::path& target);
}  // namespace detail

// The temporary file write_file_atomically writes first: target + ".tmp-<pid>" (same directory, so that
// the rename is atomic). Two threads of one process must not write the same target at the same time.
std::filesystem::path atomic_temp_path(const std::filesystem::path& target);

// Why write_file_atomically(file, ...) would fail for want of a place (the directory is missing, `file` is
// a directory, no permission), or nullopt. For a program that checks its output paths before it works:
// tries a temporary file beside `file` and removes it at once; creates nothing else.
std::optional<std::string> unwritable(const std::filesystem::path& file);

// Replaces `target` by what `writer(output_file&)` writes: the bytes go to atomic_temp_path(target),
// which is fsync'ed, renamed over the target, and the directory is fsync'ed.
// If the temporary file cannot be created, or the writer throws, or a write, fsync or rename fails, the
// temporary file is removed (only if this call created it), `target` is left as it was, and the exception
// propagates (std::system_error for the operating system's errors). The new file gets mode 0666 & ~umask;
// a symbolic link at `target` is replaced by the file, not followed.
template <std::invocable<output_file&> Writer>
void write_file_atomically(const std::filesystem::path& target, Writer&& writer) {
  const std::filesystem::path temp = atomic_temp_path(target);
  int fd = detail::create_atomic_temp(temp, target);

  struct cleanup {
    int& fd;
    const std::filesystem::path& temp;
    bool done = false;
    ~cleanup() {
      if (!done) detail::discard_atomic_temp(fd, temp);
    }
  } guard{fd, temp};

  output_file out(fd, temp);
  std::invoke(std::forward<Writer>(writer), out);
  detail::commit_atomic_temp(fd, temp, target);
  guard.done = true;
  detail::sync_directory(target);
}

}  // namespace tessel::io

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/atomic_file-inl.hpp"
#endif
