// Control flow and the transforms' own primitives against JAX: scan (forward and reverse, a carry tree),
// cond and switch_ (an index out of range is clamped), checkpoint under each policy, stop_gradient,
// materialize and optimization_barrier (identities), and the traced random samplers (bit-exact with
// jax.random).
#include "oracle.hpp"
#include "tessel/random/traced.hpp"
#include "tessel/transform/cond.hpp"
#include "tessel/transform/remat.hpp"
#include "tessel/transform/scan.hpp"

namespace tessel::oracle {
namespace {
template <class S>
using f32 = tensor<float, S>;
using U = tensor<std::uint32_t, shape<>>;

struct cell {
  constexpr auto operator()(auto h, auto x) const {
    const auto n = tessel::tanh(h * 0.9f + x);
    return std::tuple{n, n * n};
  }
};
constexpr auto block = [](auto x, auto w) { return tessel::sin(tessel::dot_general<axes<1>, axes<0>>(x, w)) * x; };
template <std::uint32_t V>
U word() {
  U u;
  u[0] = V;
  return u;
}
}  // namespace

void control_cases(suite& s) {
  check(s, "scan", [](auto h, auto xs) { return std::get<1>(tessel::scan(cell{}, h, xs)); }, uniform<f32<shape<4>>>(1),
        uniform<f32<shape<5, 4>>>(2));
  check(s, "scan_carry", [](auto h, auto xs) { return std::get<0>(tessel::scan(cell{}, h, xs, {.reverse = true})); },
        uniform<f32<shape<4>>>(3), uniform<f32<shape<6, 4>>>(4));
  check(s, "cond", [](auto x) {
    return tessel::cond(tessel::sum(x) > 0.0f, [](auto v) { return tessel::sin(v) * 2.0f; }, [](auto v) { return v * v; }, x);
  }, uniform<f32<shape<3, 4>>>(5));
  check(s, "cond", "cond@other", [](auto x) {
    return tessel::cond(tessel::sum(x) > 0.0f, [](auto v) { return tessel::sin(v) * 2.0f; }, [](auto v) { return v * v; }, x);
  }, options{}, uniform<f32<shape<3, 4>>>(6, -2, -0.1));
  const auto three = [](auto x, auto i) {
    return tessel::switch_(i, std::tuple{[](auto v) { return v + 1.0f; }, [](auto v) { return tessel::exp(v); }, [](auto v) { return -v; }}, x);
  };
  check(s, "switch", "switch@1", three, options{}, uniform<f32<shape<4>>>(7), tensor<std::int32_t, shape<>>{1});
  check(s, "switch", "switch@clamped", three, options{}, uniform<f32<shape<4>>>(8), tensor<std::int32_t, shape<>>{7});
  check(s, "checkpoint", "checkpoint@nothing", [](auto x, auto w) { return tessel::checkpoint(block, checkpoint_policies::nothing_saveable)(x, w); },
        options{}, uniform<f32<shape<3, 3>>>(9), uniform<f32<shape<3, 3>>>(10));
  check(s, "checkpoint", "checkpoint@dots", [](auto x, auto w) { return tessel::checkpoint(block, checkpoint_policies::dots_saveable)(x, w); },
        options{}, uniform<f32<shape<3, 3>>>(11), uniform<f32<shape<3, 3>>>(12));
  check(s, "checkpoint", "checkpoint@everything",
        [](auto x, auto w) { return tessel::checkpoint(block, checkpoint_policies::everything_saveable)(x, w); }, options{}, uniform<f32<shape<3, 3>>>(13),
        uniform<f32<shape<3, 3>>>(14));
  check(s, "stop_gradient", [](auto x, auto y) { return x * tessel::stop_gradient(x * y); }, uniform<f32<shape<5>>>(15), uniform<f32<shape<5>>>(16));
  check(s, "barriers", [](auto x, auto y) { return tessel::materialize(x * 2.0f) + tessel::optimization_barrier(y, x) * x; },
        uniform<f32<shape<2, 3>>>(17), uniform<f32<shape<2, 3>>>(18));
  check(s, "uniform", "uniform", [](auto k0, auto k1) {
    random::key_words<tracer> key{};
    key.k0 = k0;
    key.k1 = k1;
    return random::uniform<shape<3, 5>>(key);
  }, options{.transforms = false}, word<0>(), word<42>());
  check(s, "fold_in_uniform", "fold_in_uniform", [](auto k0, auto k1, auto d) {
    random::key_words<tracer> key{};
    key.k0 = k0;
    key.k1 = k1;
    return random::uniform<shape<7>>(random::fold_in(key, d));
  }, options{.transforms = false}, word<1234>(), word<98765>(), tensor<std::int32_t, shape<>>{17});
}
}  // namespace tessel::oracle
