#pragma once
// Sharded checkpoints: every process writes the blocks it owns, and a checkpoint restores onto any mesh
// (Orbax's habits, with the index of safetensors' model.safetensors.index.json).
//
//   using M = tessel::mesh<tessel::axis<"data", 2, tessel::over_processes>>;       // saved: fully sharded
//   tessel::io::sharded_snapshot s(step);
//   s.add<M, tessel::P<"data">>("params", params).add<M, tessel::specs<tessel::P<>, tessel::P<"data">, tessel::P<"data">>>(
//       "opt_state", opt_state).set_key(key);
//   tessel::io::save_sharded("run/ckpt", std::move(s), {.keep = 3});              // every process calls it
//
//   using N = tessel::mesh<tessel::axis<"data", 4, tessel::over_processes>, tessel::axis<"model", 2>>;
//   if (auto last = tessel::io::latest_sharded("run/ckpt"))                        // restored: Megatron, 4 processes
//     last->load<N>(tessel::io::slot<tessel::specs<tessel::P<tessel::none, "model">, tessel::P<"model">>>("params", params));
//
// On disk, step S is the directory "step-<S, 12 digits>" holding "process-<i>-of-<P>.safetensors" for every
// process i (plain safetensors files: the blocks process i owns, each named "<tensor>@<start>", "params.w1@0,64")
// and "index.json": every tensor's dtype, global shape and blocks (file, start, shape, byte offset, a 64-bit
// hash of its bytes), the step and the caller's metadata. Every element is written once: a block held by
// several processes (a replicated tensor, Megatron's blocks along "data") is cut along its first dimension
// between them, so that no process writes more than its share (tensor_layout::pieces).
//
// `dir` is one directory that every process sees (on several machines, a shared file system), as Orbax's.
// A save is committed by one rename: every process writes its file into "step-<S>.partial"; once all have
// written and synced theirs (an exchange over the process transport, kernels/collective.hpp), process 0
// writes the index and renames the directory to "step-<S>". A process that dies or fails before that rename
// leaves no "step-<S>", so the previous checkpoint stays the newest committed one; every process of the save throws
// checkpoint_error naming the failed process and its error (or the transport ends the run naming the
// process that never arrived). Process 0 then deletes committed steps beyond `keep` and what earlier,
// interrupted saves left.
//
// load<M>() fills, in every leaf, the blocks that this process's devices hold under the new layout, and
// reads from disk only the stored blocks that overlap them, each checked against its hash; the rest of a
// leaf keeps its value (a shard_map with the same in_specs reads nothing else). load() without a mesh fills
// whole tensors. As loaded_checkpoint::load, every mismatch (missing tensors, dtypes, shapes, tensors no slot
// asked for) is reported at once and the trees are assigned only when everything matches and every block
// read is intact. consolidate() writes the whole state as one tessel checkpoint file (checkpoint.hpp), a
// plain safetensors file for other tools.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/core/mesh.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/io/checkpoint.hpp"
#include "tessel/io/safetensors.hpp"
#include "tessel/random/key.hpp"
#include "tessel/transform/shard_map.hpp"

namespace tessel::io {

inline constexpr std::string_view sharded_checkpoint_format = "tessel.sharded_checkpoint/1";

// A box of a tensor: where it starts and how far it extends along each dimension.
struct box {
  std::vector<std::uint64_t> start, extent;
  std::uint64_t volume() const;
  bool operator==(const box&) const = default;
};

// How a tensor is laid out over a mesh, at run time: the mesh's axis sizes (devices in row-major order, the
// first `process_axes` axes over processes), the tensor's global dims, and the mesh axes that cut each
// dimension (first major, as a PartitionSpec's entry).
struct tensor_layout {
  std::vector<std::size_t> mesh;
  std::size_t process_axes = 0;
  std::vector<std::uint64_t> dims;
  std::vector<std::vector<std::size_t>> cuts;

  std::size_t devices() const;
  std::size_t processes() const;
  // The box device `device` holds.
  box block_of(std::size_t device) const;
  // What a save writes, each box once, and the process that writes it, in device order: each block cut along
  // its first dimension between the processes holding it (those of the devices that differ only along axes
  // the layout does not use), so a replicated tensor is written 1/P by each of P processes; a block of one
  // holder, or a scalar, whole by it. (A mesh inside one process: everything by process 0.)
  struct piece {
    std::size_t process;
    box where;
  };
  std::vector<piece> pieces() const;
  // The distinct boxes the devices of process `process` hold, in device order.
  std::vector<box> boxes_of_process(std::size_t process) const;
};

// The layout of a T[S] laid out by Spec over M.
template <class M, class Spec, class S>
tensor_layout layout_of() {
  static_assert(sharding::check<M, Spec, S::rank>(S::dims).problem == sharding::spec_problem::none,
                "tessel::io: a PartitionSpec does not fit its tensor (an axis the mesh lacks, an axis named twice, "
                "more entries than dimensions, or a dimension its axes do not divide); shard_map's check names which");
  tensor_layout l;
  l.mesh.assign(M::sizes.begin(), M::sizes.end());
  l.process_axes = M::process_axes;
  l.dims.assign(S::dims.begin(), S::dims.end());
  l.cuts.resize(S::rank);
  for (std::size_t d = 0; d < Spec::rank; ++d)
    for (std::size_t i = 0; i < Spec::entries[d].count; ++i)
      l.cuts[d].push_back(static_cast<std::size_t>(M::index_of(Spec::entries[d].names[i])));
  return l;
}

namespace detail {

// How a spec that does not fit its tree is reported: shard_map's checks (one error naming the leaf, its
// type, the mesh, the rule broken and the fix), under this function's name.
template <fixed_string Function>
struct spec_names {
  static constexpr fixed_string function = Function;
  static constexpr fixed_string in = "Spec";
  static constexpr fixed_string out = "Spec";
  static constexpr bool struct_spec_trees = true;  // a struct takes one spec per member, as jit's in_shardings
};
template <fixed_string Function, class M, class Spec, class Tree>
consteval bool fits() {
  return shard_detail::check_arguments<spec_names<Function>, M, specs<Spec>, Tree>();
}

// Every leaf of a Tree with its layout under M and Spec (a PartitionSpec for every leaf, or a spec tree).
template <class M, class Spec, class Tree>
std::vector<tensor_layout> leaf_layouts() {
  using specs_t = shard_detail::leaf_specs_t<Spec, Tree>;
  using leaves_t = tree::leaf_types_t<Tree>;
  static_assert(std::tuple_size_v<specs_t> == std::tuple_size_v<leaves_t>);
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::vector<tensor_layout>{
        layout_of<M, std::tuple_element_t<I, specs_t>, typename std::tuple_element_t<I, leaves_t>::shape_type>()...};
  }(std::make_index_sequence<std::tuple_size_v<leaves_t>>{});
}

// Copies the part of `region` held by `from` (an array covering box `from_box`, row-major) into `to` (an
// array covering `to_box`); `region` lies inside both. `bytes`: the size of an element.
void copy_region(const std::byte* from, const box& from_box, std::byte* to, const box& to_box, const box& region,
                 std::size_t bytes);

// The overlap of two boxes of one tensor, or nullopt.
std::optional<box> overlap(const box& a, const box& b);

// "this process's place and count": process_transport's, checked against the mesh's.
std::size_t process_of_mesh(std::size_t mesh_processes, std::string_view who);

}  // namespace detail

// Where load() puts a tree and how it is laid out: slot<P<"data">>("params", params), or a spec tree.
template <class Spec, class Tree>
struct laid_out_slot {
  std::string_view name;
  Tree& tree;
};
template <class Spec, class Tree>
  requires(is_partition_spec_v<Spec> || shard_detail::is_spec_tree_v<Spec>)
laid_out_slot<Spec, Tree> slot(std::string_view name, Tree& tree) {
  return {name, tree};
}

// The parts of one checkpoint that this process writes (tensor_layout::pieces), copied when added.
class sharded_snapshot {
 public:
  explicit sharded_snapshot(std::uint64_t step = 0) : step_(step) {}

  // Copies the pieces of every leaf of `tree` that this process writes, the tree laid out by Spec (a
  // PartitionSpec for every leaf, or a spec tree) over M; the names are checkpoint.hpp's ("params.w1").
  // Throws std::invalid_argument if a name is taken, or if M spans another number of processes than the run.
  template <class M, class Spec, class Tree>
  sharded_snapshot& add(std::string_view name, const Tree& tree) {
    if constexpr (detail::fits<"tessel::io::sharded_snapshot::add", M, Spec, Tree>()) {
      const std::size_t process = detail::process_of_mesh(M::processes, "tessel::io::sharded_snapshot::add");
      const std::vector<tensor_layout> layouts = detail::leaf_layouts<M, Spec, Tree>();
      std::size_t leaf = 0;
      tree::for_each_named(
          tree,
          [&](const std::string& leaf_name, const auto& t) {
            using L = std::remove_cvref_t<decltype(t)>;
            add_leaf(leaf_name, std::string(safetensors_dtype_of<typename L::value_type>()), sizeof(typename L::value_type),
                     layouts[leaf++], reinterpret_cast<const std::byte*>(t.data()), process);
          },
          std::string(name));
    }
    return *this;
  }
  // A metadata entry (text); keys starting with "tessel." are reserved.
  sharded_snapshot& set(std::string key, std::string value);
  sharded_snapshot& set_key(random::key k);
  std::uint64_t step() const noexcept { return step_; }

  struct block {
    std::size_t tensor;
    box where;
    std::vector<std::byte> bytes;
  };
  struct tensor_entry {
    std::string name, dtype;
    std::size_t element_bytes;
    tensor_layout layout;
  };
  const std::vector<tensor_entry>& tensors() const noexcept { return tensors_; }
  const std::vector<block>& blocks() const noexcept { return blocks_; }
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

 private:
  void add_leaf(const std::string& name, std::string dtype, std::size_t element_bytes, const tensor_layout& layout,
                const std::byte* data, std::size_t process);

  std::uint64_t step_;
  std::vector<tensor_entry> tensors_;
  std::vector<block> blocks_;
  std::map<std::string, std::string> metadata_;
};

struct sharded_save_options {
  std::size_t keep = 3;  // committed checkpoints kept in the directory (the newest; at least 1)
  // The identity of the run (checkpoint_options::run's rules): recorded as "tessel.run"; `keep` then counts
  // only this run's checkpoints, and committed steps whose index is damaged are deleted; other runs' intact
  // checkpoints are never touched. Empty: the newest `keep` of any kind are kept.
  std::string run{};
};

// Saves `s` as step s.step() of `dir` (replacing a committed one of the same step); every process of the run
// calls it, with the snapshot of the same trees and layouts. Returns once the checkpoint is committed.
// Throws checkpoint_error naming the process that failed (and its error) in every process; the previous
// checkpoints are then untouched.
void save_sharded(const std::filesystem::path& dir, const sharded_snapshot& s, sharded_save_options options = {});

// A committed sharded checkpoint: its index, read and checked (not its blocks: load reads those it needs).
class sharded_checkpoint {
 public:
  struct stored_block {
    std::size_t file;  // into files
    box where;
    std::uint64_t offset = 0, hash = 0;
  };
  struct stored_tensor {
    std::string name, dtype;
    std::vector<std::uint64_t> dims;
    std::vector<stored_block> blocks;
  };
  struct stored_file {
    std::string name;
    std::uint64_t bytes = 0;
  };

  std::filesystem::path path;  // the step's directory
  std::uint64_t step = 0;
  std::size_t processes = 0;   // that wrote it
  std::map<std::string, std::string> metadata;
  std::vector<stored_file> files;
  std::vector<stored_tensor> tensors;
  std::vector<std::string> skipped;  // newer step directories that are not usable: "path: reason"

  bool has(std::string_view key) const { return metadata.contains(std::string(key)); }
  const std::string& get(std::string_view key) const;
  random::key key() const;
  // Bytes of blocks read from disk by load() and consolidate() so far.
  std::uint64_t bytes_read() const noexcept { return bytes_read_; }

  // Fills every slot's tree laid out by its Spec over M (M spans as many processes as the run): in each
  // leaf, the blocks this process's devices hold. Throws checkpoint_error listing every mismatch, or naming a
  // damaged block, and leaves the trees untouched.
  template <class M, class... Spec, class... Trees>
  void load(laid_out_slot<Spec, Trees>... slots) const {
    if constexpr ((detail::fits<"tessel::io::sharded_checkpoint::load", M, Spec, Trees>() && ...)) load_checked<M>(slots...);
  }
  // Fills whole tensors, in any process.
  template <class... Trees>
  void load(tree_slot<Trees>... slots) const {
    using whole = mesh<axis<"whole", 1>>;
    load<whole>(laid_out_slot<P<>, Trees>{slots.name, slots.tree}...);
  }

  // Writes the whole state as one tessel checkpoint file at `file` (read_checkpoint reads it; any safetensors
  // reader does). Reads every block.
  void consolidate(const std::filesystem::path& file) const;

 private:
  template <class M, class... Spec, class... Trees>
  void load_checked(laid_out_slot<Spec, Trees>... slots) const {
    const std::size_t process = detail::process_of_mesh(M::processes, "tessel::io::sharded_checkpoint::load");
    std::tuple<Trees...> staged{slots.tree...};
    std::vector<request> requests;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (collect<M, Spec>(std::get<I>(staged), slots.name, requests), ...);
    }(std::index_sequence_for<Trees...>{});
    fill(requests, process);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((slots.tree = std::move(std::get<I>(staged))), ...);
    }(std::index_sequence_for<Trees...>{});
  }
  struct request {
    std::string name, dtype;
    std::vector<std::uint64_t> dims;
    std::size_t element_bytes;
    tensor_layout layout;
    std::byte* data;
  };
  template <class M, class Spec, class Tree>
  void collect(Tree& tree, std::string_view name, std::vector<request>& out) const {
    const std::vector<tensor_layout> layouts = detail::leaf_layouts<M, Spec, Tree>();
    std::size_t leaf = 0;
    tree::for_each_named(
        tree,
        [&](const std::string& leaf_name, auto& t) {
          using L = std::remove_cvref_t<decltype(t)>;
          using T = typename L::value_type;
          out.push_back({leaf_name, std::string(safetensors_dtype_of<T>()), layouts[leaf].dims, sizeof(T), layouts[leaf],
                         reinterpret_cast<std::byte*>(t.data())});
          ++leaf;
        },
        std::string(name));
  }
  void fill(const std::vector<request>& requests, std::size_t process) const;
  std::vector<std::byte> read_block(const stored_tensor& t, const stored_block& b, std::size_t element_bytes) const;

  mutable std::uint64_t bytes_read_ = 0;
};

// Reads and checks the index of the step directory `dir` ("run/ckpt/step-000000000100"). Throws
// checkpoint_error naming the directory if it is not a committed sharded checkpoint or its index is damaged.
sharded_checkpoint read_sharded(const std::filesystem::path& dir);

// The committed step directories of `dir`, oldest first (by step; their indexes are not read).
std::vector<std::uint64_t> sharded_steps(const std::filesystem::path& dir);

// The newest committed checkpoint of `dir` whose index is intact (newer ones that are not are listed in
// `skipped`), or nullopt.
std::optional<sharded_checkpoint> latest_sharded(const std::filesystem::path& dir);

}  // namespace tessel::io

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/sharded_checkpoint-inl.hpp"
#endif
