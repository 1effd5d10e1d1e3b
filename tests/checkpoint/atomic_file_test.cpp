// write_file_atomically: the target holds the old bytes or all the new ones, never anything else.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "tessel/io/atomic_file.hpp"
#include "tessel/io/npy.hpp"
#include "test_files.hpp"

namespace {

namespace io = tessel::io;
using checkpoint_test::bytes_of;
using checkpoint_test::read_bytes;
using checkpoint_test::temp_dir;
using checkpoint_test::throws_with;
using checkpoint_test::write_bytes;

struct writer_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST(AtomicFile, CreatesAndReplaces) {
  temp_dir dir;
  const auto path = dir / "f";
  io::write_file_atomically(path, [](io::output_file& out) {
    out.write("first");
    EXPECT_EQ(out.bytes_written(), 5u);
  });
  EXPECT_EQ(read_bytes(path), bytes_of("first"));
  io::write_file_atomically(path, [](io::output_file& out) { out.write("second, longer"); });
  EXPECT_EQ(read_bytes(path), bytes_of("second, longer"));
  EXPECT_FALSE(std::filesystem::exists(io::atomic_temp_path(path)));
  EXPECT_EQ(io::atomic_temp_path(path).string(), path.string() + ".tmp-" + std::to_string(::getpid()));
}

TEST(AtomicFile, AWriterThatFailsMidwayLeavesTheOldFile) {
  temp_dir dir;
  const auto path = dir / "f";
  write_bytes(path, bytes_of("old contents"));
  EXPECT_THROW(io::write_file_atomically(path,
                                         [](io::output_file& out) {
                                           out.write(std::string(100000, 'x'));
                                           throw writer_failed("disk on fire");
                                         }),
               writer_failed);
  EXPECT_EQ(read_bytes(path), bytes_of("old contents"));
  EXPECT_FALSE(std::filesystem::exists(io::atomic_temp_path(path)));  // cleaned up

  // No target before: none after.
  EXPECT_THROW(io::write_file_atomically(dir / "g", [](io::output_file&) { throw writer_failed("no"); }), writer_failed);
  EXPECT_FALSE(std::filesystem::exists(dir / "g"));
  EXPECT_FALSE(std::filesystem::exists(io::atomic_temp_path(dir / "g")));
}

TEST(AtomicFile, AnUnwritableTemporaryPathLeavesTheOldFile) {
  temp_dir dir;
  const auto path = dir / "f.npy";
  io::write_npy(path, tessel::tensor<float, tessel::shape<2>>{1, 2});
  const auto before = read_bytes(path);
  std::filesystem::create_directory(io::atomic_temp_path(path));
  EXPECT_TRUE(throws_with<std::system_error>([&] { io::write_npy(path, tessel::tensor<float, tessel::shape<3>>{}); },
                                             {"cannot create the temporary file", ".tmp-"}));
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_TRUE(std::filesystem::is_directory(io::atomic_temp_path(path)));
  // A temporary name that is a symbolic link is not followed.
  std::filesystem::remove(io::atomic_temp_path(path));
  std::filesystem::create_symlink(dir / "elsewhere", io::atomic_temp_path(path));
  EXPECT_THROW(io::write_npy(path, tessel::tensor<float, tessel::shape<3>>{}), std::system_error);
  EXPECT_FALSE(std::filesystem::exists(dir / "elsewhere"));
  EXPECT_EQ(read_bytes(path), before);
}

TEST(AtomicFile, AMissingDirectoryIsAnError) {
  temp_dir dir;
  EXPECT_THROW(io::write_file_atomically(dir / "no" / "f", [](io::output_file& out) { out.write("x"); }), std::system_error);
  EXPECT_FALSE(std::filesystem::exists(dir / "no"));
}

TEST(AtomicFile, InputFileReportsShortReads) {
  temp_dir dir;
  write_bytes(dir / "f", bytes_of("abc"));
  io::input_file in(dir / "f", "who");
  EXPECT_EQ(in.size(), 3u);
  std::byte buf[4];
  EXPECT_TRUE(throws_with<io::format_error>([&] { in.read_exact(buf, "things"); },
                                            {"who: '", "truncated: expected 4 bytes of things at offset 0, found 3"}));
  EXPECT_TRUE(throws_with<io::format_error>([&] { io::input_file d(dir.path(), "who"); }, {"not a regular file"}));
}

}  // namespace
