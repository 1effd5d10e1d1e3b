// Compositions of transforms. Each function below is itself a transform (grad, jvp) of a program with control
// flow; `check` then runs vjp, jvp and vmap of it, so each case judges compositions of depth up to three
// (vmap(grad(scan)), vjp(grad(cond)), jvp(grad(switch)), ...). remat_composition_cases.cpp has the rest.
#include "oracle.hpp"
#include "tessel/transform/cond.hpp"
#include "tessel/transform/scan.hpp"

namespace tessel::oracle {
namespace {
template <class S>
using f32 = tensor<float, S>;

struct cell {
  constexpr auto operator()(auto h, auto x) const {
    const auto n = tessel::tanh(h * x + 0.5f);
    return std::tuple{n, n};
  }
};
struct scan_loss {
  constexpr auto operator()(auto h, auto xs) const { return tessel::sum(std::get<1>(tessel::scan(cell{}, h, xs)) * h); }
};
struct cond_loss {
  constexpr auto operator()(auto x) const {
    return tessel::sum(tessel::cond(tessel::sum(x) > 0.0f, [](auto v) { return tessel::sin(v) * v; }, [](auto v) { return tessel::exp(v); }, x));
  }
};
struct switch_loss {
  constexpr auto operator()(auto x, auto i) const {
    return tessel::sum(
        tessel::switch_(i, std::tuple{[](auto v) { return v * v; }, [](auto v) { return tessel::tanh(v); }, [](auto v) { return tessel::log1p(v * v); }}, x));
  }
};
}  // namespace

void composition_cases(suite& s) {
  const auto x = uniform<f32<shape<3, 3>>>(1, -1, 1);
  check(s, "grad_grad", [](auto v) { return grad([](auto u) { return tessel::sum(tessel::sin(u) * u * u); })(v); }, x);
  check(s, "grad_scan", [](auto h, auto xs) { return grad(scan_loss{})(h, xs); }, uniform<f32<shape<3>>>(2), uniform<f32<shape<4, 3>>>(3));
  check(s, "grad_scan_xs", [](auto h, auto xs) { return grad<1>(scan_loss{})(h, xs); }, uniform<f32<shape<3>>>(4), uniform<f32<shape<4, 3>>>(5));
  check(s, "grad_cond", [](auto v) { return grad(cond_loss{})(v); }, x);
  check(s, "grad_cond", "grad_cond@other", [](auto v) { return grad(cond_loss{})(v); }, options{}, uniform<f32<shape<3, 3>>>(6, -2, -1));
  check(s, "grad_switch", "grad_switch", [](auto v, auto i) { return grad(switch_loss{})(v, i); }, options{-1, 3}, x, tensor<std::int32_t, shape<>>{2});
}
}  // namespace tessel::oracle
