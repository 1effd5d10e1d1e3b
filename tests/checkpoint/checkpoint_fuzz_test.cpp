// The checkpoint reader on damaged files: every truncation and thousands of random bit flips of a real
// checkpoint are format_errors (never a crash, never a silent load of other contents), and a manager
// falls back to the previous checkpoint when the newest is damaged.
#include <gtest/gtest.h>

#include <tessel/io/checkpoint.hpp>

#include <random>

#include "test_files.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using namespace checkpoint_test;
namespace io = tessel::io;

template <template <class, class> class T = tensor>
struct params {
  BOOST_HANA_DEFINE_STRUCT(params, (T<float, shape<7, 5>>, w), (T<tessel::bfloat16, shape<6>>, b), (T<bool, shape<3>>, mask));
};

params<> sample_params(std::uint64_t step) {
  params<> p;
  p.w = sample<float, shape<7, 5>>();
  p.w[0] = static_cast<float>(step);
  p.b = sample<tessel::bfloat16, shape<6>>();
  p.mask = sample<bool, shape<3>>();
  return p;
}

std::vector<std::byte> checkpoint_bytes(std::uint64_t step) {
  io::snapshot s(step);
  s.add("params", sample_params(step)).set_key(tessel::random::key(1, 2)).set("data", "{\"epoch\":0,\"index\":3,\"pending\":[]}");
  return io::serialize_safetensors(std::move(s).finish());
}

// Reads the bytes as a checkpoint, from a file (read_checkpoint) or from memory (parse_safetensors and
// check_checkpoint): true if accepted (then it must hold exactly the original contents).
bool accepted(const std::vector<std::byte>& bytes, const temp_dir* file_in = nullptr) {
  try {
    io::loaded_checkpoint c;
    if (file_in) {
      write_bytes(*file_in / "x.safetensors", bytes);
      c = io::read_checkpoint(*file_in / "x.safetensors");
    } else {
      c = io::check_checkpoint(io::parse_safetensors(bytes), "memory");
    }
    params<> p;
    c.load(io::slot("params", p));
    const params<> want = sample_params(9);
    EXPECT_EQ(c.step, 9u);
    EXPECT_TRUE(same_bits(p.w, want.w) && same_bits(p.b, want.b) && same_bits(p.mask, want.mask));
    EXPECT_EQ(c.key(), tessel::random::key(1, 2));
    return true;
  } catch (const io::format_error&) {
    return false;
  }
}

TEST(CheckpointFuzz, EveryTruncationIsAnError) {
  temp_dir dir;
  const auto bytes = checkpoint_bytes(9);
  ASSERT_TRUE(accepted(bytes, &dir));
  ASSERT_TRUE(accepted(bytes));
  for (std::size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(accepted(std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)), &dir)) << n;
}

TEST(CheckpointFuzz, BitFlipsAreErrors) {
  const auto bytes = checkpoint_bytes(9);
  std::mt19937_64 rng(7);
  int accepted_flips = 0;
  // Every single-bit flip of the file, then random multi-byte damage.
  for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    auto damaged = bytes;
    damaged[bit / 8] ^= std::byte{static_cast<unsigned char>(1u << (bit % 8))};
    accepted_flips += accepted(damaged);
  }
  for (int round = 0; round < 2000; ++round) {
    auto damaged = bytes;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) damaged[rng() % damaged.size()] = std::byte{static_cast<unsigned char>(rng())};
    if (damaged != bytes) accepted_flips += accepted(damaged);
  }
  // Only the header's padding spaces could change without changing the contents, and the JSON parser
  // rejects what a flip makes of them, so every damaged file is refused.
  EXPECT_EQ(accepted_flips, 0);
}

TEST(CheckpointFuzz, ManagerFallsBackPastADamagedNewestFile) {
  temp_dir dir;
  std::mt19937_64 rng(11);
  io::checkpoint_manager mgr(dir.path(), {.keep = 10, .asynchronous = false});
  const auto older = checkpoint_bytes(1);
  for (int round = 0; round < 200; ++round) {
    write_bytes(mgr.path_of(1), older);
    auto damaged = checkpoint_bytes(2);
    if (round % 2) damaged.resize(rng() % damaged.size());
    else damaged[rng() % damaged.size()] ^= std::byte{static_cast<unsigned char>(1 + rng() % 255)};
    write_bytes(mgr.path_of(2), damaged);
    const auto last = mgr.restore_latest();
    ASSERT_TRUE(last);
    EXPECT_EQ(last->step, 1u) << round;
    EXPECT_EQ(last->skipped.size(), 1u);
  }
}

}  // namespace
