// Transforms and shard_map composed, inside the body and outside it, against JAX: grad, vmap, vmap of grad
// (a replicated argument's cotangent is summed over the axes the body varies along, vmap or not), jvp, a
// scan and a cond in the body; on one and two mesh axes.
#include "oracle.hpp"
#include "tessel/shard_map.hpp"
#include "tessel/transform/cond.hpp"
#include "tessel/transform/scan.hpp"

namespace tessel::oracle {
namespace {
template <class S>
using f32 = tensor<float, S>;
using M1 = mesh<axis<"i", 4>>;
using M2 = mesh<axis<"a", 2>, axis<"b", 2>>;

struct example_loss {  // one example's loss, of a replicated w
  constexpr auto operator()(auto w, auto x) const { return tessel::sum(tessel::tanh(w * x)); }
};
struct body_loss {  // the whole batch's, summed over the devices
  constexpr auto operator()(auto w, auto xb) const { return psum<"i">(tessel::sum(tessel::tanh(w * xb))); }
};
struct ring_step {  // a scan step that passes the carry around the ring
  constexpr auto operator()(auto h, auto x) const {
    const auto n = tessel::tanh(ppermute<"i", edge{0, 1}, edge{1, 2}, edge{2, 3}, edge{3, 0}>(h) + x);
    return std::tuple{n, n};
  }
};
}  // namespace

void shard_transform_cases(suite& s) {
  const auto w = uniform<f32<shape<3>>>(1);
  const auto x = uniform<f32<shape<8, 3>>>(2);
  const auto xs = uniform<f32<shape<5, 8, 3>>>(3);
  // grad from outside, with respect to the replicated and to the split argument
  check_call(s, "grad_outside_w", "grad_outside_w", grad<0>(shard_map<M1, specs<P<>, P<"i">>, P<>>(body_loss{})), w, x);
  check_call(s, "grad_outside_x", "grad_outside_x", grad<1>(shard_map<M1, specs<P<>, P<"i">>, P<>>(body_loss{})), w, x);
  // grad inside the body: w's cotangent is summed over "i", so it is replicated
  check_call(s, "grad_inside", "grad_inside",
             shard_map<M1, specs<P<>, P<"i">>, P<>>([](auto w, auto xb) { return grad(example_loss{})(w, xb); }), w, x);
  // vmap of grad inside the body: per-example gradients, each summed over "i" as without vmap
  check_call(s, "vmap_grad_inside", "vmap_grad_inside",
             shard_map<M1, specs<P<>, P<"i">>, P<"i">>([](auto w, auto xb) { return vmap(grad(example_loss{}), in_axes<none, 0>)(w, xb); }),
             w, x);
  // vmap of grad of a shard_map, from outside
  check_call(s, "vmap_grad_outside", "vmap_grad_outside",
             vmap(grad(shard_map<M1, specs<P<>, P<"i">>, P<>>(body_loss{})), in_axes<none, 0>), w, xs);
  // vmap of a shard_map from outside, and inside the body
  check_call(s, "vmap_outside", "vmap_outside",
             vmap(shard_map<M1, specs<P<"i">>, P<"i">>([](auto b) { return b * psum<"i">(b); })), xs);
  check_call(s, "vmap_inside", "vmap_inside",
             shard_map<M1, specs<P<none, "i">>, P<none, "i">>([](auto b) { return vmap([](auto r) { return r * pmax<"i">(r); })(b); }), xs);
  // jvp inside the body
  check_call(s, "jvp_inside", "jvp_inside", shard_map<M1, specs<P<"i">, P<"i">>, P<"i">>([](auto b, auto t) {
               return std::get<1>(jvp([](auto v) { return tessel::sin(v) * psum<"i">(v); }, std::make_tuple(b), std::make_tuple(t)));
             }), x, uniform<f32<shape<8, 3>>>(4));
  // a scan whose step is a collective, and its gradient from outside
  const auto h0 = uniform<f32<shape<4, 3>>>(5);
  const auto seq = uniform<f32<shape<6, 4, 3>>>(6);
  check_call(s, "scan_ring", "scan_ring",
             shard_map<M1, specs<P<"i">, P<none, "i">>, P<none, "i">>([](auto h, auto q) { return std::get<1>(tessel::scan(ring_step{}, h, q)); }),
             h0, seq);
  check_call(s, "grad_scan_ring", "grad_scan_ring", grad<0>(shard_map<M1, specs<P<"i">, P<none, "i">>, P<>>([](auto h, auto q) {
               return psum<"i">(tessel::sum(std::get<0>(tessel::scan(ring_step{}, h, q))));
             })), h0, seq);
  // cond on a value that differs between devices
  check_call(s, "cond_inside", "cond_inside", shard_map<M1, specs<P<"i">>, P<"i">>([](auto b) {
               return tessel::cond(tessel::sum(b) > 0.0f, [](auto v) { return v * 2.0f; }, [](auto v) { return -v; }, b);
             }), x);
  // two axes: a data axis and a model axis, the loss summed over both; grad from outside
  check_call(s, "grad_2d", "grad_2d", grad<0>(shard_map<M2, specs<P<none, "b">, P<"a">>, P<>>([](auto wb, auto xb) {
               return psum<mesh_axes<"a", "b">>(tessel::sum(tessel::tanh(dot_general<axes<1>, axes<0>>(xb, wb))));
             })), uniform<f32<shape<3, 4>>>(7), uniform<f32<shape<6, 3>>>(8));
}
}  // namespace tessel::oracle
