// Sharded checkpoints across processes (started by mpirun; check_sharded.sh runs the cases):
//   save DIR      saves the state in each of the three layouts over the run's P processes (1, 2 or 4):
//                 DIR/np<P>-<layout>, step 100 P + the layout's place
//   restore DIR   restores every checkpoint DIR holds (any P, any layout) into each of the three layouts
//                 over this run's processes: every element of every block this process's devices hold bit for
//                 bit the saved one, every other element untouched, and only the stored blocks overlapping
//                 those read (all of them for a replicated layout; 1/P of them for the layout it was saved in
//                 when fully sharded); and each of the P saving processes wrote 1/P of the state, whatever
//                 the layout
//   loop DIR      restores DIR's newest checkpoint (checking it), prints "saving", then saves steps after it
//                 (fully sharded, keep 2) until it is killed
//   verify DIR    restores DIR's newest checkpoint and checks it; prints its step
//   export DIR    saves step 77 fully sharded into DIR/ckpt, then (process 0) consolidates it into
//                 DIR/tessel.safetensors and writes what every tensor should hold to DIR/expected/<name>.npy
//                 (bf16 as its bits): what interop.py gives PyTorch and Orbax to read
//   import FILE DIR  reads FILE (written by PyTorch) into the parameter tree and compares every tensor bit
//                 for bit with DIR/<name>.npy
// Exit status 0 when every check holds; 1 with the first difference on stderr.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "sharded_state.hpp"
#include "tessel/distributed.hpp"
#include "tessel/io/npy.hpp"

namespace {
using namespace sharded_state;
namespace io = tessel::io;
namespace fs = std::filesystem;

constexpr std::size_t mlp_bytes = 64 * 32 * 4 + 32 * 4 + 32 * 48 * 2 + 48 * 4;
constexpr std::size_t state_bytes = 3 * mlp_bytes + 4;

std::size_t place_of(layout l) { return l == layout::data_parallel ? 0 : l == layout::fully_sharded ? 1 : 2; }

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

template <layout L, std::size_t D>
void save(const fs::path& dir, std::uint64_t step, std::size_t keep) {
  using C = cell<L, D, tessel::over_processes>;
  const mlp<> params = params_at(step);
  const adam state = state_at(step);
  io::sharded_snapshot s(step);
  s.add<typename C::mesh, typename C::params_spec>("params", params)
      .template add<typename C::mesh, typename C::state_spec>("opt_state", state)
      .set_key(key_at(step));
  io::save_sharded(dir, s, {.keep = keep});
}

// Restores `c` laid out as L over the run's D processes and checks it; returns the bytes it read.
template <layout L, std::size_t D>
std::uint64_t restore(const io::sharded_checkpoint& c, const std::string& what) {
  using C = cell<L, D, tessel::over_processes>;
  mlp<> params;
  adam state;
  fill(params, "params", untouched);
  fill(state, "opt_state", untouched);
  const std::uint64_t before = c.bytes_read();
  c.template load<typename C::mesh>(io::slot<typename C::params_spec>("params", params),
                                    io::slot<typename C::state_spec>("opt_state", state));
  const std::size_t me = tessel::distributed::process_index();
  std::string problem = compare<typename C::mesh, typename C::params_spec>(params, "params", c.step, me);
  if (problem.empty()) problem = compare<typename C::mesh, typename C::state_spec>(state, "opt_state", c.step, me);
  require(problem.empty(), what + " into " + name_of(L) + ": " + problem);
  require(c.key() == key_at(c.step), what + ": the random key differs");
  return c.bytes_read() - before;
}

// Writes every leaf of `tree` to dir/<name>.npy.
template <class Tree>
void write_expected(const fs::path& dir, const Tree& tree, const std::string& prefix) {
  tessel::tree::for_each_named(tree, [&](const std::string& name, const auto& t) { io::write_npy(dir / (name + ".npy"), t); },
                               prefix);
}

template <std::size_t D>
int run(const std::string& mode, const fs::path& dir) {
  const std::size_t me = tessel::distributed::process_index();
  if (mode == "export") {
    save<layout::fully_sharded, D>(dir / "ckpt", 77, 1);
    if (me == 0) {
      io::read_sharded(dir / "ckpt" / "step-000000000077").consolidate(dir / "tessel.safetensors");
      fs::create_directories(dir / "expected");
      write_expected(dir / "expected", params_at(77), "params");
      write_expected(dir / "expected", state_at(77), "opt_state");
    }
    return 0;
  }
  if (mode == "save") {
    save<layout::data_parallel, D>(dir / ("np" + std::to_string(D) + "-dp"), 100 * D + 0, 3);
    save<layout::fully_sharded, D>(dir / ("np" + std::to_string(D) + "-fsdp"), 100 * D + 1, 3);
    save<layout::megatron, D>(dir / ("np" + std::to_string(D) + "-megatron"), 100 * D + 2, 3);
    return 0;
  }
  if (mode == "restore") {
    std::size_t restored = 0;
    for (const std::size_t saved_by : {1, 2, 4})
      for (const layout from : layouts) {
        const std::string name = "np" + std::to_string(saved_by) + "-" + name_of(from);
        const auto c = io::latest_sharded(dir / name);
        require(c.has_value(), name + ": no committed checkpoint");
        require(c->step == 100 * saved_by + place_of(from) && c->processes == saved_by, name + ": wrong step or process count");
        // Every layout here splits evenly: each process wrote its share, the count (4 bytes) by process 0.
        std::vector<std::uint64_t> written(saved_by, 0);
        for (const auto& t : c->tensors)
          for (const auto& b : t.blocks) written[b.file] += b.where.volume() * io::find_safetensors_dtype(t.dtype)->size;
        for (std::size_t p = 0; p < saved_by; ++p)
          require(written[p] == (state_bytes - 4) / saved_by + (p == 0 ? 4 : 0),
                  name + ": process " + std::to_string(p) + " wrote " + std::to_string(written[p]) + " bytes of the " +
                      std::to_string(state_bytes) + ", not its share");
        const std::uint64_t dp = restore<layout::data_parallel, D>(*c, name);
        const std::uint64_t fsdp = restore<layout::fully_sharded, D>(*c, name);
        restore<layout::megatron, D>(*c, name);
        // A replicated layout needs every block; a fully sharded one saved by as many processes, its own.
        require(dp == state_bytes, name + ": restoring replicated read " + std::to_string(dp) + " bytes, expected all " +
                                       std::to_string(state_bytes));
        if (from == layout::fully_sharded && saved_by == D)
          require(fsdp == (state_bytes - 4) / D + 4, name + ": restoring fully sharded read " + std::to_string(fsdp) +
                                                          " bytes, expected 1/" + std::to_string(D) + " of the state");
        ++restored;
      }
    if (me == 0) std::printf("restored %zu checkpoints into 3 layouts over %zu processes\n", restored, D);
    return 0;
  }
  if (mode == "loop" || mode == "verify") {
    std::uint64_t step = 1;
    if (const auto c = io::latest_sharded(dir)) {
      restore<layout::fully_sharded, D>(*c, "the newest of " + dir.string());
      step = c->step + 1;
      if (mode == "verify" && me == 0) std::printf("step %llu intact\n", static_cast<unsigned long long>(c->step));
    } else {
      require(mode == "loop", dir.string() + ": no committed checkpoint");
    }
    if (mode == "verify") return 0;
    std::printf("process %zu pid %ld\n", me, static_cast<long>(::getpid()));
    if (me == 0) std::printf("saving\n");
    std::fflush(stdout);
    for (;; ++step) save<layout::fully_sharded, D>(dir, step, 2);
  }
  throw std::invalid_argument("unknown mode '" + mode + "'");
}

}  // namespace

// import: the parameters PyTorch wrote, each compared with its .npy.
int import_file(const fs::path& file, const fs::path& expected) {
  mlp<> params;
  io::import_safetensors(file).load(io::slot("params", params));
  std::size_t compared = 0;
  tessel::tree::for_each_named(
      params,
      [&](const std::string& name, const auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        const X want = io::read_npy<typename X::value_type, typename X::shape_type>(expected / (name + ".npy"));
        require(std::memcmp(t.data(), want.data(), X::shape_type::size * sizeof(typename X::value_type)) == 0,
                name + ": the value read from " + file.string() + " differs from " + name + ".npy");
        ++compared;
      },
      "params");
  std::printf("read %zu tensors of %s into the parameter tree, each equal bit for bit\n", compared, file.string().c_str());
  return 0;
}

int main(int argc, char** argv) {
  tessel::distributed::init(argc, argv);
  if (argc != 3 && !(argc == 4 && std::string(argv[1]) == "import")) {
    std::fprintf(stderr, "usage: checkpoint_sharded_processes save|restore|loop|verify|export DIR, or import FILE DIR\n");
    return 2;
  }
  try {
    if (argc == 4) return import_file(argv[2], argv[3]);
    switch (tessel::distributed::process_count()) {
      case 1: return run<1>(argv[1], argv[2]);
      case 2: return run<2>(argv[1], argv[2]);
      case 4: return run<4>(argv[1], argv[2]);
      default: throw std::invalid_argument("run it with 1, 2 or 4 processes");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "process %zu: %s\n", tessel::distributed::process_index(), e.what());
    return 1;
  }
}
