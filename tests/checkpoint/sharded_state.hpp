#pragma once
// The state the sharded checkpoint tests save and restore: an MLP's parameters and Adam's state (count,
// moments), every element a function of the step, the tensor and its index, and the three layouts of the
// examples (data parallel, fully sharded, Megatron) over a mesh whose "data" axis has D devices.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/mesh.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/io/sharded_checkpoint.hpp"
#include "tessel/random/key.hpp"

namespace sharded_state {

using tessel::none;
using tessel::P;
using tessel::shape;
using tessel::specs;

template <template <class, class> class T = tessel::tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<64, 32>>, w1), (T<float, shape<32>>, b1),
                           (T<tessel::bfloat16, shape<32, 48>>, w2), (T<float, shape<48>>, b2));
};
using adam = std::tuple<tessel::tensor<std::int32_t, shape<>>, mlp<>, mlp<>>;  // count, mu, nu

enum class layout { data_parallel, fully_sharded, megatron };
inline constexpr layout layouts[] = {layout::data_parallel, layout::fully_sharded, layout::megatron};
inline const char* name_of(layout l) {
  return l == layout::data_parallel ? "dp" : l == layout::fully_sharded ? "fsdp" : "megatron";
}

// The mesh and the specs of params and of the optimizer state for a layout with D devices along "data".
template <layout L, std::size_t D, class Placement>
struct cell {
  using mesh = std::conditional_t<L == layout::megatron,
                                  tessel::mesh<tessel::axis<"data", D, Placement>, tessel::axis<"model", 2>>,
                                  tessel::mesh<tessel::axis<"data", D, Placement>>>;
  using megatron_specs = specs<P<none, "model">, P<"model">, P<"model">, P<>>;
  using params_spec = std::conditional_t<L == layout::data_parallel, P<>,
                                         std::conditional_t<L == layout::fully_sharded, P<"data">, megatron_specs>>;
  using state_spec = specs<P<>, params_spec, params_spec>;
};

// Distinct, finite values: a hash of (step, tensor, index) scaled into [-8, 8).
inline std::uint64_t mix(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}
inline std::uint64_t name_hash(const std::string& name) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}
template <class T>
T value_of(std::uint64_t step, const std::string& name, std::size_t i) {
  const std::uint64_t h = mix(step * 0x9e3779b97f4a7c15ULL ^ name_hash(name) ^ mix(i + 1));
  if constexpr (std::is_same_v<T, std::int32_t>) return static_cast<std::int32_t>(h & 0x7fffffff);
  else return T(static_cast<float>(h % 65536) / 4096.0f - 8.0f);
}

template <class Tree>
void fill(Tree& tree, const std::string& prefix, std::uint64_t step) {
  tessel::tree::for_each_named(
      tree,
      [&](const std::string& name, auto& t) {
        using V = typename std::remove_cvref_t<decltype(t)>::value_type;
        for (std::size_t i = 0; i < std::remove_cvref_t<decltype(t)>::shape_type::size; ++i) t[i] = value_of<V>(step, name, i);
      },
      prefix);
}

inline mlp<> params_at(std::uint64_t step) {
  mlp<> p;
  fill(p, "params", step);
  return p;
}
inline adam state_at(std::uint64_t step) {
  adam s;
  fill(s, "opt_state", step);
  return s;
}
inline tessel::random::key key_at(std::uint64_t step) {
  return tessel::random::key(static_cast<std::uint32_t>(step), 0x5eed);
}

// What a tree holds before a restore: the values of a step no test saves.
inline constexpr std::uint64_t untouched = 999'999;

// Compares `tree` (restored by `process` under Spec over M) with the state of `step`: every element inside
// the blocks that process's devices hold equal bit for bit, every other element still `untouched`'s.
// Returns the first difference ("params.w1[37]: ..."), or an empty string.
template <class M, class Spec, class Tree>
std::string compare(const Tree& tree, const std::string& prefix, std::uint64_t step, std::size_t process) {
  const std::vector<tessel::io::tensor_layout> layouts = tessel::io::detail::leaf_layouts<M, Spec, Tree>();
  std::string problem;
  std::size_t leaf = 0;
  tessel::tree::for_each_named(
      tree,
      [&](const std::string& name, const auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        using V = typename X::value_type;
        const tessel::io::tensor_layout& l = layouts[leaf++];
        const auto boxes = l.boxes_of_process(l.processes() == 1 ? 0 : process);
        for (std::size_t i = 0; i < X::shape_type::size && problem.empty(); ++i) {
          bool inside = false;
          for (const auto& b : boxes) {
            bool in = true;
            std::size_t rest = i;
            for (std::size_t d = X::shape_type::rank; d-- > 0;) {
              const std::size_t c = rest % X::shape_type::dims[d];
              rest /= X::shape_type::dims[d];
              in = in && c >= b.start[d] && c < b.start[d] + b.extent[d];
            }
            inside = inside || in;
          }
          const V want = value_of<V>(inside ? step : untouched, name, i);
          if (std::memcmp(&t[i], &want, sizeof(V)) != 0)
            problem = name + "[" + std::to_string(i) + "]: " + (inside ? "restored" : "outside this process's blocks, changed") +
                      " (step " + std::to_string(step) + ")";
        }
      },
      prefix);
  return problem;
}

}  // namespace sharded_state
