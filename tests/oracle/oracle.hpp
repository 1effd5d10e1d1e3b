#pragma once
// The C++ side of the differential suite against JAX. A case is a name, a tessel function and its inputs;
// `check` runs the function through tessel's transforms and writes what it computed as .npy files, with
// one manifest line per case, for judge.py, which computes the same with JAX (the function of the same
// name in cases.py) and compares within the bounds stated there.
//
// What one case writes, into DIR/<case>/ (f32 functions of at least one f32 input get all four), and
// the StableHLO modules of the first three programs (value.mlir, vjp.mlir, jvp.mlir: tests/export):
//   value   jit(f)(inputs)
//   vjp     jit(vjp(f))(inputs) pulled back from a random cotangent: one file per f32 input
//   jvp     jit(jvp(f)) in random tangents of the f32 inputs (zeros for the others, as JAX's float0)
//   vmap    vmap(f, in_axes) over a batch of 3 for each argument and each of its batched axes (the other
//           arguments `none`), and every argument at axis 0
// Every primitive that a checked program holds is recorded, so that the suite can fail when a primitive
// of tessel::all_primitives has no oracle case (oracle_main.cpp).
#include <array>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "random_inputs.hpp"
#include "tessel/io/npy.hpp"
#include "tessel/jit.hpp"
#include "tessel/lax.hpp"
#include "tessel/dump.hpp"
#include "tessel/export.hpp"
#include "tessel/ops.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/transform/vmap.hpp"

namespace tessel::oracle {

struct suite {
  std::filesystem::path dir;
  std::ofstream manifest;
  std::set<std::string> primitives;  // names of every primitive a checked program holds
  std::set<std::string> exported;    // ... and an exported one (tests/export runs those modules under XLA)
  int cases = 0;
  explicit suite(std::filesystem::path d) : dir(std::move(d)) {
    std::filesystem::create_directories(dir);
    manifest.open(dir / "manifest.jsonl");
    if (!manifest) throw std::runtime_error("oracle: cannot write " + (dir / "manifest.jsonl").string());
  }
};

template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bf16";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "s32";
  else if constexpr (std::is_same_v<T, std::uint32_t>) return "u32";
  else return "pred";
}

// ---- inputs --------------------------------------------------------------------------------------

// Random inputs in [lo, hi] (tests/support/random_inputs.hpp).
template <class X>
X uniform(std::uint32_t seed, double lo = -2.0, double hi = 2.0) {
  return testing::random_tensor<typename X::value_type, typename X::shape_type>(seed, lo, hi);
}

// The edge values of f32 (and, rounded, of bf16): signed zeros, infinities, NaN, subnormals, the largest
// finite, the smallest normal, and a few ordinary values between them.
inline constexpr std::array<float, 16> edge_values{0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                                    std::numeric_limits<float>::quiet_NaN(), 1e-40f, -1e-40f, std::numeric_limits<float>::max(),
                                                    -std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), 1.0f, -1.0f,
                                                    0.5f, -2.5f, 3.0f, 100.0f};

// Element i is edge_values[(i / Every) % 16]: Every = 1 along a row, 16 down a column of a [16,16]
// tensor, so that two such operands meet every pair of edge values.
template <class X, std::size_t Every = 1>
X edges() {
  X t;
  for (std::size_t i = 0; i < X::shape_type::size; ++i) t[i] = typename X::value_type(edge_values[(i / Every) % edge_values.size()]);
  return t;
}

// ---- writing --------------------------------------------------------------------------------------

template <class X>
void save(const std::filesystem::path& p, const X& x) {
  io::write_npy(p, x);
}
template <class... X>
void save_tuple(const std::filesystem::path& dir, const std::string& stem, const std::tuple<X...>& xs) {
  [&]<std::size_t... K>(std::index_sequence<K...>) { (save(dir / (stem + std::to_string(K) + ".npy"), std::get<K>(xs)), ...); }(std::index_sequence_for<X...>{});
}

template <class T>
inline constexpr bool is_f32 = std::is_same_v<T, float>;

template <class F, class... X>
void record(suite& s) {
  using program = typename jitted<F>::template traced_for<X...>;
  for (const auto& n : program::program.nodes) s.primitives.insert(std::string(n.prim->name));
}

// Writes the StableHLO module of f on arguments x (a function, a shard_map or a jit with shardings) for
// tests/export/run_xla.py, and records the primitives of its program as exported.
template <class Program, class F, class... X>
void export_module(suite& s, const std::filesystem::path& path, const F& f, const X&... x) {
  for (const auto& n : Program::program.nodes) s.exported.insert(std::string(n.prim->name));
  std::ofstream(path) << export_stablehlo(f, x...);
}

// The B = 3 slices stacked along axis A of the batched rank.
template <std::size_t A, class T, class S>
auto stack3(const std::array<tensor<T, S>, 3>& parts) {
  using out_shape = insert_axis_t<S, static_cast<long>(A), 3>;
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < A; ++i) outer *= S::dims[i];
  for (std::size_t i = A; i < S::rank; ++i) inner *= S::dims[i];
  tensor<T, out_shape> out;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t b = 0; b < 3; ++b)
      for (std::size_t i = 0; i < inner; ++i) out[(o * 3 + b) * inner + i] = parts[b][o * inner + i];
  return out;
}

struct options {
  double lo = -2.0, hi = 2.0;      // the interval of the vmap batches' random inputs
  bool transforms = true;          // vjp, jvp and vmap besides the value
  bool jvp = true;                 // false where JAX has none (custom_vjp)
  bool every_axis = true;          // vmap over every axis of every argument; false: all at 0, and argument 0 last
};

// A fresh batch of 3 random slices stacked at axis A, or x itself for none.
template <long A, class X>
auto batch_or_keep(const X& x, std::uint32_t seed, const options& o) {
  if constexpr (A == none) {
    return x;
  } else {
    std::array<X, 3> parts{uniform<X>(seed, o.lo, o.hi), uniform<X>(seed + 1000, o.lo, o.hi), uniform<X>(seed + 2000, o.lo, o.hi)};
    return stack3<static_cast<std::size_t>(A)>(parts);
  }
}

namespace detail {
template <class F, std::size_t... K, class... X>
std::string write_vmaps(suite& s, const std::filesystem::path& d, const options& o, std::uint32_t seed, const std::tuple<X...>& xs,
                        std::index_sequence<K...>) {
  std::ostringstream axes;  // JSON list of in_axes lists (null for none)
  int j = 0;
  auto one = [&]<long... Axes>(in_axes_t<Axes...> ia) {
    (void)ia;
    const auto args = std::make_tuple(batch_or_keep<Axes>(std::get<K>(xs), seed + 17 * static_cast<std::uint32_t>(j) + K, o)...);
    const auto out = std::apply([&](const auto&... a) {
      using batched = decltype(vmap(F{}, in_axes<Axes...>));
      record<batched, std::remove_cvref_t<decltype(a)>...>(s);
      return batched{}(a...);
    }, args);
    const std::string stem = "vmap" + std::to_string(j);
    save_tuple(d, stem + "_in", args);
    save(d / (stem + "_out.npy"), out);
    axes << (j ? ", " : "") << "[";
    int k = 0;
    ((axes << (k++ ? ", " : "") << (Axes == none ? std::string("null") : std::to_string(Axes))), ...);
    axes << "]";
    ++j;
  };
  // Argument I batched at each axis of its batched rank, the others none.
  auto for_arg = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    using XI = std::tuple_element_t<I, std::tuple<X...>>;
    auto at = [&]<std::size_t A>(std::integral_constant<std::size_t, A>) { one(in_axes_t<(K == I ? static_cast<long>(A) : none)...>{}); };
    [&]<std::size_t... A>(std::index_sequence<A...>) {
      (at(std::integral_constant<std::size_t, A>{}), ...);
    }(std::make_index_sequence<XI::shape_type::rank + 1>{});
  };
  if (o.every_axis) {
    (for_arg(std::integral_constant<std::size_t, K>{}), ...);
    if constexpr (sizeof...(X) > 1) one(in_axes_t<(static_cast<long>(K) * 0)...>{});
  } else {  // fewer programs to compile (a campaign): every argument at 0, and argument 0 at its last axis
    one(in_axes_t<(static_cast<long>(K) * 0)...>{});
    constexpr long last = static_cast<long>(std::tuple_element_t<0, std::tuple<X...>>::shape_type::rank);
    if constexpr (last > 0) one(in_axes_t<(K == 0 ? last : none)...>{});
  }
  return axes.str();
}
}  // namespace detail

// Runs f on the inputs through jit, vjp, jvp and vmap and writes every result; `fn` names the JAX function
// in cases.py, `label` the variant ("sin", "sin@edge", "sin@bf16").
template <class F, class... X>
void check(suite& s, const std::string& fn, const std::string& label, F, const options& o, const X&... x) {
  static_assert(std::is_empty_v<F>, "an oracle case's function captures nothing (tracing rebuilds it from its type)");
  record<F, X...>(s);
  const std::filesystem::path d = s.dir / label;
  std::filesystem::create_directories(d);
  const auto inputs = std::make_tuple(x...);
  save_tuple(d, "in", inputs);
  const auto value = jit(F{})(x...);
  using Out = std::remove_cvref_t<decltype(value)>;
  save(d / "value.npy", value);
  export_module<typename jitted<F>::template traced_for<X...>>(s, d / "value.mlir", F{}, x...);
  std::ostringstream line;
  line << "{\"case\": \"" << label << "\", \"fn\": \"" << fn << "\", \"inputs\": [";
  int k = 0;
  ((line << (k++ ? ", " : "") << '"' << dtype_name<typename X::value_type>() << '"'), ...);
  line << "], \"output\": \"" << dtype_name<typename Out::value_type>() << "\"";
  constexpr bool differentiable = is_f32<typename Out::value_type> && (is_f32<typename X::value_type> || ...);
  if constexpr (differentiable) {
    if (o.transforms) {
      const std::uint32_t seed = static_cast<std::uint32_t>(std::hash<std::string>{}(label));
      const Out ct = uniform<Out>(seed);
      save(d / "ct.npy", ct);
      constexpr auto pull = [](auto c, auto... a) { return std::get<1>(vjp(F{}, a...))(c); };
      record<decltype(pull), Out, X...>(s);
      const auto cts = jit(pull)(ct, x...);
      save_tuple(d, "vjp", cts);
      export_module<typename jitted<decltype(pull)>::template traced_for<Out, X...>>(s, d / "vjp.mlir", pull, ct, x...);
      const auto tangents = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return std::make_tuple((is_f32<typename X::value_type> ? uniform<X>(seed + 1 + static_cast<std::uint32_t>(K)) : X{})...);
      }(std::index_sequence_for<X...>{});
      save_tuple(d, "tan", tangents);
      if (o.jvp) {
      constexpr auto push = [](auto... at) {  // primals, then their tangents
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
          constexpr std::size_t n = sizeof...(I);
          const auto all = std::make_tuple(at...);
          return std::get<1>(jvp(F{}, std::make_tuple(std::get<I>(all)...), std::make_tuple(std::get<I + n>(all)...)));
        }(std::make_index_sequence<sizeof...(at) / 2>{});
      };
      record<decltype(push), X..., X...>(s);
      const auto jv = std::apply([&](const auto&... t) { return jit(push)(x..., t...); }, tangents);
      save(d / "jvp.npy", jv);
      std::apply([&](const auto&... t) { export_module<typename jitted<decltype(push)>::template traced_for<X..., X...>>(s, d / "jvp.mlir", push, x..., t...); },
                 tangents);
      line << ", \"jvp\": true";
      }
      line << ", \"vjp\": true";
    }
  }
  if (o.transforms) {
    const std::uint32_t seed = static_cast<std::uint32_t>(std::hash<std::string>{}(label)) + 7;
    line << ", \"vmap\": [" << detail::write_vmaps<F>(s, d, o, seed, inputs, std::index_sequence_for<X...>{}) << "]";
  }
  line << "}\n";
  s.manifest << line.str();
  ++s.cases;
}

template <class F, class... X>
  requires(!std::is_convertible_v<F, std::string> && (!std::is_same_v<X, options> && ...))  // options come with a label
void check(suite& s, const std::string& fn, F f, const X&... x) {
  check(s, fn, fn, f, options{}, x...);
}

// A function that runs itself (a shard_map, a transform of one, a loop of optimizer steps): its value only,
// the transforms being cases of their own. The primitives of a shard_map's per-device program are recorded.
template <class G, class... X>
void check_call(suite& s, const std::string& fn, const std::string& label, G g, const X&... x) {
  if constexpr (requires { G::template traced_for<X...>::program.nodes; }) {
    for (const auto& n : G::template traced_for<X...>::program.nodes) s.primitives.insert(std::string(n.prim->name));
  }
  const std::filesystem::path d = s.dir / label;
  std::filesystem::create_directories(d);
  save_tuple(d, "in", std::make_tuple(x...));
  const auto value = g(x...);
  using Out = std::remove_cvref_t<decltype(value)>;
  std::ostringstream line;
  line << "{\"case\": \"" << label << "\", \"fn\": \"" << fn << "\", \"inputs\": [";
  int k = 0;
  ((line << (k++ ? ", " : "") << '"' << dtype_name<typename X::value_type>() << '"'), ...);
  if constexpr (is_tuple_v<Out>) {  // several results: value0.npy, value1.npy, ...
    save_tuple(d, "value", value);
    line << "], \"outputs\": [";
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((line << (I ? ", " : "") << '"' << dtype_name<typename std::tuple_element_t<I, Out>::value_type>() << '"'), ...);
    }(std::make_index_sequence<std::tuple_size_v<Out>>{});
    line << "]";
  } else {
    save(d / "value.npy", value);
    line << "], \"output\": \"" << dtype_name<typename Out::value_type>() << "\"";
  }
  if constexpr (dump_detail::Sharded<G>) {  // a shard_map or a jit with shardings: its collectives, for judge.py
    std::ofstream(d / "plan.txt") << dump(g, x...);
    export_module<typename G::template traced_for<X...>>(s, d / "value.mlir", g, x...);
    line << ", \"plan\": true";
  }
  line << "}\n";
  s.manifest << line.str();
  ++s.cases;
}

// A collective (it runs only inside a shard_map): the primitives with a rule for the mesh axes they vary along.
inline bool is_collective(const ir::primitive& p) { return p.varying != nullptr; }

// main of an oracle binary: `cases` writes into argv[1]; then every primitive of tessel::all_primitives that
// `wanted` selects (none for nullptr) must be in a checked program. Exit status 0, 1 for a primitive without a case, 2 for usage.
template <class Cases>
int run_suite(int argc, char** argv, bool (*wanted)(const ir::primitive&), Cases cases) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR  (writes DIR/manifest.jsonl and one folder per case)\n", argv[0]);
    return 2;
  }
  suite s(argv[1]);
  cases(s);
  s.manifest.close();
  int missing = 0, selected = 0;
  for (const ir::primitive* p : all_primitives) {
    if (wanted == nullptr || !wanted(*p)) continue;
    ++selected;
    const std::string name(p->name);
    if (s.primitives.contains(name)) continue;
    std::fprintf(stderr, "oracle: primitive %s is in no case of %s: add one (tests/oracle/*_cases.cpp and cases.py)\n", name.c_str(), argv[0]);
    ++missing;
  }
  int unexported = 0;
  for (const ir::primitive* p : all_primitives) {
    if (wanted == nullptr || !wanted(*p) || s.exported.contains(std::string(p->name))) continue;
    std::fprintf(stderr, "oracle: primitive %s is in no exported program of %s: add a case whose value, VJP or JVP holds it\n",
                 std::string(p->name).c_str(), argv[0]);
    ++unexported;
  }
  std::printf("oracle: %d cases covering %d of the %zu primitives this binary judges (of %zu in all), %d of them in exported programs, "
              "written to %s\n",
              s.cases, selected - missing, static_cast<std::size_t>(selected), all_primitives.size(), selected - unexported, argv[1]);
  return missing == 0 && unexported == 0 ? 0 : 1;
}

}  // namespace tessel::oracle
