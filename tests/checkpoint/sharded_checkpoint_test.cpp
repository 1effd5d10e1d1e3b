// sharded_checkpoint.hpp in one process: the layout arithmetic against mesh.hpp's, round trips between the
// three layouts (meshes of threads), the index and blocks checked (damage of each kind named), mismatched
// trees refused whole, keep-N and the leftovers of interrupted saves, replacing a step, and the consolidated
// file read back as a plain checkpoint. tests/checkpoint/sharded_processes.cpp does the same across processes.
#include <gtest/gtest.h>

#include <tessel/io/sharded_checkpoint.hpp>

#include <fstream>
#include <random>
#include <string>

#include "sharded_state.hpp"
#include "test_files.hpp"

namespace {
using namespace sharded_state;
using namespace checkpoint_test;
namespace io = tessel::io;
namespace fs = std::filesystem;
using tessel::axis;
using tessel::mesh;

// The blocks of tensor_layout are mesh.hpp's (which shard_map runs on): every device, every dimension.
template <class M, class Spec, class S>
void expect_layout_matches_mesh() {
  const io::tensor_layout l = io::layout_of<M, Spec, S>();
  for (std::size_t device = 0; device < M::devices; ++device) {
    const io::box b = l.block_of(device);
    for (std::size_t d = 0; d < S::rank; ++d) {
      const std::size_t extent = S::dims[d] / (tessel::sharding::splits<M, Spec>(d));
      EXPECT_EQ(b.extent[d], extent) << "device " << device << " dim " << d;
      EXPECT_EQ(b.start[d], (tessel::sharding::block_index<M, Spec>(device, d) * extent)) << "device " << device << " dim " << d;
    }
  }
}

TEST(ShardedCheckpoint, BlocksAreTheMeshsBlocks) {
  using M = mesh<axis<"data", 2>, axis<"model", 3>>;
  expect_layout_matches_mesh<M, P<"data", "model">, shape<4, 6>>();
  expect_layout_matches_mesh<M, P<"model", "data">, shape<6, 4>>();
  expect_layout_matches_mesh<M, P<tessel::mesh_axes<"model", "data">>, shape<12, 5>>();
  expect_layout_matches_mesh<M, P<none, tessel::mesh_axes<"data", "model">>, shape<3, 12>>();
  expect_layout_matches_mesh<M, P<>, shape<7>>();
}

// Every element written once, a block held by several processes cut between them along its first dimension.
TEST(ShardedCheckpoint, EveryElementWrittenOnceAndShared) {
  using M = mesh<axis<"data", 2, tessel::over_processes>, axis<"model", 2>>;
  using piece = io::tensor_layout::piece;
  const auto same = [](const std::vector<piece>& got, const std::vector<piece>& want) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i].process != want[i].process || !(got[i].where == want[i].where)) return false;
    return true;
  };
  // Megatron's column blocks are held by both processes (along "data"): each writes half of each's rows.
  EXPECT_TRUE(same(io::layout_of<M, P<none, "model">, shape<4, 4>>().pieces(),
                   {{0, {{0, 0}, {2, 2}}}, {1, {{2, 0}, {2, 2}}}, {0, {{0, 2}, {2, 2}}}, {1, {{2, 2}, {2, 2}}}}));
  // Replicated: half each. Fully sharded: each process its block (both its devices hold it). A scalar, or a
  // block of one row, by its first holder.
  EXPECT_TRUE(same(io::layout_of<M, P<>, shape<4>>().pieces(), {{0, {{0}, {2}}}, {1, {{2}, {2}}}}));
  EXPECT_TRUE(same(io::layout_of<M, P<"data">, shape<4>>().pieces(), {{0, {{0}, {2}}}, {1, {{2}, {2}}}}));
  EXPECT_TRUE(same(io::layout_of<M, P<>, shape<>>().pieces(), {{0, {{}, {}}}}));
  EXPECT_TRUE(same(io::layout_of<M, P<"data">, shape<2, 3>>().pieces(), {{0, {{0, 0}, {1, 3}}}, {1, {{1, 0}, {1, 3}}}}));
  EXPECT_TRUE(same(io::layout_of<M, P<>, shape<1, 3>>().pieces(), {{0, {{0, 0}, {1, 3}}}}));
  const io::tensor_layout megatron = io::layout_of<M, P<none, "model">, shape<4, 4>>();
  EXPECT_EQ(megatron.processes(), 2u);
  EXPECT_EQ(megatron.boxes_of_process(1).size(), 2u);  // process 1 holds (and reads) both column blocks
  EXPECT_EQ((io::layout_of<M, P<"data">, shape<4>>().boxes_of_process(1)), (std::vector<io::box>{io::box{{2}, {2}}}));
}

// Saves the state of `step` laid out as L over 4 devices of this process.
template <layout L>
void save(const fs::path& dir, std::uint64_t step, std::size_t keep = 3) {
  using C = cell<L, 4, tessel::in_process>;
  const mlp<> params = params_at(step);
  const adam state = state_at(step);
  io::sharded_snapshot s(step);
  s.add<typename C::mesh, typename C::params_spec>("params", params)
      .template add<typename C::mesh, typename C::state_spec>("opt_state", state)
      .set_key(key_at(step))
      .set("note", "layout " + std::string(name_of(L)));
  io::save_sharded(dir, s, {.keep = keep});
}

template <layout L>
std::string restore_and_compare(const io::sharded_checkpoint& c, std::uint64_t step) {
  using C = cell<L, 2, tessel::in_process>;
  mlp<> params;
  adam state;
  fill(params, "params", untouched);
  fill(state, "opt_state", untouched);
  c.template load<typename C::mesh>(io::slot<typename C::params_spec>("params", params),
                           io::slot<typename C::state_spec>("opt_state", state));
  const std::string p = compare<typename C::mesh, typename C::params_spec>(params, "params", step, 0);
  return p.empty() ? compare<typename C::mesh, typename C::state_spec>(state, "opt_state", step, 0) : p;
}

template <layout From>
void expect_restores_into_every_layout() {
  temp_dir dir;
  save<From>(dir.path(), 7);
  const auto c = io::latest_sharded(dir.path());
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 7u);
  EXPECT_EQ(c->key(), key_at(7));
  EXPECT_EQ(c->get("note"), "layout " + std::string(name_of(From)));
  EXPECT_EQ(restore_and_compare<layout::data_parallel>(*c, 7), "");
  EXPECT_EQ(restore_and_compare<layout::fully_sharded>(*c, 7), "");
  EXPECT_EQ(restore_and_compare<layout::megatron>(*c, 7), "");
}

TEST(ShardedCheckpoint, DataParallelRestoresIntoEveryLayout) { expect_restores_into_every_layout<layout::data_parallel>(); }
TEST(ShardedCheckpoint, FullyShardedRestoresIntoEveryLayout) { expect_restores_into_every_layout<layout::fully_sharded>(); }
TEST(ShardedCheckpoint, MegatronRestoresIntoEveryLayout) { expect_restores_into_every_layout<layout::megatron>(); }

TEST(ShardedCheckpoint, WritesOneFilePerProcessAndAnIndex) {
  temp_dir dir;
  save<layout::fully_sharded>(dir.path(), 12);
  const fs::path step = dir / "step-000000000012";
  EXPECT_TRUE(fs::exists(step / "index.json"));
  // The process file is a plain safetensors file of blocks, named by their start.
  const io::safetensors_file f = io::read_safetensors(step / "process-0-of-1.safetensors");
  EXPECT_NE(f.find("params.w1@16,0"), nullptr);
  EXPECT_NE(f.find("opt_state.0@"), nullptr);  // the count: one block, a scalar
  EXPECT_EQ(f.tensors.size(), 3u * 4 * 4 + 1);  // 4 blocks of each of 12 split tensors, the count whole
  EXPECT_FALSE(fs::exists(dir / "step-000000000012.partial"));
}

TEST(ShardedCheckpoint, WholeTreesLoadWithoutAMesh) {
  temp_dir dir;
  save<layout::megatron>(dir.path(), 3);
  mlp<> params;
  adam state;
  io::read_sharded(dir / "step-000000000003").load(io::slot("params", params), io::slot("opt_state", state));
  const mlp<> want = params_at(3);
  EXPECT_EQ(std::memcmp(params.w2.data(), want.w2.data(), sizeof want.w2), 0);
  EXPECT_EQ(std::get<0>(state)[0], std::get<0>(state_at(3))[0]);
}

TEST(ShardedCheckpoint, MismatchedTreesAreRefusedWhole) {
  temp_dir dir;
  save<layout::fully_sharded>(dir.path(), 5);
  const io::sharded_checkpoint c = io::read_sharded(dir / "step-000000000005");
  mlp<> params;
  fill(params, "params", untouched);
  std::tuple<tessel::tensor<std::int32_t, shape<>>, mlp<>> short_state;  // no nu
  EXPECT_TRUE(throws_with<io::checkpoint_error>([&] { c.load(io::slot("params", params), io::slot("opt_state", short_state)); },
                                     {"does not match the program (4 problems)", "tensor 'opt_state.2.w1' (f32[64,32]) is in the "
                                      "checkpoint but not in the program"}));
  EXPECT_EQ((compare<mesh<axis<"d", 1>>, P<>>(params, "params", untouched, 0)), "") << "the params were touched";
  tessel::tensor<float, shape<32, 64>> transposed;
  EXPECT_TRUE(throws_with<io::checkpoint_error>([&] { c.load(io::slot("params.w1", transposed)); },
                                     {"tensor 'params.w1': the program has f32[32,64], the checkpoint f32[64,32] (shape differ)"}));
}

void flip_byte(const fs::path& file, std::uint64_t offset) {
  std::vector<std::byte> bytes = read_bytes(file);
  bytes.at(offset) ^= std::byte{0x10};
  write_bytes(file, bytes);
}

TEST(ShardedCheckpoint, DamagedBlocksAndIndexesAreNamed) {
  temp_dir dir;
  save<layout::fully_sharded>(dir.path(), 1);
  save<layout::fully_sharded>(dir.path(), 2);
  const fs::path step2 = dir / "step-000000000002";
  const io::sharded_checkpoint c = io::read_sharded(step2);
  const auto& w1 = c.tensors.at(0);
  ASSERT_EQ(w1.name, "params.w1");
  flip_byte(step2 / "process-0-of-1.safetensors", w1.blocks[1].offset + 5);
  mlp<> params;
  adam state;
  EXPECT_TRUE(throws_with<io::format_error>([&] { c.load(io::slot("params", params), io::slot("opt_state", state)); },
                                 {"process-0-of-1.safetensors", "corrupted: block 'params.w1@16,0' (2048 bytes at offset",
                                  "the index records"}));
  // A file cut short: its size is checked before any block is read.
  const std::vector<std::byte> bytes = read_bytes(step2 / "process-0-of-1.safetensors");
  write_bytes(step2 / "process-0-of-1.safetensors", std::span(bytes).first(bytes.size() - 3));
  EXPECT_TRUE(throws_with<io::format_error>([&] { c.load(io::slot("params", params), io::slot("opt_state", state)); },
                                            {"truncated or replaced after the save"}));
  // An index that does not tile its tensor, or is not JSON: the step is skipped for the previous one.
  std::string index;
  {
    std::ifstream in(step2 / "index.json");
    index.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::size_t at = index.find("{\"file\":0,\"start\":[16,0]");
  ASSERT_NE(at, std::string::npos);
  std::string holed = index;
  holed.replace(at, index.find('}', at) - at + 2, "");
  write_bytes(step2 / "index.json", bytes_of(holed));
  EXPECT_TRUE(throws_with<io::checkpoint_error>(
      [&] { io::read_sharded(step2); }, {"index.json", "tensor 'params.w1' [64,32]: its blocks cover 1536 of its 2048 elements"}));
  write_bytes(step2 / "index.json", bytes_of(index.substr(0, index.size() / 2)));
  const auto latest = io::latest_sharded(dir.path());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 1u);
  ASSERT_EQ(latest->skipped.size(), 1u);
  EXPECT_NE(latest->skipped[0].find("step-000000000002"), std::string::npos) << latest->skipped[0];
  EXPECT_EQ(restore_and_compare<layout::fully_sharded>(*latest, 1), "");
}

// Random damage to the index or to a process file: read_sharded and load either refuse with a format_error
// or load exactly what was saved (never a crash, never other contents: run it under the sanitizers).
TEST(ShardedCheckpoint, RandomDamageIsRefusedOrHarmless) {
  temp_dir dir;
  save<layout::megatron>(dir.path(), 4);
  const fs::path step = dir / "step-000000000004";
  const std::vector<std::byte> index = read_bytes(step / "index.json");
  const std::vector<std::byte> blocks = read_bytes(step / "process-0-of-1.safetensors");
  std::mt19937_64 rng(20261207);
  const std::string alphabet = "0123456789[]{},:\"abcdef- ";
  std::size_t refused = 0, accepted = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<std::byte> i = index, b = blocks;
    if (trial % 3 == 2) b[rng() % b.size()] ^= std::byte{static_cast<unsigned char>(1u << (rng() % 8))};
    else i[rng() % i.size()] = static_cast<std::byte>(alphabet[rng() % alphabet.size()]);
    write_bytes(step / "index.json", i);
    write_bytes(step / "process-0-of-1.safetensors", b);
    try {
      const io::sharded_checkpoint c = io::read_sharded(step);
      ASSERT_EQ(restore_and_compare<layout::fully_sharded>(c, 4), "") << "trial " << trial;
      ++accepted;
    } catch (const io::format_error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 500u);
  // Harmless: the same byte drawn, a changed metadata text, a flip in the process file's safetensors header
  // (load reads the blocks at the index's offsets, each checked by its hash).
  EXPECT_GT(accepted, 0u);
  std::printf("%zu damaged copies refused, %zu harmless\n", refused, accepted);
}

TEST(ShardedCheckpoint, KeepsTheNewestAndDropsInterruptedSaves) {
  temp_dir dir;
  fs::create_directories(dir / "step-000000000003.partial");  // a save killed before its commit
  for (std::uint64_t step = 1; step <= 5; ++step) save<layout::data_parallel>(dir.path(), step, 2);
  EXPECT_EQ(io::sharded_steps(dir.path()), (std::vector<std::uint64_t>{4, 5}));
  EXPECT_FALSE(fs::exists(dir / "step-000000000003.partial"));
  // Saving a step again replaces it; an older step saved later deletes nothing newer.
  save<layout::megatron>(dir.path(), 5, 2);
  save<layout::megatron>(dir.path(), 2, 2);
  EXPECT_EQ(io::sharded_steps(dir.path()), (std::vector<std::uint64_t>{2, 4, 5}));
  EXPECT_EQ(restore_and_compare<layout::fully_sharded>(io::read_sharded(dir / "step-000000000005"), 5), "");
}

TEST(ShardedCheckpoint, KeepCountsOnlyTheRunsOwnCheckpoints) {
  temp_dir dir;
  const mlp<> params = params_at(1);
  const auto save_run = [&](std::uint64_t step, const std::string& run) {
    io::sharded_snapshot s(step);
    s.add<mesh<axis<"data", 2>>, P<"data">>("params", params);
    io::save_sharded(dir.path(), s, {.keep = 2, .run = run});
  };
  save_run(1, "other");
  save_run(2, "other");
  fs::create_directories(dir / "step-000000000003");  // committed-looking, but its index is missing: damaged
  for (std::uint64_t step = 10; step <= 13; ++step) save_run(step, "mine");
  EXPECT_EQ(io::sharded_steps(dir.path()), (std::vector<std::uint64_t>{1, 2, 12, 13}));
  EXPECT_EQ(io::read_sharded(dir / "step-000000000013").get("tessel.run"), "mine");
}

TEST(ShardedCheckpoint, ConsolidatesIntoOneCheckpointFile) {
  temp_dir dir;
  save<layout::megatron>(dir.path(), 9);
  const io::sharded_checkpoint c = io::read_sharded(dir / "step-000000000009");
  c.consolidate(dir / "whole.safetensors");
  constexpr std::size_t mlp_bytes = 64 * 32 * 4 + 32 * 4 + 32 * 48 * 2 + 48 * 4;
  EXPECT_EQ(c.bytes_read(), 3 * mlp_bytes + 4);  // every block once
  const io::loaded_checkpoint whole = io::read_checkpoint(dir / "whole.safetensors");
  EXPECT_EQ(whole.step, 9u);
  EXPECT_EQ(whole.key(), key_at(9));
  mlp<> params;
  adam state;
  whole.load(io::slot("params", params), io::slot("opt_state", state));
  EXPECT_EQ((compare<mesh<axis<"d", 1>>, P<>>(params, "params", 9, 0)), "");
  EXPECT_EQ((compare<mesh<axis<"d", 1>>, P<>>(state, "opt_state", 9, 0)), "");
}

TEST(ShardedCheckpoint, AMeshOverOtherProcessCountsIsRefused) {
  using M = mesh<axis<"data", 2, tessel::over_processes>>;
  const mlp<> params = params_at(1);
  io::sharded_snapshot s(1);
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { s.add<M, P<"data">>("params", params); },
                                      {"tessel::io::sharded_snapshot::add: the mesh spans 2 processes, the run has 1",
                                       "mpirun -np 2"}));
}

}  // namespace
