// Definitions of tessel/io/atomic_file.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include "tessel/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace tessel::io {

std::string quoted(const std::filesystem::path& path) {
  std::string s = "'";
  s += path.native();
  s += '\'';
  return s;
}

input_file::input_file(const std::filesystem::path& path, std::string_view who)
    : prefix_(std::string(who) + ": " + quoted(path) + ": ") {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open: " + std::generic_category().message(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("cannot stat: " + std::generic_category().message(errno));
  if (!S_ISREG(st.st_mode)) fail("not a regular file");
  size_ = static_cast<std::uint64_t>(st.st_size);
}

input_file::~input_file() {
  if (fd_ >= 0) ::close(fd_);
}

void input_file::read_exact(std::span<std::byte> out, std::string_view what) {
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

void input_file::seek(std::uint64_t offset) {
  if (offset > size_)
    fail("truncated: offset " + std::to_string(offset) + " is past the end (" + std::to_string(size_) + " bytes)");
  if (::lseek(fd_, static_cast<::off_t>(offset), SEEK_SET) < 0) fail("seek error: " + std::generic_category().message(errno));
  position_ = offset;
}

void output_file::write(std::span<const std::byte> bytes) {
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

namespace detail {

[[noreturn]] void throw_os_error(int error, const std::string& what) {
  throw std::system_error(error, std::generic_category(), "tessel::io::write_file_atomically: " + what);
}

int create_atomic_temp(const std::filesystem::path& temp, const std::filesystem::path& target) {
  // O_NOFOLLOW: never write through a link someone planted at the temporary name.
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) throw_os_error(errno, "cannot create the temporary file " + quoted(temp) + " for " + quoted(target));
  return fd;
}

void discard_atomic_temp(int fd, const std::filesystem::path& temp) noexcept {
  if (fd >= 0) ::close(fd);
  ::unlink(temp.c_str());
}

void commit_atomic_temp(int& fd, const std::filesystem::path& temp, const std::filesystem::path& target) {
  while (::fsync(fd) != 0)
    if (errno != EINTR) throw_os_error(errno, "cannot sync " + quoted(temp));
  const int closing = std::exchange(fd, -1);
  if (::close(closing) != 0) throw_os_error(errno, "cannot close " + quoted(temp));
  if (::rename(temp.c_str(), target.c_str()) != 0)
    throw_os_error(errno, "cannot rename " + quoted(temp) + " to " + quoted(target));
}

void sync_directory(const std::filesystem::path& target) {
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

std::filesystem::path atomic_temp_path(const std::filesystem::path& target) {
  return std::filesystem::path(target.string() + ".tmp-" + std::to_string(::getpid()));
}

std::optional<std::string> unwritable(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) return quoted(file) + " is a directory";
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  const auto status = std::filesystem::status(dir, ec);
  if (!std::filesystem::exists(status)) return "the directory " + quoted(dir) + " does not exist (create it first)";
  if (!std::filesystem::is_directory(status)) return quoted(dir) + " is not a directory";
  const std::filesystem::path probe = atomic_temp_path(file);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    const int error = errno;  // EEXIST: a write of this process is under way there, so the place is writable
    if (error != EEXIST) return "cannot write in " + quoted(dir) + ": " + std::generic_category().message(error);
    return std::nullopt;
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return std::nullopt;
}

}  // namespace tessel::io
