// Compositions of transforms with checkpoint (each policy), custom_vjp, value_and_grad, jvp and vmap: each
// function is a transform of a program, and `check` runs vjp, jvp and vmap of it (depth up to three).
#include "oracle.hpp"
#include "tessel/transform/custom_vjp.hpp"
#include "tessel/transform/remat.hpp"

namespace tessel::oracle {
namespace {
template <class S>
using f32 = tensor<float, S>;

constexpr auto block = [](auto x, auto w) { return tessel::tanh(tessel::dot_general<axes<1>, axes<0>>(x, w)) * x; };
template <class Policy>
struct remat_loss {
  constexpr auto operator()(auto x, auto w) const { return tessel::sum(tessel::checkpoint(block, Policy{})(x, w) * w); }
};
constexpr auto softplus_f = [](auto x) { return tessel::log(1.0f + tessel::exp(x)); };
constexpr auto softplus_fwd = [](auto x) {
  auto e = tessel::exp(x);
  return std::make_tuple(tessel::log(1.0f + e), e);
};
constexpr auto softplus_bwd = [](auto e, auto ct) { return std::make_tuple(ct * e / (1.0f + e) * 2.0f); };  // a rule f's nodes do not give
constexpr auto softplus = custom_vjp(softplus_f, softplus_fwd, softplus_bwd);
}  // namespace

void remat_composition_cases(suite& s) {
  const auto x = uniform<f32<shape<3, 3>>>(1, -1, 1);
  check(s, "grad_checkpoint_nothing", "grad_checkpoint_nothing", [](auto a, auto w) { return grad(remat_loss<decltype(checkpoint_policies::nothing_saveable)>{})(a, w); },
        options{}, x, uniform<f32<shape<3, 3>>>(7));
  check(s, "grad_checkpoint_dots", "grad_checkpoint_dots", [](auto a, auto w) { return grad(remat_loss<decltype(checkpoint_policies::dots_saveable)>{})(a, w); },
        options{}, x, uniform<f32<shape<3, 3>>>(8));
  check(s, "grad_checkpoint_everything", "grad_checkpoint_everything",
        [](auto a, auto w) { return grad(remat_loss<decltype(checkpoint_policies::everything_saveable)>{})(a, w); }, options{}, x,
        uniform<f32<shape<3, 3>>>(9));
  // custom_vjp: reverse mode takes the author's rule (twice f's derivative); jvp is left out, as JAX
  // refuses forward mode through a custom_vjp.
  check(s, "grad_custom_vjp", "grad_custom_vjp", [](auto v) { return grad([](auto u) { return tessel::sum(softplus(u)); })(v); },
        options{.jvp = false}, x);
  check(s, "value_and_grad", [](auto v) {
    const auto [value, g] = value_and_grad([](auto u) { return tessel::sum(tessel::tanh(u) * u); })(v);
    return g * value;
  }, x);
  check(s, "jvp_of_jvp", [](auto v, auto t) {
    return std::get<1>(jvp([](auto u) { return tessel::sin(u) * u; }, std::make_tuple(v), std::make_tuple(t)));
  }, x, uniform<f32<shape<3, 3>>>(10));
  check(s, "vmap_in_grad", [](auto w, auto xs) {
    return grad([](auto w2, auto xs2) { return tessel::sum(vmap([](auto a, auto b) { return tessel::tanh(a * b); }, in_axes<none, 0>)(w2, xs2)); })(w, xs);
  }, uniform<f32<shape<3>>>(11), uniform<f32<shape<4, 3>>>(12));
}
}  // namespace tessel::oracle
