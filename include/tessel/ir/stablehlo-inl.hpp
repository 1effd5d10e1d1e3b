#pragma once
// The StableHLO writer's definitions (ir/stablehlo.hpp), compiled once where TESSEL_IMPLEMENTATION is.

#include <bit>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "tessel/core/bfloat16.hpp"
#include "tessel/ir/region.hpp"
#include "tessel/ir/stablehlo.hpp"

namespace tessel::ir {

std::string hlo_type(dtype_code c, const dims& s) {
  std::string t = "tensor<";
  for (std::size_t i = 0; i < s.rank; ++i) t += std::to_string(s.d[i]) + "x";
  t += info_of(c).mlir;
  return t + ">";
}

hlo_properties& hlo_properties::add(std::string_view name, std::string_view value) {
  if (!text_.empty()) text_ += ", ";
  text_ += name;
  text_ += " = ";
  text_ += value;
  return *this;
}
hlo_properties& hlo_properties::i64(std::string_view name, std::int64_t v) { return add(name, std::to_string(v) + " : i64"); }
hlo_properties& hlo_properties::i64s(std::string_view name, std::span<const std::int64_t> v) {
  std::string a = "array<i64";
  for (std::size_t i = 0; i < v.size(); ++i) a += (i ? ", " : ": ") + std::to_string(v[i]);
  return add(name, a + ">");
}

hlo_properties& hlo_properties::padding(std::string_view name, std::span<const std::int64_t> lo, std::span<const std::int64_t> hi) {
  std::string a = "dense<[";
  for (std::size_t i = 0; i < lo.size(); ++i) a += (i ? ", [" : "[") + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  return add(name, a + "]> : tensor<" + std::to_string(lo.size()) + "x2xi64>");
}

stablehlo_writer::stablehlo_writer(const program_view& p) : p_(p), values_(p.size) {}

std::string stablehlo_writer::fresh() { return "%" + std::to_string(next_name_++); }

void stablehlo_writer::line(std::string_view text) {
  text_.append(static_cast<std::size_t>(2 * depth), ' ');
  text_ += text;
  text_ += '\n';
}

namespace stablehlo_detail {
std::string joined(const std::vector<hlo_value>& vs, bool names) {
  std::string s;
  for (std::size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + (names ? vs[i].name : vs[i].type);
  return s;
}
std::string joined(const std::vector<std::string>& ts) {
  std::string s;
  for (std::size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i];
  return s;
}
}  // namespace stablehlo_detail

std::vector<hlo_value> stablehlo_writer::emit(std::string_view op, const std::vector<hlo_value>& operands, const hlo_properties& p,
                                              const std::vector<std::string>& types, const std::vector<hlo_region>& regions) {
  using stablehlo_detail::joined;
  const std::string name = fresh();
  std::vector<hlo_value> results;
  for (std::size_t i = 0; i < types.size(); ++i) results.push_back({types.size() == 1 ? name : name + "#" + std::to_string(i), types[i]});
  std::string head;
  if (!types.empty()) head = name + (types.size() > 1 ? ":" + std::to_string(types.size()) : "") + " = ";
  head += "\"" + std::string(op) + "\"(" + joined(operands, true) + ")";
  if (!p.text().empty()) head += " <{" + p.text() + "}>";
  const std::string signature = " : (" + joined(operands, false) + ") -> " + (types.size() == 1 ? types[0] : "(" + joined(types) + ")");
  if (regions.empty()) {
    line(head + signature);
    return results;
  }
  line(head + " ({");
  for (std::size_t r = 0; r < regions.size(); ++r) {
    if (r) line("}, {");
    std::vector<hlo_value> args;
    std::string block = "^bb0(";
    for (std::size_t a = 0; a < regions[r].arguments.size(); ++a) {
      args.push_back({fresh(), regions[r].arguments[a]});
      block += (a ? ", " : "") + args.back().name + ": " + args.back().type;
    }
    ++depth;
    line(block + "):");
    ++depth;
    const std::vector<hlo_value> returned = regions[r].body(args);
    line("\"stablehlo.return\"(" + joined(returned, true) + ") : (" + joined(returned, false) + ") -> ()");
    depth -= 2;
  }
  line("})" + signature);
  return results;
}

hlo_value stablehlo_writer::emit(std::string_view op, const std::vector<hlo_value>& operands, const hlo_properties& p, const std::string& type) {
  return emit(op, operands, p, std::vector<std::string>{type}).front();
}

void stablehlo_writer::define(hlo_value v) { set_value(current_, std::move(v)); }

void stablehlo_writer::lower_as(std::string_view op, const hlo_properties& p) {
  std::vector<hlo_value> operands;
  for (std::size_t i = 0; i < current().arity; ++i) operands.push_back(operand(i));
  define(emit(op, operands, p, result_type()));
}

hlo_value stablehlo_writer::constant(dtype_code c, double value, const dims& s) {
  char bits[32];
  switch (c) {
    case dtype_code::f32: std::snprintf(bits, sizeof bits, "0x%08X", std::bit_cast<std::uint32_t>(static_cast<float>(value))); break;
    case dtype_code::bf16: std::snprintf(bits, sizeof bits, "0x%04X", static_cast<unsigned>(bfloat16(static_cast<float>(value)).bits())); break;
    case dtype_code::s32: std::snprintf(bits, sizeof bits, "%d", static_cast<int>(static_cast<std::int32_t>(value))); break;
    case dtype_code::u32: std::snprintf(bits, sizeof bits, "%u", static_cast<unsigned>(static_cast<std::uint32_t>(value))); break;
    case dtype_code::pred: std::snprintf(bits, sizeof bits, "%s", value != 0 ? "true" : "false"); break;
  }
  const std::string scalar = hlo_type(c, {});
  hlo_value v = emit("stablehlo.constant", {}, hlo_properties{}.add("value", "dense<" + std::string(bits) + "> : " + scalar), scalar);
  return s.rank == 0 ? v : broadcast(v, c, s);
}

hlo_value stablehlo_writer::broadcast(const hlo_value& scalar, dtype_code c, const dims& s) {
  return emit("stablehlo.broadcast_in_dim", {scalar}, hlo_properties{}.i64s("broadcast_dimensions", {}), hlo_type(c, s));
}

hlo_value stablehlo_writer::convert(const hlo_value& v, dtype_code to, const dims& s) {
  return emit("stablehlo.convert", {v}, {}, hlo_type(to, s));
}

hlo_value stablehlo_writer::compare(const hlo_value& a, const hlo_value& b, dtype_code c, std::string_view direction, const std::string& type) {
  hlo_properties p;
  p.add("compare_type", "#stablehlo<comparison_type " + std::string(info_of(c).comparison) + ">");
  p.add("comparison_direction", "#stablehlo<comparison_direction " + std::string(direction) + ">");
  return emit("stablehlo.compare", {a, b}, p, type);
}

hlo_value stablehlo_writer::reduce(const hlo_value& x, const hlo_value& init, dtype_code c, std::string_view combiner,
                                   std::span<const std::int64_t> axes, const std::string& type) {
  const std::string scalar = hlo_type(c, {});
  const std::string op(combiner);
  hlo_region body{{scalar, scalar}, [this, op, scalar](const std::vector<hlo_value>& a) {
                    return std::vector<hlo_value>{emit(op, {a[0], a[1]}, {}, scalar)};
                  }};
  return emit("stablehlo.reduce", {x, init}, hlo_properties{}.i64s("dimensions", axes), std::vector<std::string>{type}, {body}).front();
}

hlo_value stablehlo_writer::place_along(std::span<const std::size_t> axes) {
  constexpr dtype_code u32 = dtype_code::u32;
  const std::string t = hlo_type(u32, {});
  const hlo_value id = emit("stablehlo.partition_id", {}, {}, t);
  hlo_value place = constant(u32, 0);
  for (std::size_t axis : axes) {
    std::size_t stride = 1;
    for (std::size_t a = axis + 1; a < mesh.rank; ++a) stride *= mesh.sizes[a];
    const auto size = static_cast<double>(mesh.sizes[axis]);
    const hlo_value coordinate =
        emit("stablehlo.remainder", {emit("stablehlo.divide", {id, constant(u32, static_cast<double>(stride))}, {}, t), constant(u32, size)}, {}, t);
    place = emit("stablehlo.add", {emit("stablehlo.multiply", {place, constant(u32, size)}, {}, t), coordinate}, {}, t);
  }
  return convert(place, dtype_code::s32, {});
}

void stablehlo_writer::lower(int id) {
  const node& n = p_[id];
  if (n.prim->lower == nullptr)
    throw std::logic_error("tessel::export_stablehlo: primitive " + std::string(n.prim->name) + " has no StableHLO lowering");
  current_ = id;
  n.prim->lower(*this);
  current_ = -1;
}

// ---- the module ------------------------------------------------------------------------------------

namespace stablehlo_detail {
// Writes the nodes of region `region` (-1: the function itself) among ids [0, hi), in table order; a
// construct is written where its first output stands.
void write_nodes(stablehlo_writer& w, const program_view& p, const std::vector<int>& region_of, int region, int hi);
std::string type_of(const node& n);

// Binds region r's parameters to `values`, writes its nodes and returns the values of its results.
std::vector<hlo_value> write_region(stablehlo_writer& w, const program_view& p, const std::vector<int>& region_of, int r, int hi,
                                    const std::vector<hlo_value>& values) {
  const frozen_region& fr = p.region(r);
  for (int k = 0; k < fr.param_count; ++k) w.set_value(p.region_int(fr.params + k), values[static_cast<std::size_t>(k)]);
  write_nodes(w, p, region_of, r, hi);
  std::vector<hlo_value> results;
  for (int k = 0; k < fr.result_count; ++k) results.push_back(w.value(p.region_int(fr.results + k)));
  return results;
}

std::string type_of(const node& n) { return hlo_type(n.dtype, n.shape); }

// scan as stablehlo.while over (step, carries, stacked ys): each step slices the xs at its index (from the
// end when reverse), runs the body and writes its ys at that index.
void write_scan(stablehlo_writer& w, const program_view& p, const std::vector<int>& region_of, const frozen_construct& c, int hi) {
  constexpr dtype_code s32 = dtype_code::s32;
  const int r = c.first_region;
  const frozen_region& body = p.region(r);
  const auto carries = static_cast<std::size_t>(c.carries), ys = static_cast<std::size_t>(c.output_count) - carries;
  const std::string step = hlo_type(s32, {});
  std::vector<hlo_value> state{w.constant(s32, 0)};
  std::vector<std::string> types{step};
  for (std::size_t k = 0; k < carries; ++k) state.push_back(w.value(p.region_int(c.inputs + static_cast<int>(k))));
  for (std::size_t k = 0; k < ys; ++k) {
    const node& out = p[p.region_int(c.outputs + static_cast<int>(carries + k))];
    state.push_back(w.constant(out.dtype, 0, out.shape));
  }
  for (std::size_t k = 1; k < state.size(); ++k) types.push_back(state[k].type);
  hlo_region condition{types, [&](const std::vector<hlo_value>& a) {
                         return std::vector<hlo_value>{w.compare(a[0], w.constant(s32, c.length), s32, "LT", hlo_type(dtype_code::pred, {}))};
                       }};
  hlo_region loop{types, [&](const std::vector<hlo_value>& a) {
                    const hlo_value at = c.reverse ? w.emit("stablehlo.subtract", {w.constant(s32, c.length - 1), a[0]}, {}, step) : a[0];
                    const hlo_value zero = w.constant(s32, 0);
                    std::vector<hlo_value> params(a.begin() + 1, a.begin() + 1 + static_cast<std::ptrdiff_t>(carries));
                    for (int k = static_cast<int>(carries); k < body.param_count; ++k) {  // x slices
                      const node& slice = p[p.region_int(body.params + k)];
                      const hlo_value xs = w.value(p.region_int(c.inputs + k));
                      std::vector<hlo_value> start{at};
                      std::vector<std::int64_t> sizes{1};
                      for (std::size_t d = 0; d < slice.shape.rank; ++d) {
                        start.push_back(zero);
                        sizes.push_back(static_cast<std::int64_t>(slice.shape.d[d]));
                      }
                      dims one = slice.shape;
                      one.rank = static_cast<std::uint8_t>(slice.shape.rank + 1);
                      for (std::size_t d = slice.shape.rank; d > 0; --d) one.d[d] = slice.shape.d[d - 1];
                      one.d[0] = 1;
                      start.insert(start.begin(), xs);
                      const hlo_value row = w.emit("stablehlo.dynamic_slice", start, hlo_properties{}.i64s("slice_sizes", sizes), hlo_type(slice.dtype, one));
                      params.push_back(w.emit("stablehlo.reshape", {row}, {}, type_of(slice)));
                    }
                    const std::vector<hlo_value> results = write_region(w, p, region_of, r, hi, params);
                    std::vector<hlo_value> next{w.emit("stablehlo.add", {a[0], w.constant(s32, 1)}, {}, step)};
                    for (std::size_t k = 0; k < carries; ++k) next.push_back(results[k]);
                    for (std::size_t k = 0; k < ys; ++k) {
                      const hlo_value& acc = a[1 + carries + k];
                      const node& y = p[p.region_int(body.results + static_cast<int>(carries + k))];
                      dims one = p[p.region_int(c.outputs + static_cast<int>(carries + k))].shape;
                      one.d[0] = 1;
                      const hlo_value row = w.emit("stablehlo.reshape", {results[carries + k]}, {}, hlo_type(y.dtype, one));
                      std::vector<hlo_value> update{acc, row, at};
                      for (std::size_t d = 0; d < y.shape.rank; ++d) update.push_back(zero);
                      next.push_back(w.emit("stablehlo.dynamic_update_slice", update, {}, acc.type));
                    }
                    return next;
                  }};
  const std::vector<hlo_value> out = w.emit("stablehlo.while", state, {}, types, {condition, loop});
  for (int o = 0; o < c.output_count; ++o) w.set_value(p.region_int(c.outputs + o), out[static_cast<std::size_t>(1 + o)]);
}

// switch as stablehlo.case on the index clamped into the branches' range (a pred index is 0 or 1).
void write_switch(stablehlo_writer& w, const program_view& p, const std::vector<int>& region_of, const frozen_construct& c, int hi) {
  constexpr dtype_code s32 = dtype_code::s32;
  hlo_value index = w.value(c.index);
  if (p[c.index].dtype != s32) index = w.convert(index, s32, {});
  index = w.emit("stablehlo.clamp", {w.constant(s32, 0), index, w.constant(s32, c.region_count - 1)}, {}, hlo_type(s32, {}));
  std::vector<hlo_value> operands;
  for (int k = 0; k < c.input_count; ++k) operands.push_back(w.value(p.region_int(c.inputs + k)));
  std::vector<hlo_region> branches;
  for (int r = c.first_region; r < c.first_region + c.region_count; ++r)
    branches.push_back({{}, [&, r](const std::vector<hlo_value>&) { return write_region(w, p, region_of, r, hi, operands); }});
  std::vector<std::string> types;
  for (int o = 0; o < c.output_count; ++o) types.push_back(type_of(p[p.region_int(c.outputs + o)]));
  const std::vector<hlo_value> out = w.emit("stablehlo.case", {index}, {}, types, branches);
  for (int o = 0; o < c.output_count; ++o) w.set_value(p.region_int(c.outputs + o), out[static_cast<std::size_t>(o)]);
}

void write_construct(stablehlo_writer& w, const program_view& p, const std::vector<int>& region_of, int c, int first_output) {
  const frozen_construct& fc = p.construct(c);
  if (fc.kind == construct_kind::scan) write_scan(w, p, region_of, fc, first_output);
  else write_switch(w, p, region_of, fc, first_output);
}

void write_nodes(stablehlo_writer& w, const program_view& p, const std::vector<int>& region_of, int region, int hi) {
  for (int id = 0; id < hi; ++id) {
    if (region_of[static_cast<std::size_t>(id)] != region) continue;
    const node& n = p[id];
    switch (n.prim->kind) {
      case prim_kind::parameter:
      case prim_kind::region_parameter: break;  // bound by the function or the construct
      case prim_kind::control: {
        const int c = static_cast<int>(n.attr.ints[0]);
        if (w.value(id).name.empty()) write_construct(w, p, region_of, c, id);
        break;
      }
      default: w.lower(id);
    }
  }
}

std::string mesh_text(const mesh_shape& m) {
  std::string s = "<[";
  for (std::size_t a = 0; a < m.rank; ++a) s += (a ? ", \"" : "\"") + std::string(m.name(a)) + "\"=" + std::to_string(m.sizes[a]);
  return s + "]>";
}
std::string list(const std::vector<std::string>& items, std::string_view before = "") {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + std::string(before) + items[i];
  return s;
}
}  // namespace stablehlo_detail

std::string write_stablehlo(const program_view& p, std::string_view module_name, const mesh_placement* placement) {
  using stablehlo_detail::joined;
  using stablehlo_detail::list;
  std::vector<int> region_of(p.size);
  assign_regions(p, 0, static_cast<int>(p.size), region_of);
  stablehlo_writer w(p);
  if (placement) w.mesh = placement->mesh;
  // Each parameter is an argument of @main, or, on a mesh, of the manual computation's block (%local<k>).
  const std::string prefix = placement ? "%local" : "%arg";
  std::vector<std::string> locals(static_cast<std::size_t>(p.parameter_count));
  std::vector<int> node_of(static_cast<std::size_t>(p.parameter_count));
  for (int id = 0; id < static_cast<int>(p.size); ++id)
    if (p[id].prim->kind == prim_kind::parameter) {
      const auto index = static_cast<std::size_t>(p[id].attr.ints[0]);
      locals[index] = hlo_type(p[id].dtype, p[id].shape);
      node_of[index] = id;
      w.set_value(id, {prefix + std::to_string(index), locals[index]});
    }
  if (placement) {
    w.depth = 3;
    const std::size_t leaves = placement->argument_shapes.size();
    for (int id = 0; id < static_cast<int>(p.size); ++id) {
      const node& n = p[id];
      if (n.prim->kind != prim_kind::parameter || static_cast<std::size_t>(n.attr.ints[0]) < leaves) continue;
      std::vector<std::size_t> axes;  // the device's block of the source leaf along dimension 0
      for (std::size_t a = 0; a < placement->mesh.rank; ++a)
        if (n.varying & (1u << a)) axes.push_back(a);
      const hlo_value rows = w.constant(dtype_code::s32, static_cast<double>(n.shape.d[0]));
      std::vector<hlo_value> start{w.value(node_of[static_cast<std::size_t>(n.attr.ints[1])]),
                                   w.emit("stablehlo.multiply", {w.place_along(axes), rows}, {}, rows.type)};
      std::vector<std::int64_t> sizes{static_cast<std::int64_t>(n.shape.d[0])};
      for (std::size_t d = 1; d < n.shape.rank; ++d) {
        start.push_back(w.constant(dtype_code::s32, 0));
        sizes.push_back(static_cast<std::int64_t>(n.shape.d[d]));
      }
      w.set_value(id, w.emit("stablehlo.dynamic_slice", start, hlo_properties{}.i64s("slice_sizes", sizes), hlo_type(n.dtype, n.shape)));
    }
    locals.resize(leaves);
  }
  stablehlo_detail::write_nodes(w, p, region_of, -1, static_cast<int>(p.size));
  std::vector<hlo_value> results;
  for (std::size_t o = 0; o < p.output_count; ++o) results.push_back(w.value(p.outputs[o]));
  std::string body;
  std::vector<std::string> arguments = locals, result_types;
  for (const hlo_value& r : results) result_types.push_back(r.type);
  if (!placement) {
    w.line("\"func.return\"(" + joined(results, true) + ") : (" + joined(results, false) + ") -> ()");
    body = w.take_text();
  } else {
    w.depth = 2;
    w.line("sdy.return " + joined(results, true) + " : " + joined(results, false));
    const mesh_placement& pl = *placement;
    std::vector<std::string> in, out, args, params, axes, names;
    for (int id = 0; id < static_cast<int>(p.size); ++id)
      if (const auto k = static_cast<std::size_t>(p[id].attr.ints[0]); p[id].prim->kind == prim_kind::parameter && k < arguments.size())
        arguments[k] = hlo_type(p[id].dtype, pl.argument_shapes[k]);
    for (std::size_t o = 0; o < p.output_count; ++o) result_types[o] = hlo_type(p[p.outputs[o]].dtype, pl.result_shapes[o]);
    for (std::size_t k = 0; k < locals.size(); ++k) {
      in.push_back("<@mesh, " + pl.argument_shardings[k] + ">");
      args.push_back("%arg" + std::to_string(k));
      params.push_back("%local" + std::to_string(k) + ": " + locals[k]);
    }
    for (std::size_t o = 0; o < p.output_count; ++o) out.push_back("<@mesh, " + pl.result_shardings[o] + ">");
    for (std::size_t a = 0; a < pl.mesh.rank; ++a) axes.push_back("\"" + std::string(pl.mesh.name(a)) + "\"");
    const std::size_t n = p.output_count;
    const std::string r = "%manual";
    for (std::size_t o = 0; o < n; ++o) names.push_back(n == 1 ? r : r + "#" + std::to_string(o));
    body = "    " + r + (n > 1 ? ":" + std::to_string(n) : "") + " = sdy.manual_computation(" + list(args) + ") in_shardings=[" + list(in) +
           "] out_shardings=[" + list(out) + "] manual_axes={" + list(axes) + "} (" + list(params) + ") {\n" + w.take_text() + "    } : (" +
           list(arguments) + ") -> (" + list(result_types) + ")\n";
    body += "    \"func.return\"(" + list(names) + ") : (" + list(result_types) + ") -> ()\n";
    for (std::size_t k = 0; k < arguments.size(); ++k) arguments[k] += " {sdy.sharding = #sdy.sharding<@mesh, " + pl.argument_shardings[k] + ">}";
    for (std::size_t o = 0; o < n; ++o) result_types[o] += " {sdy.sharding = #sdy.sharding<@mesh, " + pl.result_shardings[o] + ">}";
  }
  const std::size_t partitions = placement ? placement->mesh.devices() : 1;
  std::string head = "module @" + std::string(module_name) + " attributes {mhlo.num_partitions = " + std::to_string(partitions) +
                     " : i32, mhlo.num_replicas = 1 : i32} {\n";
  if (placement) head += "  sdy.mesh @mesh = " + stablehlo_detail::mesh_text(placement->mesh) + "\n";
  std::vector<std::string> signature;
  for (std::size_t a = 0; a < arguments.size(); ++a) signature.push_back("%arg" + std::to_string(a) + ": " + arguments[a]);
  head += "  func.func public @main(" + list(signature) + ") -> (" + list(result_types) + ") {\n";
  return head + body + "  }\n}\n";
}

}  // namespace tessel::ir
