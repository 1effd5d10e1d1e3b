#pragma once
// Files for tessel's readers and writers (POSIX): the error every reader raises, a checked input file,
// and write_file_atomically, which replaces a file so that a crash or an error leaves either the old file
// or the complete new one on disk, never a mix of the two.
//
//   tessel::io::write_file_atomically("model.safetensors", [&](tessel::io::output_file& out) {
//     out.write(std::as_bytes(std::span(header)));   // any exception here leaves the old file intact
//   });

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace tessel::io {

// A file that is not what its reader expects: missing, unreadable, truncated, corrupted or malformed.
// The message names the function, the file, what was expected and what was found.
class format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "'dir/name'": how messages show a path.
inline std::string quoted(const std::filesystem::path& path) {
  std::string s = "'";
  s += path.native();
  s += '\'';
  return s;
}

// A regular file opened for reading. Every failure (cannot open, not a regular file, read error, fewer
// bytes than asked for) is a format_error whose message starts with `who` and the quoted path.
class input_file {
 public:
  input_file(const std::filesystem::path& path, std::string_view who)
      : prefix_(std::string(who) + ": " + quoted(path) + ": ") {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open: " + std::generic_category().message(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("cannot stat: " + std::generic_category().message(errno));
    if (!S_ISREG(st.st_mode)) fail("not a regular file");
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;
  ~input_file() {
    if (fd_ >= 0) ::close(fd_);
  }

  // The size when opened; readers check claimed lengths against it before allocating.
  std::uint64_t size() const noexcept { return size_; }
  std::uint64_t position() const noexcept { return position_; }
  // The text messages start with: "who: 'path': ".
  const std::string& prefix() const noexcept { return prefix_; }

  // Fills `out` or throws "truncated: expected N bytes of <what> at offset O, found M".
  void read_exact(std::span<std::byte> out, std::string_view what) {
    std::size_t done = 0;
    while (done < out.size()) {
      const ::ssize_t n = ::read(fd_, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("read error: " + std::generic_category().message(errno));
      if (n == 0)
        fail("truncated: expected " + std::to_string(out.size()) + " bytes of " + std::string(what) + " at offset " +
             std::to_string(position_) + ", found " + std::to_string(done));
      done += static_cast<std::size_t>(n);
    }
    position_ += done;
  }

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
  void write(std::span<const std::byte> bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ::ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw std::system_error(errno, std::generic_category(), "tessel::io::output_file: cannot write " + quoted(path_));
      done += static_cast<std::size_t>(n);
    }
    written_ += done;
  }
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  std::uint64_t bytes_written() const noexcept { return written_; }

 private:
  int fd_;
  std::filesystem::path path_;
  std::uint64_t written_ = 0;
};

namespace detail {
[[noreturn]] inline void throw_os_error(int error, const std::string& what) {
  throw std::system_error(error, std::generic_category(), "tessel::io::write_file_atomically: " + what);
}

// Makes the rename durable. Some file systems cannot fsync a directory (EINVAL): nothing more can be done.
inline void sync_directory(const std::filesystem::path& target) {
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_os_error(errno, "wrote " + quoted(target) + " but cannot open its directory to sync it");
  int error = 0;
  while (::fsync(fd) != 0) {
    if (errno == EINTR) continue;
    if (errno != EINVAL && errno != ENOTSUP) error = errno;
    break;
  }
  ::close(fd);
  if (error != 0) throw_os_error(error, "wrote " + quoted(target) + " but cannot sync its directory");
}
}  // namespace detail

// The temporary file write_file_atomically writes first: target + ".tmp-<pid>" (same directory, so that
// the rename is atomic). Two threads of one process must not write the same target at the same time.
inline std::filesystem::path atomic_temp_path(const std::filesystem::path& target) {
  return std::filesystem::path(target.string() + ".tmp-" + std::to_string(::getpid()));
}

// Replaces `target` by what `writer(output_file&)` writes: the bytes go to atomic_temp_path(target),
// which is fsync'ed, renamed over the target, and the directory is fsync'ed.
// If the temporary file cannot be created, or the writer throws, or a write, fsync or rename fails, the
// temporary file is removed (only if this call created it), `target` is left as it was, and the exception
// propagates (std::system_error for the operating system's errors). The new file gets mode 0666 & ~umask;
// a symbolic link at `target` is replaced by the file, not followed.
template <std::invocable<output_file&> Writer>
void write_file_atomically(const std::filesystem::path& target, Writer&& writer) {
  const std::filesystem::path temp = atomic_temp_path(target);
  // O_NOFOLLOW: never write through a link someone planted at the temporary name.
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) detail::throw_os_error(errno, "cannot create the temporary file " + quoted(temp) + " for " + quoted(target));

  struct cleanup {
    int& fd;
    const std::filesystem::path& temp;
    bool done = false;
    ~cleanup() {
      if (done) return;
      if (fd >= 0) ::close(fd);
      ::unlink(temp.c_str());
    }
  } guard{fd, temp};

  output_file out(fd, temp);
  std::invoke(std::forward<Writer>(writer), out);
  while (::fsync(fd) != 0)
    if (errno != EINTR) detail::throw_os_error(errno, "cannot sync " + quoted(temp));
  const int closing = std::exchange(fd, -1);
  if (::close(closing) != 0) detail::throw_os_error(errno, "cannot close " + quoted(temp));
  if (::rename(temp.c_str(), target.c_str()) != 0)
    detail::throw_os_error(errno, "cannot rename " + quoted(temp) + " to " + quoted(target));
  guard.done = true;
  detail::sync_directory(target);
}

}  // namespace tessel::io
