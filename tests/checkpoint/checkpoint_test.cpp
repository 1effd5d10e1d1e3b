// checkpoint.hpp: names from the trees, round trips of every dtype, validation that lists every
// mismatch without touching the trees, the manager's keep-N, asynchronous saves and the fallback to
// the newest intact file; runs (keep-N of one run, damaged files pruned, list_checkpoints), the
// directory lock and the non-finite check of a snapshot.
#include <gtest/gtest.h>

#include <tessel/io/checkpoint.hpp>

#include <limits>
#include <tuple>

#include "test_files.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using namespace checkpoint_test;
namespace io = tessel::io;

template <template <class, class> class T = tensor>
struct layer {
  BOOST_HANA_DEFINE_STRUCT(layer, (T<float, shape<3, 4>>, w), (T<tessel::bfloat16, shape<4>>, b));
};
template <template <class, class> class T = tensor>
struct model {
  BOOST_HANA_DEFINE_STRUCT(model, (layer<T>, layer1), (T<std::int32_t, shape<2>>, ids));
};
template <template <class, class> class T = tensor>
struct other_model {  // layer1.w transposed, b as f32, ids missing, an extra member
  BOOST_HANA_DEFINE_STRUCT(other_model, (T<float, shape<4, 3>>, w), (T<float, shape<4>>, b));
};
template <template <class, class> class T = tensor>
struct wrong {
  BOOST_HANA_DEFINE_STRUCT(wrong, (other_model<T>, layer1), (T<float, shape<5>>, extra));
};

model<> sample_model(float offset) {
  model<> m;
  m.layer1.w = sample<float, shape<3, 4>>();
  for (std::size_t i = 0; i < 12; ++i) m.layer1.w[i] += offset;
  m.layer1.b = sample<tessel::bfloat16, shape<4>>();
  m.ids = sample<std::int32_t, shape<2>>();
  return m;
}

bool same(const model<>& a, const model<>& b) {
  return same_bits(a.layer1.w, b.layer1.w) && same_bits(a.layer1.b, b.layer1.b) && same_bits(a.ids, b.ids);
}

TEST(Checkpoint, NamesDtypesAndRoundTrip) {
  temp_dir dir;
  const model<> m = sample_model(0);
  std::tuple<tensor<std::int32_t, shape<>>, model<>> state{tensor<std::int32_t, shape<>>{7}, sample_model(1)};
  io::snapshot s(42);
  s.add("params", m).add("opt", state).set_key(tessel::random::key(3, 4000000000u)).set("data", "{\"epoch\":1}");
  const auto file = std::move(s).finish();
  std::vector<std::string> names;
  for (const auto& e : file.tensors) names.push_back(e.name + ":" + e.dtype);
  EXPECT_EQ(names, (std::vector<std::string>{"params.layer1.w:F32", "params.layer1.b:BF16", "params.ids:I32", "opt.0:I32",
                                             "opt.1.layer1.w:F32", "opt.1.layer1.b:BF16", "opt.1.ids:I32"}));
  io::write_safetensors(dir / "a.safetensors", file);
  const auto back = io::read_checkpoint(dir / "a.safetensors");
  EXPECT_EQ(back.step, 42u);
  EXPECT_EQ(back.key(), tessel::random::key(3, 4000000000u));
  EXPECT_EQ(back.get("data"), "{\"epoch\":1}");
  model<> m2;
  std::tuple<tensor<std::int32_t, shape<>>, model<>> state2;
  back.load(io::slot("params", m2), io::slot("opt", state2));
  EXPECT_TRUE(same(m, m2));
  EXPECT_EQ(std::get<0>(state2)[0], 7);
  EXPECT_TRUE(same(std::get<1>(state), std::get<1>(state2)));
  EXPECT_THROW(io::snapshot().set("tessel.step", "1"), std::invalid_argument);
}

TEST(Checkpoint, LoadReportsEveryMismatchAndLoadsNothing) {
  temp_dir dir;
  io::snapshot s(1);
  s.add("params", sample_model(0));
  io::write_safetensors(dir / "a.safetensors", std::move(s).finish());
  const auto back = io::read_checkpoint(dir / "a.safetensors");
  wrong<> w;
  w.layer1.w[0] = 123.0f;
  EXPECT_TRUE(throws_with<io::checkpoint_error>([&] { back.load(io::slot("params", w)); },
                                                {"4 problems", "tensor 'params.layer1.w': the program has f32[4,3], the file f32[3,4] (shape differ)",
                                                 "tensor 'params.layer1.b': the program has f32[4], the file bf16[4] (dtype differ)",
                                                 "tensor 'params.extra' (f32[5]) is missing",
                                                 "tensor 'params.ids' (s32[2]) is in the file but not in the program"}));
  EXPECT_EQ(w.layer1.w[0], 123.0f);
  // A correct tree next to a wrong one is not assigned either.
  model<> m;
  EXPECT_THROW(back.load(io::slot("params", m), io::slot("opt", w)), io::checkpoint_error);
  EXPECT_EQ(m.layer1.w[0], 0.0f);
}

TEST(Checkpoint, DetectsBitFlipsThatTheFormatAccepts) {
  temp_dir dir;
  io::snapshot s(5);
  s.add("params", sample_model(0)).set("note", "1234");
  io::write_safetensors(dir / "a.safetensors", std::move(s).finish());
  const auto bytes = read_bytes(dir / "a.safetensors");
  // A flip in the last data byte, and a digit of a metadata value changed.
  auto flipped = bytes;
  flipped.back() ^= std::byte{1};
  write_bytes(dir / "b.safetensors", flipped);
  EXPECT_TRUE(throws_with<io::checkpoint_error>([&] { io::read_checkpoint(dir / "b.safetensors"); }, {"corrupted", "checksum"}));
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  text.replace(text.find("\"1234\""), 6, "\"1235\"");
  write_bytes(dir / "c.safetensors", bytes_of(text));
  EXPECT_THROW(io::read_checkpoint(dir / "c.safetensors"), io::checkpoint_error);
  // A plain safetensors file is not a checkpoint.
  io::safetensors_file plain;
  plain.put("x", sample<float, shape<2>>());
  io::write_safetensors(dir / "d.safetensors", plain);
  EXPECT_TRUE(throws_with<io::checkpoint_error>([&] { io::read_checkpoint(dir / "d.safetensors"); }, {"not a tessel checkpoint"}));
}

TEST(CheckpointManager, KeepsTheLastNAndRestoresTheNewest) {
  temp_dir dir;
  for (const bool asynchronous : {true, false}) {
    std::filesystem::remove_all(dir / "run");
    io::checkpoint_manager mgr(dir / "run", {.keep = 2, .asynchronous = asynchronous});
    EXPECT_FALSE(mgr.restore_latest());
    model<> m = sample_model(0);
    for (std::uint64_t step = 1; step <= 5; ++step) {
      m.layer1.w[0] = static_cast<float>(step);
      io::snapshot s(step * 10);
      s.add("params", m);
      m.layer1.w[0] = -1.0f;  // the snapshot holds its own copy
      mgr.save(std::move(s));
    }
    mgr.wait();
    EXPECT_EQ(mgr.steps(), (std::vector<std::uint64_t>{40, 50}));
    const auto last = mgr.restore_latest();
    ASSERT_TRUE(last);
    EXPECT_EQ(last->step, 50u);
    EXPECT_TRUE(last->skipped.empty());
    model<> back;
    last->load(io::slot("params", back));
    EXPECT_EQ(back.layer1.w[0], 5.0f);
  }
}

TEST(CheckpointManager, SkipsTruncatedAndCorruptNewestFiles) {
  temp_dir dir;
  io::checkpoint_manager mgr(dir.path(), {.keep = 5});
  for (std::uint64_t step = 1; step <= 3; ++step) {
    io::snapshot s(step);
    s.add("params", sample_model(static_cast<float>(step)));
    mgr.save(std::move(s));
  }
  mgr.wait();
  auto bytes = read_bytes(mgr.path_of(3));
  bytes.resize(bytes.size() / 2);
  write_bytes(mgr.path_of(3), bytes);
  bytes = read_bytes(mgr.path_of(2));
  bytes[bytes.size() - 3] ^= std::byte{0x10};
  write_bytes(mgr.path_of(2), bytes);
  write_bytes(dir / "ckpt-000000000009.safetensors", {});  // empty
  write_bytes(dir / "ckpt-000000000001.safetensors.tmp-1", bytes_of("partial"));  // a killed writer's temp file
  const auto last = mgr.restore_latest();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->step, 1u);
  ASSERT_EQ(last->skipped.size(), 3u);
  EXPECT_NE(last->skipped[0].find("ckpt-000000000009"), std::string::npos);
  EXPECT_NE(last->skipped[1].find("truncated"), std::string::npos) << last->skipped[1];
  EXPECT_NE(last->skipped[2].find("corrupted"), std::string::npos) << last->skipped[2];
  model<> back;
  last->load(io::slot("params", back));
  EXPECT_TRUE(same(back, sample_model(1)));
  io::checkpoint_manager again(dir.path());
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt-000000000001.safetensors.tmp-1"));
}

TEST(CheckpointManager, AsynchronousErrorsComeBack) {
  temp_dir dir;
  io::checkpoint_manager mgr(dir / "run");
  std::filesystem::remove_all(dir / "run");
  std::filesystem::create_directories(dir / "run" / "ckpt-000000000007.safetensors" / "x");  // a directory in the way
  io::snapshot s(7);
  s.add("params", sample_model(0));
  mgr.save(std::move(s));
  EXPECT_THROW(mgr.wait(), std::system_error);
  mgr.wait();  // reported once
}

// With a run set, keep-N counts only that run's files, every damaged file goes (a higher step too), and
// another run's intact files stay; list_checkpoints reports each file with its run or its problem.
TEST(CheckpointManager, KeepsTheRunsFilesAndPrunesDamagedOnes) {
  temp_dir dir;
  for (const bool asynchronous : {true, false}) {
    std::filesystem::remove_all(dir / "run");
    {
      io::checkpoint_manager other(dir / "run", {.keep = 5, .asynchronous = asynchronous, .run = "B"});
      for (const std::uint64_t step : {1u, 2u}) {
        io::snapshot s(step);
        s.add("params", sample_model(0));
        other.save(std::move(s));
      }
    }
    write_bytes(dir / "run" / "ckpt-000000000050.safetensors", bytes_of("a damaged file"));
    write_bytes(dir / "run" / "ckpt-000000000003.safetensors", {});
    const auto before = io::list_checkpoints(dir / "run");
    ASSERT_EQ(before.size(), 4u);
    EXPECT_TRUE(before[0].intact() && before[0].run() == "B" && before[0].step == 1);
    EXPECT_FALSE(before[2].intact());
    EXPECT_EQ(before[2].step, 3u);
    EXPECT_NE(before[2].problem.find("ckpt-000000000003"), std::string::npos) << before[2].problem;
    EXPECT_FALSE(before[3].intact());
    EXPECT_TRUE(before[3].run().empty());

    io::checkpoint_manager mgr(dir / "run", {.keep = 2, .asynchronous = asynchronous, .run = "A"});
    for (const std::uint64_t step : {10u, 20u, 30u}) {
      io::snapshot s(step);
      s.add("params", sample_model(static_cast<float>(step)));
      mgr.save(std::move(s));
    }
    mgr.wait();
    EXPECT_EQ(mgr.steps(), (std::vector<std::uint64_t>{1, 2, 20, 30}));
    const auto after = mgr.list();
    ASSERT_EQ(after.size(), 4u);
    for (const auto& f : after) EXPECT_TRUE(f.intact()) << f.problem;
    EXPECT_EQ(after[1].run(), "B");
    EXPECT_EQ(after[2].run(), "A");
    EXPECT_EQ(after[3].metadata.at("tessel.run"), "A");
    const auto last = mgr.restore_latest();
    ASSERT_TRUE(last);
    EXPECT_EQ(last->step, 30u);
    EXPECT_EQ(last->get("tessel.run"), "A");
  }
}

TEST(DirectoryLock, ASecondWriterFailsNamingTheHolder) {
  temp_dir dir;
  {
    io::directory_lock first(dir / "run");
    EXPECT_TRUE(std::filesystem::exists(dir / "run" / "lock"));
    try {
      io::directory_lock second(dir / "run");
      ADD_FAILURE() << "a second lock of the directory was granted";
    } catch (const io::directory_busy& e) {
      EXPECT_EQ(e.holder(), static_cast<long>(::getpid()));
      const std::string what = e.what();
      EXPECT_NE(what.find("in use by another writer (process " + std::to_string(::getpid())), std::string::npos) << what;
    }
  }
  io::directory_lock again(dir / "run");  // released with its holder
}

TEST(DirectoryLock, AStaleLockFileDoesNotBlock) {
  temp_dir dir;
  write_bytes(dir / "lock", bytes_of("999999\n"));  // left by a process that died
  io::directory_lock lock(dir.path());
  const auto bytes = read_bytes(dir / "lock");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), std::to_string(::getpid()) + "\n");
}

TEST(Snapshot, FindsNonFiniteValues) {
  model<> m = sample_model(0);  // layer1.w holds a NaN and -inf, layer1.b a NaN
  io::snapshot bad(1);
  bad.add("params", m);
  EXPECT_EQ(bad.first_non_finite(), std::optional<std::string>("params.layer1.w"));
  for (std::size_t i = 0; i < 12; ++i) m.layer1.w[i] = 1.0f;
  io::snapshot bf16(1);
  bf16.add("params", m);
  EXPECT_EQ(bf16.first_non_finite(), std::optional<std::string>("params.layer1.b"));
  for (std::size_t i = 0; i < 4; ++i) m.layer1.b[i] = tessel::bfloat16(2.0f);
  m.layer1.w[5] = std::numeric_limits<float>::max();
  io::snapshot good(1);
  good.add("params", m);
  EXPECT_EQ(good.first_non_finite(), std::nullopt);
}

}  // namespace
