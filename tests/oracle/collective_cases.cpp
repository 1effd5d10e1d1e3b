// Every collective of shard_map against jax.shard_map's (check_vma on: the same out_specs are accepted), on meshes of one axis of 4 devices,
// two axes (2 x 2) and three (2 x 2 x 2): psum, pmean, pmax, pmin, pvary, all_gather (tiled and stacked),
// psum_scatter (tiled and not), ppermute, all_to_all (tiled and not) and axis_index, over one axis and over
// several at once.
#include "oracle.hpp"
#include "tessel/shard_map.hpp"

namespace tessel::oracle {
namespace {
template <class S>
using f32 = tensor<float, S>;
using M1 = mesh<axis<"i", 4>>;
using M2 = mesh<axis<"a", 2>, axis<"b", 2>>;
using M3 = mesh<axis<"x", 2>, axis<"y", 2>, axis<"z", 2>>;
constexpr spec_entry ab = mesh_axes<"a", "b">;
constexpr spec_entry xz = mesh_axes<"x", "z">;
}  // namespace

void collective_cases(suite& s) {
  const auto x = uniform<f32<shape<8, 4>>>(1);
  check_call(s, "psum", "psum", shard_map<M1, specs<P<"i">>, P<>>([](auto b) { return psum<"i">(b); }), x);
  check_call(s, "pmean", "pmean", shard_map<M1, specs<P<"i">>, P<>>([](auto b) { return pmean<"i">(b); }), x);
  check_call(s, "pmax", "pmax", shard_map<M1, specs<P<"i">>, P<>>([](auto b) { return pmax<"i">(b); }), x);
  check_call(s, "pmin", "pmin", shard_map<M1, specs<P<"i">>, P<>>([](auto b) { return pmin<"i">(b); }), x);
  check_call(s, "pvary", "pvary", shard_map<M1, specs<P<"i">, P<>>, P<"i">>([](auto b, auto r) { return pvary<"i">(r) * b; }), x,
             uniform<f32<shape<2, 4>>>(2));
  check_call(s, "all_gather_tiled", "all_gather_tiled", shard_map<M1, specs<P<"i">>, P<"i">>([](auto b) { return all_gather<M1, "i", 0, true>(b); }), x);
  check_call(s, "all_gather_stacked", "all_gather_stacked",
             shard_map<M1, specs<P<none, "i">>, P<"i">>([](auto b) { return all_gather<M1, "i", 1>(b); }), x);
  check_call(s, "psum_scatter_tiled", "psum_scatter_tiled",
             shard_map<M1, specs<P<"i">>, P<"i">>([](auto b) { return psum_scatter<M1, "i", 1, true>(b); }), uniform<f32<shape<4, 8>>>(3));
  check_call(s, "psum_scatter", "psum_scatter", shard_map<M1, specs<P<>>, P<"i">>([](auto b) { return psum_scatter<M1, "i", 0>(pvary<"i">(b)); }),
             uniform<f32<shape<4, 3>>>(4));
  check_call(s, "ppermute", "ppermute",
             shard_map<M1, specs<P<"i">>, P<"i">>([](auto b) { return ppermute<"i", edge{0, 1}, edge{1, 2}, edge{2, 3}, edge{3, 0}>(b); }), x);
  check_call(s, "ppermute_partial", "ppermute_partial",
             shard_map<M1, specs<P<"i">>, P<"i">>([](auto b) { return ppermute<"i", edge{0, 2}, edge{3, 1}>(b); }), x);
  check_call(s, "all_to_all_tiled", "all_to_all_tiled",
             shard_map<M1, specs<P<"i">>, P<"i">>([](auto b) { return all_to_all<M1, "i", 1, 0, true>(b); }), x);
  check_call(s, "all_to_all", "all_to_all",
             shard_map<M1, specs<P<none, "i">>, P<none, "i">>([](auto b) { return all_to_all<M1, "i", 0, 1>(b); }),
             uniform<f32<shape<4, 8>>>(5));
  check_call(s, "axis_index", "axis_index",
             shard_map<M1, specs<P<"i">>, P<"i">>([](auto b) { return b + convert_element_type<float>(axis_index<"i">(b)); }), x);
  // Two axes: a sum over one, over both; a gather over one; the index of both.
  const auto y = uniform<f32<shape<4, 6>>>(6);
  check_call(s, "psum_a", "psum_a", shard_map<M2, specs<P<"a", "b">>, P<none, "b">>([](auto b) { return psum<"a">(b); }), y);
  check_call(s, "psum_ab", "psum_ab", shard_map<M2, specs<P<"a", "b">>, P<>>([](auto b) { return psum<ab>(b); }), y);
  check_call(s, "all_gather_b", "all_gather_b",
             shard_map<M2, specs<P<"a", "b">>, P<"a", "b">>([](auto b) { return all_gather<M2, "b", 1, true>(b); }), y);
  check_call(s, "axis_index_ab", "axis_index_ab",
             shard_map<M2, specs<P<ab>>, P<ab>>([](auto b) { return b * convert_element_type<float>(axis_index<ab>(b)); }), y);
  // Three axes (8 devices): a sum over two of them, a permutation and an all_to_all over the third.
  const auto z = uniform<f32<shape<8, 4>>>(7);
  check_call(s, "psum_xz", "psum_xz", shard_map<M3, specs<P<"x", "y">>, P<none, "y">>([](auto b) { return psum<xz>(pvary<"z">(b)); }), z);
  check_call(s, "ppermute_z", "ppermute_z",
             shard_map<M3, specs<P<xz, "y">>, P<xz, "y">>([](auto b) { return ppermute<"z", edge{0, 1}, edge{1, 0}>(b) - b; }), z);
  check_call(s, "all_to_all_y", "all_to_all_y",
             shard_map<M3, specs<P<"x", "y">>, P<"x", "y">>([](auto b) { return all_to_all<M3, "y", 0, 1, true>(b); }), z);
}
}  // namespace tessel::oracle
