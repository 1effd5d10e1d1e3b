#pragma once
// What the collectives (psum, pmax, pmin, pvary, all_gather, psum_scatter, ppermute, all_to_all,
// axis_index) share: how a node names its mesh axes, how those names are bound to the surrounding
// shard_map's mesh while tracing, the varying-axes rules (JAX's check_vma), and, at run time, the group of
// devices a collective runs over (kernels/collective.hpp).
//
// attr.ints: [k, axis_1 .. axis_k, the primitive's own parameters...], the axes as mesh axis indices in the
// order the call named them (the first major, as JAX's tuples of axis names).

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <type_traits>
#include <vector>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/mesh.hpp"
#include "tessel/ir/graph.hpp"
#include "tessel/kernels/collective.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/batching.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel::prim::collective {

constexpr std::size_t axis_count(const ir::node& n) { return static_cast<std::size_t>(n.attr.ints[0]); }
constexpr std::size_t axis_at(const ir::node& n, std::size_t i) { return static_cast<std::size_t>(n.attr.ints[1 + i]); }
// The index in attr.ints of the primitive's own parameter p.
constexpr std::size_t param_slot(const ir::node& n, std::size_t p) { return 1 + axis_count(n) + p; }
constexpr std::int64_t param(const ir::node& n, std::size_t p) { return n.attr.ints[param_slot(n, p)]; }

constexpr std::uint8_t axes_bits(const ir::node& n) {
  unsigned bits = 0;
  for (std::size_t i = 0; i < axis_count(n); ++i) bits |= 1u << axis_at(n, i);
  return static_cast<std::uint8_t>(bits);
}

// Varying rules: a reduction over axes makes the result the same along them (psum, pmax, pmin); every other
// collective's result differs along them (all_gather, psum_scatter, ppermute, all_to_all, pvary, axis_index).
constexpr std::uint8_t invariant_along(const ir::node& n, std::uint8_t operands) {
  return static_cast<std::uint8_t>(operands & ~axes_bits(n));
}
constexpr std::uint8_t varying_along(const ir::node& n, std::uint8_t operands) {
  return static_cast<std::uint8_t>(operands | axes_bits(n));
}

constexpr message_builder& append_axes(message_builder& m, const ir::mesh_shape& mesh, std::uint8_t bits) {
  m << '{';
  bool first = true;
  for (std::size_t a = 0; a < mesh.rank; ++a)
    if (bits & (1u << a)) {
      m << (first ? "" : ", ") << mesh.name(a);
      first = false;
    }
  return m << '}';
}

// Binds a call's axis names to the mesh being traced: appends [k, axes...] to `a` and returns the product
// of their sizes. An unbound name reports the error (the node is still made, over no axes, so tracing
// goes on to the report).
constexpr std::size_t bind(ir::graph_builder& g, std::string_view op, const spec_entry& names, ir::attributes& a) {
  a.push(0);
  std::size_t size = 1;
  for (std::size_t i = 0; i < names.count; ++i) {
    const int axis = g.mesh.index_of(names.names[i].view());
    if (axis < 0) {
      message_builder m;
      m << op << ": unbound axis name '" << names.names[i].view() << "': ";
      if (g.mesh.rank == 0) {
        m << "a collective runs over an axis of the mesh of the shard_map it is called in, and this call is in none; fix: "
             "call it inside tessel::shard_map over a mesh with an axis '"
          << names.names[i].view() << "'";
      } else {
        m << "the surrounding shard_map's mesh has axes (";
        for (std::size_t b = 0; b < g.mesh.rank; ++b) m << (b ? ", '" : "'") << g.mesh.name(b) << '\'';
        m << "); fix: name one of them, or add the axis to the mesh";
      }
      g.report_error(m.view());
      continue;
    }
    bool repeated = false;
    for (std::size_t j = 0; j < i; ++j) repeated = repeated || names.names[j] == names.names[i];
    if (repeated) {
      g.report_error((message_builder{} << op << ": axis '" << names.names[i].view()
                                        << "' is named twice; fix: name each mesh axis once").view());
      continue;
    }
    a.ints[0] += 1;
    a.push(axis);
    size *= g.mesh.sizes[static_cast<std::size_t>(axis)];
  }
  return size;
}

// A call that names its mesh type (all_gather, psum_scatter, all_to_all: their result shapes depend on the
// axis sizes) must be traced inside a shard_map over that same mesh.
template <class M>
constexpr bool same_mesh(const ir::mesh_shape& traced) {
  if (traced.rank != M::rank) return false;
  for (std::size_t a = 0; a < M::rank; ++a)
    if (traced.name(a) != M::names[a].view() || traced.sizes[a] != M::sizes[a]) return false;
  return true;
}
template <class M>
constexpr void require_mesh(ir::graph_builder& g, std::string_view op) {
  if (g.mesh.rank == 0 || same_mesh<M>(g.mesh)) return;  // outside shard_map, bind reports the unbound name
  message_builder m;
  m << op << ": the call names the ";
  M::append(m) << ", but the surrounding shard_map runs over a mesh of shape (";
  for (std::size_t a = 0; a < g.mesh.rank; ++a) m << (a ? ", " : "") << static_cast<std::uint64_t>(g.mesh.sizes[a]);
  m << "); fix: name the shard_map's mesh type in the call";
  g.report_error(m.view());
}

// The node again over a batch: shape-keeping collectives (psum, ppermute, ...) act on each batch element
// where the batch axis is; the others get the batch axis in front and their dimension parameters (`dims`,
// indices of their own parameters) shifted past it.
constexpr int batch_in_place(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                             const std::array<int, ir::max_operands>& axes, int& out_axis) {
  out_axis = axes[0];
  return batching::emit_like(g, n, ops, g[ops[0]].shape);
}
constexpr int batch_in_front(ir::graph_builder& g, const ir::node& n, const std::array<int, ir::max_operands>& ops,
                             const std::array<int, ir::max_operands>& axes, std::initializer_list<std::size_t> dims, int& out_axis) {
  const std::size_t size = g[ops[0]].shape.d[static_cast<std::size_t>(axes[0])];
  ir::node m = n;
  m.operands = {batching::batched_at(g, ops[0], axes[0], 0, size), -1, -1};
  m.shape = batching::insert_axis(n.shape, 0, size);
  for (std::size_t p : dims) m.attr.ints[param_slot(n, p)] += 1;
  out_axis = 0;
  return g.add(m);
}

// The same collective node kind over the same axes, on another operand: what transposes are made of.
constexpr int remake(ir::graph_builder& g, const ir::primitive& p, const ir::node& like, int x, const ir::dims& shape,
                     const ir::attributes& attr) {
  ir::node m;
  m.prim = &p;
  m.dtype = g[x].dtype;
  m.operand_dtype = g[x].dtype;
  m.shape = shape;
  m.operands = {x, -1, -1};
  m.arity = 1;
  m.attr = attr;
  (void)like;
  return g.add(m);
}

// The product of the named axes' sizes in mesh M, for result shapes; an axis M lacks is a compile error.
template <fixed_string Op, class M, spec_entry Names>
consteval std::size_t size_in() {
  static_assert(is_mesh_v<M>, "tessel: a collective that changes its operand's shape names the mesh type first: all_gather<M, \"axis\">");
  constexpr int missing = [] {
    for (std::size_t i = 0; i < Names.count; ++i)
      if (M::index_of(Names.names[i]) < 0) return static_cast<int>(i);
    return -1;
  }();
  if constexpr (missing >= 0) {
    raise<fit<[] {
      message_builder m;
      m << Op << ": unbound axis name '" << Names.names[missing].view() << "': the ";
      M::append(m) << " has no such axis; fix: name one of its axes";
      return m;
    }>(), M>();
    return 1;
  } else {
    std::size_t n = 1;
    for (std::size_t i = 0; i < Names.count; ++i) n *= M::sizes[static_cast<std::size_t>(M::index_of(Names.names[i]))];
    return n;
  }
}

// S with dimension Axis multiplied by Mul and divided by Div.
template <class S, std::size_t Axis, std::size_t Mul, std::size_t Div>
consteval std::array<std::size_t, S::rank> rescaled() {
  std::array<std::size_t, S::rank> d = S::dims;
  d[Axis] = d[Axis] * Mul / Div;
  return d;
}

// ---- run time ----------------------------------------------------------------------------------------

// The devices a collective on `device` runs with: those whose coordinates differ only along the node's
// axes, in the order of their coordinates along those axes (first axis major); `rank` is this device's place.
struct group {
  std::size_t size = 1, rank = 0;
  std::array<std::size_t, max_mesh_devices> member{};
};

// The same over a mesh of `rank` axes of these sizes, devices numbered row-major (what a communicator and
// a StableHLO module's device ids both do).
constexpr group group_in(const ir::node& n, const std::size_t* sizes, std::size_t rank, std::size_t device) {
  std::array<std::size_t, 8> coord{};
  for (std::size_t a = rank, rest = device; a-- > 0;) {
    coord[a] = rest % sizes[a];
    rest /= sizes[a];
  }
  group g;
  const std::size_t k = axis_count(n);
  for (std::size_t i = 0; i < k; ++i) {
    g.size *= sizes[axis_at(n, i)];
    g.rank = g.rank * sizes[axis_at(n, i)] + coord[axis_at(n, i)];
  }
  for (std::size_t j = 0; j < g.size; ++j) {
    std::array<std::size_t, 8> at = coord;
    std::size_t rest = j;
    for (std::size_t i = k; i-- > 0;) {
      const std::size_t axis = axis_at(n, i);
      at[axis] = rest % sizes[axis];
      rest /= sizes[axis];
    }
    std::size_t id = 0;
    for (std::size_t a = 0; a < rank; ++a) id = id * sizes[a] + at[a];
    g.member[j] = id;
  }
  return g;
}

inline group group_of(const ir::node& n, const kernels::communicator& c, std::size_t device) {
  std::array<std::size_t, 8> sizes{};
  for (std::size_t a = 0; a < c.rank(); ++a) sizes[a] = c.axis_size(a);
  return group_in(n, sizes.data(), c.rank(), device);
}

// The communicator of the device running this thread. Outside a shard_map's run a program holds no
// collective (tracing reports an unbound axis), so a missing one is a broken invariant.
inline kernels::device_context& device() {
  kernels::device_context& d = kernels::this_device();
  if (d.comm == nullptr) __builtin_trap();
  return d;
}

// Every device of the group publishes its operand's buffer and its result's (kernels/collective.hpp).
inline void publish(kernels::device_context& d, const ir::node& n, const ir::node& operand, const void* in, void* out) {
  d.comm->publish(d.device, in, out, operand.shape.size() * ir::bytes_of(operand.dtype), axes_bits(n));
}

enum class reduction { sum, max, min };

// out[i] = in_0[i] (op) in_1[i] (op) ... (op) in_{n-1}[i] for i in [0, count), always in that order.
template <class T>
void reduce_in_order(reduction op, const void* const* in, std::size_t n, std::size_t first, std::size_t count, void* out) {
  auto* o = static_cast<T*>(out) + first;
  if constexpr (std::is_same_v<T, bfloat16>) {
    for (std::size_t i = 0; i < count; ++i) {
      float acc = static_cast<float>(static_cast<const T*>(in[0])[first + i]);
      for (std::size_t j = 1; j < n; ++j) {
        const float v = static_cast<float>(static_cast<const T*>(in[j])[first + i]);
        acc = op == reduction::sum ? acc + v : op == reduction::max ? (v > acc || v != v ? v : acc) : (v < acc || v != v ? v : acc);
      }
      o[i] = T(acc);
    }
  } else {
    std::memcpy(o, static_cast<const T*>(in[0]) + first, count * sizeof(T));
    for (std::size_t j = 1; j < n; ++j) {
      const T* x = static_cast<const T*>(in[j]) + first;
      if (op == reduction::sum)
        for (std::size_t i = 0; i < count; ++i) o[i] = static_cast<T>(o[i] + x[i]);
      else if (op == reduction::max)
        for (std::size_t i = 0; i < count; ++i) o[i] = x[i] > o[i] || x[i] != x[i] ? x[i] : o[i];
      else
        for (std::size_t i = 0; i < count; ++i) o[i] = x[i] < o[i] || x[i] != x[i] ? x[i] : o[i];
    }
  }
}

// A group of one device in each process of the run (a mesh of one device per process), member j
// holding chunk j of the elements (from first[j] to first[j + 1]): each process sends every other member
// its chunk of `in` and reduces the chunks it receives with its own, in member order, into `out` (its
// chunk only). Bit-identical to one process's reduction.
template <class T>
void reduce_chunk_over_processes(std::uint64_t program, reduction op, const group& gr, const void* in, const std::size_t* first, void* out) {
  const std::size_t n = gr.size, me = gr.rank;
  const std::size_t mine = (first[me + 1] - first[me]) * sizeof(T);
  // Indexed by process (member j is process gr.member[j]): what goes to it, what comes from it, and where.
  std::array<std::size_t, max_mesh_devices> sizes{}, offsets{}, received_sizes{}, received_offsets{};
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t q = gr.member[j];
    sizes[q] = (first[j + 1] - first[j]) * sizeof(T);
    offsets[q] = first[j] * sizeof(T);
    received_sizes[q] = mine;
    received_offsets[q] = j * mine;
  }
  static std::vector<unsigned char> chunks;  // every other member's chunk `me`, in member order
  if (chunks.size() < n * mine) chunks.resize(n * mine);
  kernels::processes().exchange(program, in, sizes.data(), offsets.data(), chunks.data(), received_sizes.data(), received_offsets.data());
  std::array<const void*, max_mesh_devices> ins{};
  for (std::size_t j = 0; j < n; ++j) ins[j] = j == me ? static_cast<const unsigned char*>(in) + first[me] * sizeof(T) : chunks.data() + j * mine;
  reduce_in_order<T>(op, ins.data(), n, 0, first[me + 1] - first[me], out);
}

// The same group, every process getting every chunk: member j reduces chunk j, then the chunks are gathered.
// Each process sends and receives 2 (P - 1) / P of the buffer, as a ring all-reduce does.
template <class T>
void all_reduce_over_processes(std::uint64_t program, reduction op, const group& gr, const void* in, void* out, std::size_t count) {
  std::array<std::size_t, max_mesh_devices + 1> first{}, sizes{}, offsets{};
  for (std::size_t j = 0; j <= gr.size; ++j) first[j] = j * count / gr.size;
  reduce_chunk_over_processes<T>(program, op, gr, in, first.data(), static_cast<T*>(out) + first[gr.rank]);
  for (std::size_t j = 0; j < gr.size; ++j) {
    sizes[gr.member[j]] = (first[j + 1] - first[j]) * sizeof(T);
    offsets[gr.member[j]] = first[j] * sizeof(T);
  }
  kernels::processes().gather_blocks(program, out, sizes.data(), offsets.data());
}

// Whether n's group is one device in each process of the run, and the only device of its process: its
// reduction then goes between the processes directly, not through a gather of every input.
inline bool one_device_a_process(const group& gr, const kernels::communicator& c) {
  bool all_here = true;
  for (std::size_t j = 0; j < gr.size; ++j) all_here = all_here && c.is_local(gr.member[j]);
  return !all_here && c.local_devices() == 1 && gr.size == c.devices();
}

// psum, pmax, pmin: each device reduces its share (chunk `rank` of the elements) over the group, in member
// order, and writes it into every member's result. A group with members in other processes: one device in
// each process, as above; otherwise each device reduces all the elements itself, from every member's
// input gathered here, in the same member order. Either way the sums are bit-identical to one process's.
template <reduction Op>
void run_all_reduce(const ir::node& n, const ir::node* const* operands, const void* const* in, void* out) {
  kernels::device_context& d = device();
  const group gr = group_of(n, *d.comm, d.device);
  bool all_here = true;
  for (std::size_t j = 0; j < gr.size; ++j) all_here = all_here && d.comm->is_local(gr.member[j]);
  const std::size_t count = n.shape.size();
  if (one_device_a_process(gr, *d.comm)) {
    d.comm->publish(d.device, in[0], out, 0, 0);  // nothing to share within the process
    visit_dtype(n.dtype, [&]<class T>(T) {
      if constexpr (!std::is_same_v<T, bool>) all_reduce_over_processes<T>(d.comm->program(), Op, gr, in[0], out, count);
    });
    d.comm->finish(d.device);
    return;
  }
  publish(d, n, *operands[0], in[0], out);
  const std::size_t first = all_here ? gr.rank * count / gr.size : 0, last = all_here ? (gr.rank + 1) * count / gr.size : count;
  std::array<const void*, max_mesh_devices> ins{};
  for (std::size_t j = 0; j < gr.size; ++j) ins[j] = d.comm->input(gr.member[j]);
  visit_dtype(n.dtype, [&]<class T>(T) {
    if constexpr (!std::is_same_v<T, bool>) {
      reduce_in_order<T>(Op, ins.data(), gr.size, first, last - first, out);
      if (all_here)
        for (std::size_t j = 0; j < gr.size; ++j)
          if (gr.member[j] != d.device)
            std::memcpy(static_cast<T*>(d.comm->output(gr.member[j])) + first, static_cast<const T*>(out) + first, (last - first) * sizeof(T));
    }
  });
  d.comm->finish(d.device);
}

// ---- export ------------------------------------------------------------------------------------------

// The groups of n's collective over the writer's mesh as StableHLO's replica_groups (device ids, each group
// in group order), and the properties every collective op carries: a fresh channel and global device ids.
inline std::vector<group> groups_of(const ir::node& n, const ir::mesh_shape& m) {
  std::vector<group> out;
  for (std::size_t d = 0; d < m.devices(); ++d) {
    const group g = group_in(n, m.sizes.data(), m.rank, d);
    if (g.member[0] == d) out.push_back(g);
  }
  return out;
}
inline std::string replica_groups(const std::vector<group>& groups) {
  std::string s = "dense<[";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    s += i ? ", [" : "[";
    for (std::size_t j = 0; j < groups[i].size; ++j) s += (j ? ", " : "") + std::to_string(groups[i].member[j]);
    s += "]";
  }
  return s + "]> : tensor<" + std::to_string(groups.size()) + "x" + std::to_string(groups.empty() ? 0 : groups[0].size) + "xi64>";
}
inline ir::hlo_properties collective_properties(ir::stablehlo_writer& w, bool global_ids = true) {
  ir::hlo_properties p;
  p.add("channel_handle", "#stablehlo.channel_handle<handle = " + std::to_string(w.next_channel()) + ", type = 1>");
  p.add("replica_groups", replica_groups(groups_of(w.current(), w.mesh)));
  if (global_ids) p.add("use_global_device_ids", "unit");
  return p;
}
// A reduction over the group (psum, pmax, pmin, psum_scatter) of an f32 x (bf16 is reduced in f32, as the
// run-time reduction does); `op` writes stablehlo.all_reduce or reduce_scatter with properties p.
inline ir::hlo_value reduce_over_group(ir::stablehlo_writer& w, std::string_view op, const ir::hlo_value& x, std::string_view combiner,
                                       const ir::hlo_properties& p, const std::string& type) {
  const std::string scalar = ir::hlo_type(w.current().dtype == ir::dtype_code::bf16 ? ir::dtype_code::f32 : w.current().dtype, {});
  ir::hlo_region body{{scalar, scalar}, [&](const std::vector<ir::hlo_value>& a) {
                        return std::vector<ir::hlo_value>{w.emit(combiner, {a[0], a[1]}, {}, scalar)};
                      }};
  return w.emit(op, {x}, p, {type}, {body}).front();
}
template <reduction R>
void lower_all_reduce(ir::stablehlo_writer& w) {
  const ir::node& n = w.current();
  const ir::dtype_code acc = n.dtype == ir::dtype_code::bf16 ? ir::dtype_code::f32 : n.dtype;
  const ir::hlo_value x = acc == n.dtype ? w.operand(0) : w.convert(w.operand(0), acc, n.shape);
  constexpr std::string_view combiner = R == reduction::sum ? "stablehlo.add" : R == reduction::max ? "stablehlo.maximum" : "stablehlo.minimum";
  const ir::hlo_value r = reduce_over_group(w, "stablehlo.all_reduce", x, combiner, collective_properties(w), ir::hlo_type(acc, n.shape));
  w.define(acc == n.dtype ? r : w.convert(r, n.dtype, n.shape));
}

}  // namespace tessel::prim::collective
