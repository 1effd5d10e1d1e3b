#pragma once
// shard_map (JAX's jax.shard_map): f runs on every device of a mesh, each on its block of the arguments,
// with explicit collectives between them; results are put together as the out_specs say.
//
//   using M = tessel::mesh<tessel::axis<"data", 4>>;
//   auto total = tessel::shard_map<M, tessel::specs<tessel::P<"data">>, tessel::P<>>(
//       [](auto x) { return tessel::psum<"data">(tessel::reduce_sum<0>(x)); });
//   tensor<float, shape<>> s = total(x);   // x: f32[16]; each device sums 4 elements, psum adds the 4 sums
//
// in_specs: one PartitionSpec per argument: its dimensions are split over the named mesh axes and every
// device gets its block; an argument is the same on every device along the axes its spec does not name.
// For a std::tuple argument the entry may be a tree of specs, one per element (specs<P<>, P<"data">, ...>:
// an optimizer state whose step count is whole and whose moments are split).
// out_specs: one per returned tuple element (or one for all; a tuple's entry may be a spec tree): blocks are
// concatenated along the named axes;
// along the others the result must be the same on every device, which tracing proves (a compile error
// otherwise, transform/shard_map.hpp). A spec given for a tree (a parameter struct, a tuple, an array)
// holds for every leaf (JAX's prefix specs): f sees the tree of blocks, and a struct split on the way in
// comes back as the same struct of global arrays; scalars pass whole (P<>).
//
//   auto step = shard_map<M, specs<P<"data">, P<"data">>, specs<P<"data">, P<"data">>>(update);   // params, state: net<>
//
// f is traced and planned once per list of argument types, at the block shapes. Each device runs the plan on
// its own thread with its own arena (run/mesh.hpp); a block that is one contiguous piece of an argument or
// a result is read or written in place, others are copied. Collectives add in a fixed order, so a call
// repeated gives bit-identical results.
//
// grad, value_and_grad and vmap of a shard_map are shard_maps (of f's gradient, or of f vmapped, with the
// batch axes unsplit): see their overloads below.
//
// Over a mesh whose leading axes span processes (mpirun, distributed.hpp) every process calls it with the
// same arguments and runs its own devices; each gets the whole result (blocks held by other processes
// are sent to it), bit-identical to a run of the same mesh in one process.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/jit.hpp"
#include "tessel/kernels/collective.hpp"
#include "tessel/prim/reshape.hpp"
#include "tessel/prim/family/layout.hpp"
#include "tessel/run/mesh.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/transform/partition.hpp"
#include "tessel/transform/shard_map.hpp"
#include "tessel/transform/update_sharding.hpp"
#include "tessel/transform/vmap.hpp"
#include "tessel/core/fingerprint.hpp"
#include "tessel/ir/program.hpp"

namespace tessel {
namespace shard_detail {

// The global type of a result made of blocks laid out by Spec: a tensor's dimensions multiplied, a tree's
// leaves each so. A struct of blocks comes back as the struct over tensors when its leaves are those
// global arrays (a parameter struct split on the way in and put together on the way out, or whole).
template <class M, class Spec, class X>
struct global_result {
  using blocks = tree::rebind_t<X, global_family<M, Spec, tensor>::template type>;
  using type = std::conditional_t<std::is_same_v<tree::leaf_types_t<blocks>, tree::leaf_types_t<tree::over_family_t<X, tensor>>>,
                                  tree::over_family_t<X, tensor>, blocks>;
};
template <class M, class Spec, class T, class S>
struct global_result<M, Spec, tensor<T, S>> {
  using type = tensor<T, sharding::global_shape_t<M, Spec, S>>;
};
template <class M, class Spec, class... X>
  requires is_partition_spec_v<Spec>
struct global_result<M, Spec, std::tuple<X...>> {  // each element alike (a struct in a tuple comes back as the struct)
  using type = std::tuple<typename global_result<M, Spec, X>::type...>;
};
template <class M, class... Spec, class... X>
  requires(sizeof...(Spec) == sizeof...(X))
struct global_result<M, specs<Spec...>, std::tuple<X...>> {
  using type = std::tuple<typename global_result<M, Spec, X>::type...>;
};
template <class M, class OutSpecs, class R>
struct global_results {
  using type = typename global_result<M, spec_at_t<0, OutSpecs>, R>::type;
};
template <class M, class OutSpecs, class... X>
  requires(spec_count<OutSpecs>::value > 1)
struct global_results<M, OutSpecs, std::tuple<X...>> {
  using type = decltype([]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple<typename global_result<M, spec_at_t<I, OutSpecs>, X>::type...>{};
  }(std::index_sequence_for<X...>{}));
};

// Is the block of a row-major S that one device holds (shape L) one contiguous piece?
template <class S, class L>
constexpr bool contiguous_block() {
  std::size_t i = 0;
  while (i < S::rank && L::dims[i] == S::dims[i]) ++i;
  if (i == S::rank) return true;
  for (std::size_t j = 0; j < i; ++j)
    if (S::dims[j] != 1) return false;
  for (std::size_t j = i + 1; j < S::rank; ++j)
    if (L::dims[j] != S::dims[j]) return false;
  return true;
}

// Where device `device`'s block starts in the global array, per dimension.
template <class M, class Spec, class L>
constexpr std::array<std::ptrdiff_t, ir::max_rank> block_start(std::size_t device) {
  std::array<std::ptrdiff_t, ir::max_rank> start{};
  for (std::size_t d = 0; d < L::rank; ++d) start[d] = static_cast<std::ptrdiff_t>(sharding::block_index<M, Spec>(device, d) * L::dims[d]);
  return start;
}
template <class S>
constexpr std::size_t offset_of(const std::array<std::ptrdiff_t, ir::max_rank>& start) {
  std::size_t at = 0;
  for (std::size_t d = 0; d < S::rank; ++d) at += static_cast<std::size_t>(start[d]) * S::strides[d];
  return at;
}

// Does `device` hold the block a result takes here? Along every axis the spec does not name the result is
// the same on every device: it is taken from coordinate 0, or, along an axis over processes, from this
// process's own coordinate (`here`: one of this process's devices), so that every process has it.
template <class M>
constexpr bool represents_along(std::size_t device, std::size_t here, std::uint8_t named) {
  const auto c = M::coordinates(device), mine = M::coordinates(here);
  for (std::size_t a = 0; a < M::rank; ++a)
    if (!(named & (1u << a)) && c[a] != (a < M::process_axes ? mine[a] : 0)) return false;
  return true;
}
template <class M, class Spec>
constexpr bool represents(std::size_t device, std::size_t here) {
  return represents_along<M>(device, here, sharding::axes_mask<M, Spec>());
}

template <class M>
constexpr update_sharding::setting setting_of() {
  update_sharding::setting s;
  for (std::size_t a = 0; a < M::rank; ++a) {
    s.sizes[a] = M::sizes[a];
    if (a >= M::process_axes) s.local_axes = static_cast<std::uint8_t>(s.local_axes | (1u << a));
  }
  return s;
}

// Each result leaf's named mesh axes (its out_spec's), in tree order.
template <class M, class OutSpecs, class R>
constexpr auto out_axes() {
  return []<class... Sp>(std::type_identity<std::tuple<Sp...>>) {
    return std::array<std::uint8_t, sizeof...(Sp)>{sharding::axes_mask<M, Sp>()...};
  }(std::type_identity<out_leaf_specs_t<OutSpecs, R>>{});
}
template <class T, class M, class OutSpecs>
consteval update_sharding::blocking<T::program.size> blocking_of() {
  if constexpr (!T::ok) return {};
  else return update_sharding::analyze(T::program, out_axes<M, OutSpecs, typename T::raw_result>(), setting_of<M>());
}

// The per-device program that runs: the traced body T, with its replicated updates computed in blocks
// where they can be (transform/update_sharding.hpp). split[o]: the axes along which result leaf o is
// computed in blocks along dimension 0, which the devices write in place (0: as its out_spec says).
// `traced`: the body as written (its plan is what a device of a mesh holds, each replicated result whole).
template <class T, class M, class OutSpecs, bool = blocking_of<T, M, OutSpecs>().any()>
struct runs : T {
  using traced = T;
  static constexpr std::array<std::uint8_t, T::outputs + 1> split{};
};
template <class T, class M, class OutSpecs>
struct runs<T, M, OutSpecs, true> : T {
  using traced = T;
  static constexpr auto blocks = blocking_of<T, M, OutSpecs>();
  static constexpr std::size_t nodes = T::program.size + blocks.added;
  static constexpr ir::program<nodes, T::outputs> program = update_sharding::rewrite<nodes, T::outputs>(T::program, blocks, setting_of<M>());
  static constexpr plan::plan<nodes, T::outputs> plan = plan::make_plan(program);
  static constexpr auto split = [] {
    constexpr auto named = out_axes<M, OutSpecs, typename T::raw_result>();
    std::array<std::uint8_t, T::outputs + 1> s{};
    for (std::size_t o = 0; o < T::outputs; ++o)
      s[o] = static_cast<std::uint8_t>(program.nodes[static_cast<std::size_t>(program.outputs[o])].varying & ~named[o]);
    return s;
  }();
};

// The devices of M this process runs: all of them, or its share when M's leading axes span processes.
template <class M>
struct local_range {
  std::size_t first = 0, count = M::devices;
};
template <class M>
local_range<M> this_process() {
  if constexpr (M::processes == 1) {
    return {};
  } else {
    const kernels::process_transport& t = kernels::processes();
    if (t.count != M::processes || t.all_gather == nullptr) {
      message_builder m;
      m << "tessel::shard_map: the ";
      M::append(m) << " spans " << static_cast<std::uint64_t>(M::processes) << " processes (its axes over processes), but this run has "
                   << static_cast<std::uint64_t>(t.all_gather == nullptr ? 1 : t.count) << (t.all_gather == nullptr ? " (tessel::distributed::init was not called)" : "")
                   << "; fix: start it with mpirun -np " << static_cast<std::uint64_t>(M::processes)
                   << " and call tessel::distributed::init() first, or change the mesh";
      throw std::runtime_error(std::string(m.view()));
    }
    return {t.index * M::local_devices, M::local_devices};
  }
}

// A device's copy of a block, or a result block no result takes: a tensor's storage (large ones come back
// from the block cache on the next call, core/tensor.hpp).
struct aligned_buffer {
  struct release {
    void operator()(unsigned char* p) const noexcept { detail::free_block(p); }
  };
  std::unique_ptr<unsigned char, release> data;
  explicit aligned_buffer(std::size_t bytes) : data(static_cast<unsigned char*>(detail::allocate_block(bytes ? bytes : 1))) {}
};

template <std::size_t D, std::size_t Params, std::size_t Outputs>
struct device_job {
  const plan::plan_view* view = nullptr;
  std::array<std::array<const void*, Params + 1>, D> parameters{};
  std::array<std::array<void*, Outputs + 1>, D> outputs{};
  std::vector<aligned_buffer> scratch;
  struct copy_back {
    void (*copy)(const void* block, void* global, std::size_t device) = nullptr;
    const void* block = nullptr;
    void* global = nullptr;
    std::size_t device = 0;
  };
  std::vector<copy_back> copies;
  // Result leaves with blocks on other processes (split over an axis that spans processes).
  struct exchange {
    void (*gather)(std::uint64_t program, void* global, std::size_t first_local) = nullptr;
    void* global = nullptr;
  };
  std::vector<exchange> exchanges;
  // Argument leaves passed through donate() that every device reads whole: the ones a result may take.
  std::array<bool, Params> donated{};
  std::size_t first_local = 0, local_count = D;
  std::uint64_t program = 0;  // program_fingerprint

  static void run_device(void* job, std::size_t device) {
    auto& j = *static_cast<device_job*>(job);
    run::execute(*j.view, j.parameters[device].data(), j.outputs[device].data());
  }
};

// A type's name as this compiler writes it.
template <class T>
constexpr std::string_view type_text() {
  return __PRETTY_FUNCTION__;
}

// What the processes of a run must agree on before they exchange data (the process transport compares it
// at every exchange, kernels/collective.hpp): the per-device program, the mesh (its axes, their sizes and
// which span processes), the layouts of the arguments and results, and the build and kernel choices of
// each process (kernels::add_build). Two processes started from different programs, flags or settings
// refuse to run together instead of exchanging bytes that happen to be as many.
template <class M, class InSpecs, class OutSpecs, class Program>
std::uint64_t program_fingerprint(const Program& program) {
  static const std::uint64_t of_program = [&] {
    fingerprint f;
    ir::add_program(f, ir::view_of(program));
    f.add(type_text<M>());
    f.add(type_text<InSpecs>());
    f.add(type_text<OutSpecs>());
    return f.value;
  }();
  fingerprint f{of_program};
  kernels::add_build(f);  // each call: the kernel choices may change between calls
  return f.value;
}

// Copies a block between a device's buffer (dense, shape L) and its place in a global S.
template <class M, class Spec, class T, class S, class L>
void copy_block(const void* from, void* to, std::size_t device, bool to_global) {
  const auto start = block_start<M, Spec, L>(device);
  prim::box_side local = prim::dense_side(ir::dims_of<L>()), global = prim::dense_side(ir::dims_of<S>());
  global.start = start;
  std::array<std::size_t, ir::max_rank> extent{};
  for (std::size_t d = 0; d < L::rank; ++d) extent[d] = L::dims[d];
  if (to_global) prim::copy_box(ir::code_of<T>(), extent, L::rank, local, from, global, to);
  else prim::copy_box(ir::code_of<T>(), extent, L::rank, global, from, local, to);
}

// Completes a result leaf split over an axis that spans processes: every process sends its devices' blocks
// to every other, and takes from them the blocks its own devices do not hold.
template <class M, class Spec, class T, class S, class L>
void gather_blocks(std::uint64_t program, void* global, std::size_t first_local) {
  constexpr std::size_t block = L::size * sizeof(T), per_process = M::local_devices * block;
  std::vector<unsigned char> sent(per_process), received(M::processes * per_process);
  for (std::size_t l = 0; l < M::local_devices; ++l) copy_block<M, Spec, T, S, L>(global, sent.data() + l * block, first_local + l, false);
  kernels::processes().all_gather(program, sent.data(), per_process, received.data());
  for (std::size_t d = 0; d < M::devices; ++d)
    if (d - first_local >= M::local_devices && represents<M, Spec>(d, first_local))
      copy_block<M, Spec, T, S, L>(received.data() + d * block, global, d, true);
}

}  // namespace shard_detail

namespace shard_detail {
// What a shard_map call that failed its checks returns: its compile error has said why, and the caller's
// next uses of the result (an element, its data, a conversion, printing it, a structured binding of its N
// results) compile, so that the error comes alone.
template <std::size_t N = 1>
struct not_run {
  constexpr float operator[](std::size_t) const { return 0; }
  constexpr const float* data() const { return nullptr; }
  template <class T>
  constexpr operator T() const {
    return T{};
  }
  template <std::size_t I>
  constexpr not_run<1> get() const {
    return {};
  }
  template <class C, class Traits>
  friend std::basic_ostream<C, Traits>& operator<<(std::basic_ostream<C, Traits>& os, const not_run&) {
    return os;
  }
};
template <class T>
inline constexpr bool is_not_run = false;
template <std::size_t N>
inline constexpr bool is_not_run<not_run<N>> = true;
// How many results a local result type holds (a tuple's elements, else one).
template <class R>
inline constexpr std::size_t result_count = 1;
template <class... R>
inline constexpr std::size_t result_count<std::tuple<R...>> = sizeof...(R);
}  // namespace shard_detail
}  // namespace tessel

template <std::size_t N>
struct std::tuple_size<tessel::shard_detail::not_run<N>> : std::integral_constant<std::size_t, N> {};
template <std::size_t I, std::size_t N>
struct std::tuple_element<I, tessel::shard_detail::not_run<N>> {
  using type = tessel::shard_detail::not_run<1>;
};

namespace tessel {

template <class M, class InSpecs, class OutSpecs, class F>
class sharded {
  static_assert(is_mesh_v<M>, "tessel::shard_map: the first template argument is the mesh type, tessel::mesh<tessel::axis<\"name\", size>, ...>");

 public:
  // The specs as lists (what export_stablehlo reads besides the program).
  using in_specs = typename shard_detail::spec_list<InSpecs>::type;
  using out_specs = typename shard_detail::spec_list<OutSpecs>::type;

  // The per-device program and plan for local argument types A (declared only; public because traced_for
  // names it, and clang checks access where an alias template is used, not where it is declared).
  template <class... A, std::size_t... I>
  static auto planned_for(std::index_sequence<I...>)
      -> detail::planned_in<shard_detail::context<M, in_specs, A...>, F,
                            typename shard_detail::local_arg<M, shard_detail::spec_at_t<I, in_specs>, A>::type...>;

  // Runs f on every device of M and returns the results put together by out_specs. An argument passed
  // through donate() (as to jit) gives its buffers to the results that can be written over them, where
  // this process runs one device of M (a second device would still read what the first overwrites).
  template <class... A>
  auto operator()(A&&... args) const {
    return call(std::index_sequence_for<A...>{}, std::forward_as_tuple(args...), detail::undonated(args)...);
  }

  // The per-device program and plan that run for these (global) argument types.
  template <class... A>
  using traced_for = shard_detail::runs<decltype(planned_for<std::remove_cvref_t<decltype(detail::normalize_scalar(std::declval<const A&>()))>...>(
                                            std::index_sequence_for<A...>{})),
                                        M, out_specs>;

 private:
  // A broken call has had its one message (each check raises it): nothing more is compiled for it.
  template <std::size_t... I, class Given, class... A>
  auto call(std::index_sequence<I...> seq, const Given& given, const A&... args) const {
    if constexpr (!shard_detail::check_arguments<shard_detail::api_names<F>, M, in_specs, A...>()) {
      return shard_detail::not_run{};
    } else {
      using t = decltype(planned_for<A...>(seq));
      using local_result = typename t::raw_result;
      if constexpr (!t::ok) {
        return shard_detail::not_run{};  // the trace has reported why
      } else if constexpr (!shard_detail::check_out_specs<M, out_specs, local_result>()) {
        return shard_detail::not_run<shard_detail::result_count<local_result>>{};
      } else if constexpr (!check_replication<t, local_result>()) {
        return shard_detail::not_run<shard_detail::result_count<local_result>>{};
      } else {
        return run(seq, given, args...);
      }
    }
  }

  template <std::size_t... I, class Given, class... A>
  auto run(std::index_sequence<I...> seq, const Given& given, const A&... args) const {
    using t = shard_detail::runs<decltype(planned_for<A...>(seq)), M, out_specs>;
    using result_type = typename shard_detail::global_results<M, out_specs, typename t::result>::type;
    constexpr std::size_t D = M::devices;
    constexpr std::size_t params = t::program.parameter_count;
    const plan::plan_view& view = plan::static_view<t::plan>();

    shard_detail::device_job<D, params, t::outputs> job;
    job.view = &view;
    job.program = shard_detail::program_fingerprint<M, in_specs, out_specs>(t::program);
    const auto here = shard_detail::this_process<M>();
    job.first_local = here.first;
    job.local_count = here.count;
    std::size_t leaf = 0;
    (place_argument<shard_detail::spec_at_t<I, in_specs>, detail::is_donated_v<std::remove_cvref_t<std::tuple_element_t<I, Given>>>>(
         args, leaf, job),
     ...);
    place_argument_blocks<t::program>(leaf, job);

    auto result = [&] {
      constexpr bool donating = (detail::is_donated_v<std::remove_cvref_t<std::tuple_element_t<I, Given>>> || ...);
      if constexpr (!donating || M::devices / M::processes != 1) {
        return tree::build<result_type>([](auto l) { return typename decltype(l)::type(uninitialized); });
      } else {
        // jit's pairing on the device's plan; a result split over an axis has another global type than
        // any whole argument, and takes none.
        const auto donor = detail::pair_donations<t>(job.donated);
        std::size_t o = 0;
        return tree::build<result_type>([&](auto l) {
          using L = typename decltype(l)::type;
          const std::size_t out = o++;
          const ir::node& local = t::program.nodes[static_cast<std::size_t>(t::program.outputs[out])];
          const bool whole = t::split[out] == 0 && local.shape.size() == L::shape_type::size;
          return donor[out] >= 0 && whole ? std::apply([&](auto&... a) { return detail::take_donated_leaf<L>(donor[out], a...); }, given)
                                          : L(uninitialized);
        });
      }
    }();
    place_results(result, t::split.data(), job);
    run::on_devices(M::sizes.data(), M::rank, M::process_axes, job.program, &decltype(job)::run_device, &job);
    for (const auto& c : job.copies) c.copy(c.block, c.global, c.device);
    for (const auto& e : job.exchanges) e.gather(job.program, e.global, job.first_local);
    return result;
  }

  template <class T, class R>
  static consteval bool check_replication() {
    return []<std::size_t... L>(std::index_sequence<L...>) {
      return (shard_detail::check_replication<M, out_specs, L, shard_detail::out_spec_of_leaf_v<out_specs, R>[L],
                                               std::tuple_element_t<L, shard_detail::out_leaf_specs_t<out_specs, R>>, T::summary.varying[L]>() &&
              ...);
    }(std::make_index_sequence<T::outputs>{});
  }

  // Every device's pointer to each leaf of an argument: the argument itself where it is not split, else the
  // device's block (in place when contiguous, else a copy). A donated leaf read whole may be written over.
  template <class Spec, bool Donated, class A, class Job>
  static void place_argument(const A& a, std::size_t& leaf, Job& job) {
    if constexpr (shard_detail::is_spec_tree_v<Spec>) {
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        (place_argument<shard_detail::spec_at_t<J, Spec>, Donated>(std::get<J>(a), leaf, job), ...);
      }(std::make_index_sequence<std::tuple_size_v<A>>{});
    } else if constexpr (DType<A>) {
      for (std::size_t d = job.first_local; d < job.first_local + job.local_count; ++d) job.parameters[d][leaf] = &a;
      ++leaf;
    } else if constexpr (!is_tensor_v<A>) {
      tree::for_each(a, [&](const auto& part) { place_argument<Spec, Donated>(part, leaf, job); });
    } else {
      using T = typename A::value_type;
      using S = typename A::shape_type;
      using L = sharding::local_shape_t<M, Spec, S>;
      job.donated[leaf] = Donated && std::is_same_v<L, S>;
      for (std::size_t d = job.first_local; d < job.first_local + job.local_count; ++d) {
        if constexpr (std::is_same_v<L, S>) {
          job.parameters[d][leaf] = a.data();
        } else if constexpr (shard_detail::contiguous_block<S, L>()) {
          job.parameters[d][leaf] = a.data() + shard_detail::offset_of<S>(shard_detail::block_start<M, Spec, L>(d));
        } else {
          job.scratch.emplace_back(L::size * sizeof(T));
          shard_detail::copy_block<M, Spec, T, S, L>(a.data(), job.scratch.back().data.get(), d, false);
          job.parameters[d][leaf] = job.scratch.back().data.get();
        }
      }
      ++leaf;
    }
  }

  // The parameters a program with sharded updates adds (transform/update_sharding.hpp): each device's block,
  // along dimension 0, of an argument leaf every device holds whole.
  template <const auto& Program, class Job>
  static void place_argument_blocks(std::size_t leaves, Job& job) {
    for (const ir::node& n : Program.nodes) {
      const int source = update_sharding::source_leaf(n);
      if (n.prim != &prim::parameter_p || source < 0) continue;
      const std::size_t bytes = n.shape.size() * ir::bytes_of(n.dtype), k = static_cast<std::size_t>(n.attr.ints[0]);
      if (k < leaves) continue;
      job.donated[static_cast<std::size_t>(source)] = false;  // its blocks are read through another parameter
      for (std::size_t d = job.first_local; d < job.first_local + job.local_count; ++d)
        job.parameters[d][k] = static_cast<const unsigned char*>(job.parameters[d][static_cast<std::size_t>(source)]) +
                               M::block_along(d, n.varying) * bytes;
    }
  }

  // Every device's pointer to each result leaf: the result itself (or its block, when contiguous) for the
  // devices whose block the result takes, scratch for the others. A leaf computed in blocks (split[leaf]: the
  // axes) is written in place by the devices that represent it along the other axes.
  template <class Result, class Job>
  static void place_results(Result& result, const std::uint8_t* split, Job& job) {
    std::size_t leaf = 0;
    if constexpr (shard_detail::spec_count<out_specs>::value == 1) {
      place_leaves<shard_detail::spec_at_t<0, out_specs>>(result, leaf, split, job);
    } else {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (place_leaves<shard_detail::spec_at_t<I, out_specs>>(std::get<I>(result), leaf, split, job), ...);
      }(std::make_index_sequence<std::tuple_size_v<Result>>{});
    }
  }

  template <class Spec, class X, class Job>
  static void place_leaves(X& x, std::size_t& leaf, const std::uint8_t* split, Job& job) {
    if constexpr (shard_detail::is_spec_tree_v<Spec>) {
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        (place_leaves<shard_detail::spec_at_t<J, Spec>>(std::get<J>(x), leaf, split, job), ...);
      }(std::make_index_sequence<std::tuple_size_v<X>>{});
    } else if constexpr (!is_tensor_v<X>) {
      tree::for_each(x, [&](auto& part) { place_leaves<Spec>(part, leaf, split, job); });
    } else {
      using T = typename X::value_type;
      using S = typename X::shape_type;
      using L = sharding::local_shape_t<M, Spec, S>;
      if (const std::uint8_t axes = split[leaf]; axes != 0) {  // whole (L is S), each device its block
        const std::size_t block = S::size / group_size(M::sizes, axes);
        for (std::size_t d = job.first_local; d < job.first_local + job.local_count; ++d) {
          if (shard_detail::represents_along<M>(d, job.first_local, axes)) {
            job.outputs[d][leaf] = x.data() + M::block_along(d, axes) * block;
          } else {
            job.scratch.emplace_back(block * sizeof(T));
            job.outputs[d][leaf] = job.scratch.back().data.get();
          }
        }
        ++leaf;
        return;
      }
      for (std::size_t d = job.first_local; d < job.first_local + job.local_count; ++d) {
        const bool mine = shard_detail::represents<M, Spec>(d, job.first_local);
        if (mine && shard_detail::contiguous_block<S, L>()) {
          job.outputs[d][leaf] = x.data() + shard_detail::offset_of<S>(shard_detail::block_start<M, Spec, L>(d));
          continue;
        }
        job.scratch.emplace_back(L::size * sizeof(T));
        job.outputs[d][leaf] = job.scratch.back().data.get();
        if (mine)
          job.copies.push_back({[](const void* block, void* global, std::size_t device) {
                                  shard_detail::copy_block<M, Spec, T, S, L>(block, global, device, true);
                                },
                                job.scratch.back().data.get(), x.data(), d});
      }
      constexpr std::uint8_t over_processes = static_cast<std::uint8_t>((1u << M::process_axes) - 1);
      if constexpr ((sharding::axes_mask<M, Spec>() & over_processes) != 0)
        job.exchanges.push_back({&shard_detail::gather_blocks<M, Spec, T, S, L>, x.data()});
      ++leaf;
    }
  }
};

// JAX's shard_map(f, mesh=M, in_specs=..., out_specs=...): in_specs one P per argument (specs<...>, or a
// single P for a single argument), out_specs one P per returned tuple element or one for all.
template <class M, class InSpecs, class OutSpecs, class F>
constexpr sharded<M, InSpecs, OutSpecs, F> shard_map(F) {
  return {};
}

// jit(shard_map(...)) is the shard_map: it is traced and planned once per argument types already.
template <class M, class InSpecs, class OutSpecs, class F>
constexpr sharded<M, InSpecs, OutSpecs, F> jit(sharded<M, InSpecs, OutSpecs, F> f) {
  return f;
}

// jit with shardings (JAX's jit(f, in_shardings=..., out_shardings=...)): f is written over global arrays
// and the compiler decides where the collectives go (transform/partitioner.hpp has the rules). The arguments
// are laid out as in_shardings say and the results as out_shardings say; each device runs f's program on
// its blocks, and the call returns the global results, as shard_map does (it is one, with f partitioned).
//
//   using M = mesh<axis<"model", 2>>;   // Megatron's MLP: one all-reduce forward, none written
//   auto mlp = jit<M>([](auto x, auto w1, auto w2) { return matmul(relu(matmul(x, w1)), w2); },
//                     in_shardings<P<>, P<none, "model">, P<"model">>, out_shardings<P<>>);
//
// Arguments and results may be trees: one PartitionSpec for every leaf, or a spec tree: one entry per element
// of a tuple (in_shardings<P<>, specs<P<>, P<"data">>>: parameters whole, an optimizer state (count, moments)
// with its moments split: ZeRO), one per member of a struct in declaration order (specs<P<"data">, P<>> for
// (w, b): a bias the devices cannot divide stays whole). The shard_map it runs takes one argument per leaf,
// each with its own spec; f sees its trees. A partitioning the rules cannot decide (operands split
// differently; both operands of a contraction split over one axis in dimensions it keeps) is a compile
// error naming the operation, the operands with their layouts, and the fix.
template <class M, class InSpecs, class OutSpecs, class F>
class sharded_jit {
  using in_specs = typename shard_detail::spec_list<InSpecs>::type;
  using out_specs = typename shard_detail::spec_list<OutSpecs>::type;

 public:
  // A scalar argument is a tensor of shape [] (f receives a traced scalar, as from a plain jit). Public, as
  // flat_call below, because traced_for names them (clang checks access where an alias is used).
  template <class A>
  static decltype(auto) as_tree(const A& a) {
    if constexpr (DType<A>) return tensor<A, shape<>>{a};
    else return (a);
  }
  template <class A>
  using tree_t = std::remove_cvref_t<decltype(as_tree(std::declval<const A&>()))>;

 private:
  template <class... P>
  static specs<P...> as_specs(std::tuple<P...>);
  template <class... A, std::size_t... I>
  static auto leaf_in_specs(std::index_sequence<I...>)
      -> decltype(as_specs(std::tuple_cat(shard_detail::leaf_specs_t<shard_detail::spec_at_t<I, in_specs>, A>{}...)));

 public:
  // For trees A: f's result at the global shapes, and the shard_map that runs it, one argument per leaf.
  template <class... A>
  struct flat_call {
    using result = decltype(F{}(std::declval<tree::rebind_t<A, tracer>>()...));
    using leaves = typename tree::joined<tree::leaf_types_t<A>...>::type;
    using in = decltype(leaf_in_specs<A...>(std::index_sequence_for<A...>{}));
    using out = decltype(as_specs(shard_detail::out_leaf_specs_t<out_specs, result>{}));
    using body = partition_detail::partitioned<M, in, out, partition_detail::over_leaves<F, tree::rebind_t<A, tracer>...>>;
    using type = sharded<M, in, out, body>;
    template <class... L>
    static auto traced(std::tuple<L...>) -> typename type::template traced_for<L...>;
  };

  // Donation as for shard_map: each leaf of a donated argument is handed on donated.
  template <class... A>
  auto operator()(A&&... args) const {
    // (A donated scalar is not handed on: f receives a new f32[] tensor made of it.)
    return call<(detail::is_donated_v<std::remove_cvref_t<A>> && !DType<detail::undonated_t<std::remove_cvref_t<A>>>)...>(
        as_tree(detail::undonated(args))...);
  }

  // What f sees for an argument of type A: its tree, a scalar as an f32[] (or s32[], ...) tensor.
  template <class A>
  using arg_t = tree_t<std::remove_cvref_t<decltype(detail::normalize_scalar(std::declval<const A&>()))>>;

  // The per-device program and plan that run for these (global) argument types.
  template <class... A>
  using traced_for = decltype(flat_call<arg_t<A>...>::traced(std::declval<typename flat_call<arg_t<A>...>::leaves>()));

 private:
  // Leaf K of the flat call: the argument's leaf, or, from a donated argument, the leaf moved into a
  // donated wrapper (donate() moved the argument into a wrapper of the caller's that is not const).
  template <bool Donated, class Leaf>
  static decltype(auto) leaf_argument(const void* leaf) {
    if constexpr (Donated) return donated<Leaf>{std::move(*const_cast<Leaf*>(static_cast<const Leaf*>(leaf)))};
    else return *static_cast<const Leaf*>(leaf);
  }

  template <bool... Donated, class... A>
  auto call(const A&... args) const {
    if constexpr (!shard_detail::check_arguments<partition_detail::jit_names, M, in_specs, A...>()) {
      return shard_detail::not_run{};
    } else if constexpr (!partition_detail::check_out_shardings<M, out_specs, typename flat_call<A...>::result>()) {
      return shard_detail::not_run{};
    } else {
      using flat = flat_call<A...>;
      using leaves = typename flat::leaves;
      constexpr std::size_t n = std::tuple_size_v<leaves>;
      std::array<const void*, n + 1> in{};
      std::size_t k = 0;
      (tree::for_each(args, [&](const auto& leaf) { in[k++] = &leaf; }), ...);
      static constexpr std::array<bool, n + 1> donated_leaf = [] {
        std::array<bool, n + 1> mask{};
        std::size_t next = 0;
        ((std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(next), detail::leaves_of<A>(), Donated), next += detail::leaves_of<A>()), ...);
        return mask;
      }();
      auto results = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return typename flat::type{}(leaf_argument<donated_leaf[K], std::tuple_element_t<K, leaves>>(in[K])...);
      }(std::make_index_sequence<n>{});
      if constexpr (shard_detail::is_not_run<decltype(results)>) {
        return results;
      } else {
        using result_type = tree::rebind_t<typename flat::result, tensor>;
        static_assert(std::is_same_v<tree::leaf_types_t<result_type>, tree::leaf_types_t<decltype(results)>>);
        std::array<void*, std::tuple_size_v<tree::leaf_types_t<result_type>> + 1> out{};
        k = 0;
        tree::for_each(results, [&](auto& leaf) { out[k++] = &leaf; });
        k = 0;
        return tree::build<result_type>([&]<class Leaf>(std::type_identity<Leaf>) { return std::move(*static_cast<Leaf*>(out[k++])); });
      }
    }
  }
};

template <class M, class... In, class... Out, class F>
constexpr sharded_jit<M, specs<In...>, specs<Out...>, F> jit(F, specs<In...>, specs<Out...>) {
  static_assert(is_mesh_v<M>, "tessel::jit (with shardings): the template argument is the mesh type, tessel::mesh<tessel::axis<\"name\", size>, ...>");
  return {};
}

namespace shard_detail {
// grad of a shard_map (JAX's transpose of shard_map): the shard_map of f's gradient on each device. The
// body's autodiff already gives each device its share: a split argument's cotangent is its block's, and a
// replicated argument's is summed over the devices along which its cotangent varies (the transpose of the
// implicit pvary), so the gradients come out as the arguments went in.
template <bool Value, bool Aux, class F, int... Argnums>
struct differentiated {
  template <class... A>
  constexpr auto operator()(A... blocks) const {
    if constexpr (Value && Aux) return value_and_grad<Argnums...>(F{}, has_aux)(blocks...);
    else if constexpr (Value) return value_and_grad<Argnums...>(F{})(blocks...);
    else return grad<Argnums...>(F{})(blocks...);
  }
};
// The gradients' out_specs: each differentiated argument's in_spec (a tuple of them for several).
template <class InSpecs, int... Argnums>
struct gradient_specs {
  using type = std::conditional_t<sizeof...(Argnums) == 0, spec_at_t<0, InSpecs>,
                                  specs<spec_at_t<static_cast<std::size_t>(Argnums < 0 ? 0 : Argnums), InSpecs>...>>;
};
template <class InSpecs, int... Argnums>
using gradient_specs_t = typename gradient_specs<typename spec_list<InSpecs>::type, Argnums...>::type;
// The value's out_spec: the one given, or the spec tree of f's returned tuple.
template <class Out>
using value_spec_t = std::conditional_t<spec_count<typename spec_list<Out>::type>::value == 1, spec_at_t<0, typename spec_list<Out>::type>,
                                        typename spec_list<Out>::type>;
}  // namespace shard_detail

// grad<Argnums...>(shard_map<M, In, Out>(f)): f returns a scalar (Out is P<>: the same value on every
// device, a psum or pmean inside f); the result is a shard_map whose gradients are laid out as the
// differentiated arguments are (a split argument's gradient split alike). value_and_grad likewise, the value
// under Out.
template <int... Argnums, class M, class In, class Out, class F>
constexpr auto grad(sharded<M, In, Out, F>) {
  return sharded<M, In, shard_detail::gradient_specs_t<In, Argnums...>, shard_detail::differentiated<false, false, F, Argnums...>>{};
}
template <int... Argnums, class M, class In, class Out, class F>
constexpr auto value_and_grad(sharded<M, In, Out, F>) {
  return sharded<M, In, specs<shard_detail::value_spec_t<Out>, shard_detail::gradient_specs_t<In, Argnums...>>, shard_detail::differentiated<true, false, F, Argnums...>>{};
}
template <int... Argnums, class M, class In, class Out, class F>
constexpr auto value_and_grad(sharded<M, In, Out, F>, has_aux_t) {
  return sharded<M, In, specs<shard_detail::value_spec_t<Out>, shard_detail::gradient_specs_t<In, Argnums...>>, shard_detail::differentiated<true, true, F, Argnums...>>{};
}

namespace shard_detail {
// vmap of a shard_map (JAX's batching rule for it): the batch axis is whole on every device, so each spec
// takes `none` at the batch axis (the entries after it move one dimension on; a spec shorter than the axis
// is padded with none), and each device runs f vmapped over its blocks.
template <class Spec, long Axis>
struct batched_spec {
  static_assert(Axis == none || Axis >= 0, "tessel::vmap of a shard_map: a batch axis is counted from the front (0, 1, ...) or is tessel::none");
  static constexpr auto entries = [] {
    constexpr std::size_t rank = Spec::rank, at = static_cast<std::size_t>(Axis < 0 ? 0 : Axis);
    std::array<spec_entry, (rank < at ? at : rank) + 1> out{};
    for (std::size_t i = 0, j = 0; i < out.size(); ++i) out[i] = i == at || j >= rank ? spec_entry{} : Spec::entries[j++];
    return out;
  }();
  using type = std::conditional_t<Axis == none, Spec, decltype([]<std::size_t... I>(std::index_sequence<I...>) {
    return P<entries[I]...>{};
  }(std::make_index_sequence<entries.size()>{}))>;
};
template <class... S, long Axis>
struct batched_spec<specs<S...>, Axis> {  // a spec tree: every leaf's batch axis is at Axis
  using type = specs<typename batched_spec<S, Axis>::type...>;
};
template <class Specs, class Axes>
struct batched_specs;
template <class... S, class Axes>
struct batched_specs<specs<S...>, Axes> {
  using type = decltype([]<std::size_t... K>(std::index_sequence<K...>) {
    return specs<typename batched_spec<S, vmap_detail::entry<Axes, K>()>::type...>{};
  }(std::index_sequence_for<S...>{}));
};
template <class Specs, class Axes>
using batched_specs_t = typename batched_specs<typename spec_list<Specs>::type, Axes>::type;
}  // namespace shard_detail

// vmap(shard_map<M, In, Out>(f)[, in_axes<...>[, out_axes<...>]]): a shard_map of vmap(f), its specs with
// the batch axes unsplit.
template <class M, class In, class Out, class F, long... I, long... O>
constexpr auto vmap(sharded<M, In, Out, F>, in_axes_t<I...>, out_axes_t<O...>) {
  return sharded<M, shard_detail::batched_specs_t<In, in_axes_t<I...>>, shard_detail::batched_specs_t<Out, out_axes_t<O...>>,
                 vmap_fn<F, in_axes_t<I...>, out_axes_t<O...>>>{};
}
template <class M, class In, class Out, class F, long... I>
constexpr auto vmap(sharded<M, In, Out, F> f, in_axes_t<I...> in) {
  return vmap(f, in, out_axes<0>);
}
template <class M, class In, class Out, class F>
constexpr auto vmap(sharded<M, In, Out, F> f) {
  return vmap(f, in_axes<0>, out_axes<0>);
}

namespace shard_detail {
// pmap's body: each device's block has a leading axis of 1, which f does not see (pmap maps, and so
// removes, the leading axis; shard_map keeps ranks).
template <class F>
struct per_instance {
  template <class... A>
  constexpr auto operator()(A... blocks) const {
    auto drop = [](auto b) { return reshape<drop_axis_t<typename decltype(b)::shape_type, 0>>(b); };
    auto add = [](auto r) { return reshape<insert_axis_t<typename decltype(r)::shape_type, 0>>(r); };
    return add(F{}(drop(blocks)...));
  }
};
template <fixed_string Name>
inline constexpr spec_entry named = spec_entry{axis_name{Name}};
template <fixed_string Name, class... A>
using all_mapped = specs<std::conditional_t<true, P<named<Name>>, A>...>;
}  // namespace shard_detail

// JAX's pmap(f, axis_name) on one host, as jax.pmap is since 0.8: a shard_map over a mesh of one axis of N
// devices, every argument mapped along its leading axis (of size N; each device sees its slice, that axis
// removed) and the result stacked along a new leading axis. f returns one tensor.
//
//   auto g = tessel::pmap<"i", 4>([](auto x) { return x - tessel::pmean<"i">(x); });   // x: f32[4, 3]
template <fixed_string Name, std::size_t N, class F>
struct pmapped {
  template <class... A>
  auto operator()(const A&... args) const {
    using M = mesh<axis<Name, N>>;
    static_assert(((is_tensor_v<A> && A::shape_type::rank >= 1 && A::shape_type::dims[0] == N) && ...),
                  "tessel::pmap: every argument is a tensor whose leading axis has the mapped size N; fix: stack the N "
                  "instances' values along axis 0");
    return shard_map<M, shard_detail::all_mapped<Name, A...>, P<shard_detail::named<Name>>>(shard_detail::per_instance<F>{})(args...);
  }
};
template <fixed_string Name, std::size_t N, class F>
constexpr pmapped<Name, N, F> pmap(F) {
  return {};
}

}  // namespace tessel
