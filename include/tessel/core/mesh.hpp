#pragma once
// Meshes and PartitionSpecs as types (JAX's Mesh and P), and the block each device holds.
//
//   using M = tessel::mesh<tessel::axis<"data", 4>, tessel::axis<"model", 2>>;   // 8 devices, row-major
//   tessel::P<"data", tessel::none>            // dim 0 split over "data", dim 1 whole
//   tessel::P<tessel::mesh_axes<"data", "model">>   // dim 0 split over both, "data" major
//   tessel::P<>                                // replicated; trailing dims are never split
//
//   // 2 processes (mpirun -np 2, distributed.hpp) of 2 devices each: axes over processes lead the mesh
//   using N = tessel::mesh<tessel::axis<"data", 2, tessel::over_processes>, tessel::axis<"model", 2>>;
//
// Every misuse is a compile error naming the argument, the global shape, the dimension, the axes and their
// sizes, and the fix: a spec longer than the rank, an axis named twice, an axis the mesh lacks, a dimension
// the axes' product does not divide (SHARDING.md §1.2-1.5; JAX checks these at trace or call time).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/core/shape.hpp"

namespace tessel {

inline constexpr std::size_t max_mesh_axes = 8;         // a value's varying axes are one byte (ir/graph.hpp)
inline constexpr std::size_t max_mesh_devices = 64;
inline constexpr std::size_t max_axis_name = 24;
inline constexpr std::size_t max_entry_axes = 4;        // axes in one tuple entry of a spec

// An axis name as a structural value (a template argument): at most 23 characters.
struct axis_name {
  char text[max_axis_name]{};
  constexpr axis_name() = default;
  template <std::size_t N>
  constexpr axis_name(const char (&s)[N]) {  // NOLINT: implicit on purpose, "data" -> axis_name
    static_assert(N <= max_axis_name, "tessel: a mesh axis name has at most 23 characters");
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
  template <std::size_t N>
  constexpr axis_name(const fixed_string<N>& s) {  // NOLINT
    static_assert(N <= max_axis_name, "tessel: a mesh axis name has at most 23 characters");
    for (std::size_t i = 0; i < N; ++i) text[i] = s.text[i];
  }
  constexpr std::string_view view() const {
    std::size_t n = 0;
    while (n < max_axis_name && text[n] != '\0') ++n;
    return {text, n};
  }
  constexpr bool operator==(const axis_name& o) const { return view() == o.view(); }
};

// One entry of a PartitionSpec: no axis (`none`), one axis ("data"), or several (`mesh_axes<"data", "model">`,
// the first name major: JAX's tuple entry). Also how a collective names the axes it runs over.
struct spec_entry {
  std::array<axis_name, max_entry_axes> names{};
  std::size_t count = 0;
  constexpr spec_entry() = default;
  template <std::size_t N>
  constexpr spec_entry(const char (&s)[N]) : count(1) {  // NOLINT: implicit on purpose
    names[0] = axis_name(s);
  }
  constexpr explicit spec_entry(const axis_name& n) : count(1) { names[0] = n; }
  // tessel::none (core/shape.hpp, shared with vmap's in_axes): no axis. Any other number is not an entry.
  constexpr spec_entry(long n) {  // NOLINT: implicit on purpose
    if (n != none) throw "tessel::P: an entry is an axis name, tessel::mesh_axes<...>, or tessel::none";
  }
};
template <fixed_string... Names>
inline constexpr spec_entry mesh_axes = [] {
  static_assert(sizeof...(Names) >= 1 && sizeof...(Names) <= max_entry_axes, "tessel::mesh_axes: between 1 and 4 axis names");
  spec_entry e;
  ((e.names[e.count++] = axis_name(Names)), ...);
  return e;
}();

// Where an axis's devices live: threads of this process (the default), or one process each along the axis
// (of a run started by mpirun; its coordinate along such axes is the process's place, distributed.hpp).
struct in_process {};
struct over_processes {};

template <fixed_string Name, std::size_t Size, class Placement = in_process>
struct axis {
  static_assert(std::is_same_v<Placement, in_process> || std::is_same_v<Placement, over_processes>,
                "tessel::axis: the third argument says where the axis's devices live: tessel::in_process (the default) "
                "or tessel::over_processes");
  static constexpr axis_name name{Name};
  static constexpr std::size_t size = Size;
  static constexpr bool spans_processes = std::is_same_v<Placement, over_processes>;
};

constexpr message_builder& append_entry(message_builder& m, const spec_entry& e) {
  if (e.count == 0) return m << "None";
  if (e.count > 1) m << '(';
  for (std::size_t i = 0; i < e.count; ++i) m << (i ? ", '" : "'") << e.names[i].view() << '\'';
  return e.count > 1 ? m << ')' : m;
}

// A PartitionSpec: entry i says which mesh axes split dimension i.
template <spec_entry... Entries>
struct P {
  static constexpr std::size_t rank = sizeof...(Entries);
  static constexpr std::array<spec_entry, sizeof...(Entries)> entries{Entries...};
  static constexpr message_builder& append(message_builder& m) {
    m << "P(";
    for (std::size_t i = 0; i < rank; ++i) append_entry(i ? m << ", " : m, entries[i]);
    return m << ')';
  }
};

template <class X>
inline constexpr bool is_partition_spec_v = false;
template <spec_entry... E>
inline constexpr bool is_partition_spec_v<P<E...>> = true;

template <class... Axes>
struct mesh {
  static constexpr std::size_t rank = sizeof...(Axes);
  static constexpr std::size_t devices = (std::size_t{1} * ... * Axes::size);
  static constexpr std::array<axis_name, rank> names{Axes::name...};
  static constexpr std::array<std::size_t, rank> sizes{Axes::size...};
  static constexpr std::array<bool, rank> spans_processes{Axes::spans_processes...};
  // The leading axes over processes: the run has `processes` of them (their sizes' product), each holding
  // the `local_devices` that follow it in device order.
  static constexpr std::size_t process_axes = [] {
    std::size_t k = 0;
    while (k < rank && spans_processes[k]) ++k;
    return k;
  }();
  static constexpr std::size_t processes = [] {
    std::size_t n = 1;
    for (std::size_t a = 0; a < process_axes; ++a) n *= sizes[a];
    return n;
  }();
  static constexpr std::size_t local_devices = devices / processes;

  // -1 if the mesh has no axis of that name.
  static constexpr int index_of(const axis_name& n) {
    for (std::size_t i = 0; i < rank; ++i)
      if (names[i] == n) return static_cast<int>(i);
    return -1;
  }
  static constexpr message_builder& append(message_builder& m) {
    m << "mesh of shape (";
    for (std::size_t i = 0; i < rank; ++i) m << (i ? ", " : "") << static_cast<std::uint64_t>(sizes[i]);
    m << (rank == 1 ? ",)" : ")") << " with axis names (";
    for (std::size_t i = 0; i < rank; ++i) m << (i ? ", '" : "'") << names[i].view() << '\'';
    return m << (rank == 1 ? ",)" : ")");
  }

  static constexpr bool valid = [] {
    if constexpr (rank == 0 || rank > max_mesh_axes || devices > max_mesh_devices || ((Axes::size == 0) || ...)) {
      raise<"tessel::mesh: a mesh has 1 to 8 axes, each of size at least 1, and at most 64 devices in all", Axes...>();
      return false;
    } else {
      for (std::size_t i = 0; i < rank; ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (names[i] == names[j]) return false;
      return true;
    }
  }();
  static_assert(valid, "tessel::mesh: two axes of a mesh have the same name; fix: name every axis differently");
  static_assert(((Axes::spans_processes ? 1 : 0) + ... + 0) == process_axes,
                "tessel::mesh: the axes over processes come first, so that each process holds consecutive devices; "
                "fix: move every tessel::over_processes axis before the others");

  // The mesh coordinates of a device (row-major: the last axis varies fastest, as JAX's device order).
  static constexpr std::array<std::size_t, rank> coordinates(std::size_t device) {
    std::array<std::size_t, rank> c{};
    for (std::size_t a = rank; a-- > 0;) {
      c[a] = device % sizes[a];
      device /= sizes[a];
    }
    return c;
  }

  // Which of the blocks along `axes` (bit a: axis a; mesh order, the first axis major) a device holds:
  // its place among the group_size(axes) devices that differ from it only along those axes.
  static constexpr std::size_t block_along(std::size_t device, std::uint8_t axes) {
    const auto c = coordinates(device);
    std::size_t k = 0;
    for (std::size_t a = 0; a < rank; ++a)
      if (axes & (1u << a)) k = k * sizes[a] + c[a];
    return k;
  }
};

// The devices of a group along `axes` (bit a: axis a of a mesh of these sizes): the product of those
// axes' sizes. For a program-to-program transform, which knows a mesh by its sizes only.
template <std::size_t N>
constexpr std::size_t group_size(const std::array<std::size_t, N>& sizes, std::uint8_t axes) {
  std::size_t n = 1;
  for (std::size_t a = 0; a < N; ++a)
    if (axes & (1u << a)) n *= sizes[a];
  return n;
}

// One PartitionSpec per argument (in_specs) or per element of a returned tuple (out_specs); a single P
// stands for specs<P>.
template <class... Specs>
struct specs {};

template <class X>
inline constexpr bool is_mesh_v = false;
template <class... A>
inline constexpr bool is_mesh_v<mesh<A...>> = true;

namespace sharding {

// How many blocks dimension `d` is cut into: the product of its entry's axis sizes (1 if none).
template <class M, class Spec>
constexpr std::size_t splits(std::size_t d) {
  if (d >= Spec::rank) return 1;
  std::size_t n = 1;
  for (std::size_t i = 0; i < Spec::entries[d].count; ++i) {
    const int a = M::index_of(Spec::entries[d].names[i]);
    n *= a < 0 ? 1 : M::sizes[static_cast<std::size_t>(a)];
  }
  return n;
}

// The mesh axes a spec names, as a bit set (bit a: mesh axis a).
template <class M, class Spec>
constexpr std::uint8_t axes_mask() {
  unsigned m = 0;
  for (const spec_entry& e : Spec::entries)
    for (std::size_t i = 0; i < e.count; ++i)
      if (const int a = M::index_of(e.names[i]); a >= 0) m |= 1u << a;
  return static_cast<std::uint8_t>(m);
}

enum class spec_problem { none, too_long, unknown_axis, repeated_axis, indivisible };

struct spec_check {
  spec_problem problem = spec_problem::none;
  std::size_t dim = 0;       // the dimension concerned
  axis_name name{};          // the axis concerned (unknown or repeated)
};

template <class M, class Spec, std::size_t Rank>
constexpr spec_check check(const std::array<std::size_t, Rank>& shape) {
  if (Spec::rank > Rank) return {spec_problem::too_long, Spec::rank, {}};
  std::array<axis_name, max_mesh_axes * max_entry_axes> seen{};
  std::size_t seen_count = 0;
  for (std::size_t d = 0; d < Spec::rank; ++d) {
    const spec_entry& e = Spec::entries[d];
    for (std::size_t i = 0; i < e.count; ++i) {
      if (M::index_of(e.names[i]) < 0) return {spec_problem::unknown_axis, d, e.names[i]};
      for (std::size_t j = 0; j < seen_count; ++j)
        if (seen[j] == e.names[i]) return {spec_problem::repeated_axis, d, e.names[i]};
      seen[seen_count++] = e.names[i];
    }
  }
  for (std::size_t d = 0; d < Spec::rank; ++d)
    if (shape[d] % splits<M, Spec>(d) != 0) return {spec_problem::indivisible, d, {}};
  return {};
}

// The block one device holds of a T[S] laid out by Spec over M: each dimension divided by its splits.
template <class M, class Spec, class S>
constexpr std::array<std::size_t, S::rank> local_dims() {
  std::array<std::size_t, S::rank> d{};
  for (std::size_t i = 0; i < S::rank; ++i) d[i] = S::dims[i] / splits<M, Spec>(i);
  return d;
}
template <class M, class Spec, class S>
using local_shape_t = shape_from<local_dims<M, Spec, S>()>;

// The global shape of blocks of shape S laid out by Spec (the output side: dimensions multiplied).
template <class M, class Spec, class S>
constexpr std::array<std::size_t, S::rank> global_dims() {
  std::array<std::size_t, S::rank> d{};
  for (std::size_t i = 0; i < S::rank; ++i) d[i] = S::dims[i] * splits<M, Spec>(i);
  return d;
}
template <class M, class Spec, class S>
using global_shape_t = shape_from<global_dims<M, Spec, S>()>;

// Which block of dimension d device `device` holds: its coordinates along the entry's axes, first major.
template <class M, class Spec>
constexpr std::size_t block_index(std::size_t device, std::size_t d) {
  if (d >= Spec::rank) return 0;
  const auto c = M::coordinates(device);
  std::size_t k = 0;
  for (std::size_t i = 0; i < Spec::entries[d].count; ++i) {
    const auto a = static_cast<std::size_t>(M::index_of(Spec::entries[d].names[i]));
    k = k * M::sizes[a] + c[a];
  }
  return k;
}

template <class M, class Spec, class X>
inline constexpr spec_check check_v = check<M, Spec, shape_of<X>::rank>(shape_of<X>::dims);

// What is wrong with Spec for a T[S] X, the part of the spec check's message after its subject.
template <class M, class Spec, class X>
constexpr message_builder& append_spec_problem(message_builder& m) {
  using S = shape_of<X>;
  constexpr spec_check c = check_v<M, Spec, X>;
  if constexpr (c.problem == spec_problem::too_long) {
    m << "the spec has " << static_cast<std::uint64_t>(Spec::rank) << " entries but the value has rank "
      << static_cast<std::uint64_t>(S::rank) << "; fix: give at most one entry per dimension (P<> for a scalar)";
  } else if constexpr (c.problem == spec_problem::unknown_axis) {
    m << "dimension " << static_cast<std::uint64_t>(c.dim) << " names axis '" << c.name.view()
      << "', which the mesh does not have; fix: name one of the mesh's axes, or add that axis to the mesh";
  } else if constexpr (c.problem == spec_problem::repeated_axis) {
    m << "axis '" << c.name.view() << "' is named twice (again at dimension " << static_cast<std::uint64_t>(c.dim)
      << "); a mesh axis splits at most one dimension; fix: name each axis at most once";
  } else if constexpr (c.problem == spec_problem::indivisible) {
    m << "dimension " << static_cast<std::uint64_t>(c.dim) << " (of size " << static_cast<std::uint64_t>(S::dims[c.dim])
      << ") is split over ";
    append_entry(m, Spec::entries[c.dim]) << " of total size " << static_cast<std::uint64_t>(splits<M, Spec>(c.dim))
      << ", which does not divide " << static_cast<std::uint64_t>(S::dims[c.dim])
      << "; fix: change the mesh's axis sizes, change the spec, or pad the array to a multiple of "
      << static_cast<std::uint64_t>(splits<M, Spec>(c.dim));
  }
  return m;
}

// The spec check's message, for an argument (Side "in", "args") or a result (Side "out", "results").
template <fixed_string Function, fixed_string Side, std::size_t Index, class M, class Spec, class X>
consteval bool require_valid_spec() {
  if constexpr (check_v<M, Spec, X>.problem == spec_problem::none) {
    return true;
  } else {
    raise<fit<[] {
      message_builder m;
      constexpr bool in = Side.view().substr(0, 2) == std::string_view("in");
      m << Function << ": " << Side << "[" << static_cast<std::uint64_t>(Index) << "] is ";
      Spec::append(m) << ", for " << (in ? "args[" : "results[") << static_cast<std::uint64_t>(Index) << "] of type ";
      append_type<X>(m) << " on a ";
      M::append(m) << ": ";
      return append_spec_problem<M, Spec, X>(m);
    }>(), X>();
    return false;
  }
}

}  // namespace sharding
}  // namespace tessel
