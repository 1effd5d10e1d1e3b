// The libraries written in the DSL against JAX's: nn layers and activations against flax and jax.nn, the
// losses against optax (with vjp, jvp and vmap), every optimizer and schedule against optax over a
// trajectory of 100 steps, and every random sampler and key operation against jax.random (bit-exact).
#include "oracle.hpp"
#include "tessel/nn.hpp"
#include "tessel/optim/optim.hpp"
#include "tessel/random.hpp"

namespace tessel::oracle {
namespace {
template <class S>
using f32 = tensor<float, S>;
using U = tensor<std::uint32_t, shape<>>;
namespace o = optim;

struct loss {  // a small regression: mean squared error of tanh(x w) against y
  constexpr auto operator()(auto w, auto x, auto y) const {
    const auto e = tessel::tanh(tessel::matmul(x, w)) - y;
    return tessel::mean(e * e);
  }
};
// 100 steps of an optimizer from w0: the parameters after them.
template <class Opt>
struct trajectory {
  auto operator()(const f32<shape<4, 3>>& w0, const f32<shape<8, 4>>& x, const f32<shape<8, 3>>& y) const {
    const Opt opt;
    auto w = w0;
    auto state = opt.init(w);
    for (int i = 0; i < 100; ++i) {
      const auto g = tessel::grad(loss{})(w, x, y);
      auto [updates, next] = opt.update(g, state, w);
      w = o::apply_updates(w, updates);
      state = std::move(next);
    }
    return w;
  }
};
template <class Sample>
struct sampled {  // a host sampler of a key given by its two words
  Sample sample;
  auto operator()(const U& k0, const U& k1) const { return sample(random::key{k0[0], k1[0]}); }
};
template <class Sample>
sampled(Sample) -> sampled<Sample>;
U word(std::uint32_t v) {
  U u;
  u[0] = v;
  return u;
}
}  // namespace

void library_cases(suite& s) {
  const auto x = uniform<f32<shape<4, 6>>>(1);
  check(s, "dense", [](auto a, auto w, auto b) { return nn::dense(a, w, b); }, x, uniform<f32<shape<6, 5>>>(2), uniform<f32<shape<5>>>(3));
  check(s, "layer_norm", [](auto a, auto g, auto b) { return nn::layer_norm(a, g, b); }, x, uniform<f32<shape<6>>>(4), uniform<f32<shape<6>>>(5));
  check(s, "conv2d", [](auto a, auto k, auto b) { return nn::conv2d(a, k, b); }, uniform<f32<shape<2, 5, 5, 3>>>(6),
        uniform<f32<shape<3, 3, 3, 4>>>(7), uniform<f32<shape<4>>>(8));
  check(s, "relu", [](auto a) { return tessel::relu(a); }, x);
  check(s, "sigmoid", [](auto a) { return tessel::sigmoid(a); }, x);
  check(s, "gelu", [](auto a) { return tessel::gelu(a); }, x);
  check(s, "gelu_exact", [](auto a) { return tessel::gelu<false>(a); }, x);
  check(s, "softmax", [](auto a) { return tessel::softmax(a); }, uniform<f32<shape<4, 6>>>(9, -5, 5));
  check(s, "log_softmax", [](auto a) { return tessel::log_softmax(a); }, uniform<f32<shape<4, 6>>>(10, -5, 5));
  check(s, "softmax_axis0", [](auto a) { return tessel::softmax<0>(a); }, uniform<f32<shape<4, 6>>>(11, -5, 5));
  check(s, "softmax_cross_entropy", [](auto l, auto y) { return nn::softmax_cross_entropy(l, tessel::softmax(y)); },
        uniform<f32<shape<4, 6>>>(12, -3, 3), uniform<f32<shape<4, 6>>>(13, -3, 3));
  tensor<std::int32_t, shape<4>> labels{2, 0, 5, 3};
  check(s, "softmax_cross_entropy_int", [](auto l, auto y) { return nn::softmax_cross_entropy_with_integer_labels(l, y); },
        uniform<f32<shape<4, 6>>>(14, -3, 3), labels);
  check(s, "mean_squared_error", [](auto p, auto y) { return nn::mean_squared_error(p, y); }, x, uniform<f32<shape<4, 6>>>(15));

  // Optimizers and schedules: 100 steps each.
  const auto w0 = uniform<f32<shape<4, 3>>>(20);
  const auto xs = uniform<f32<shape<8, 4>>>(21);
  const auto ys = uniform<f32<shape<8, 3>>>(22, -0.5, 0.5);
  check_call(s, "sgd", "sgd", trajectory<o::sgd<0.1>>{}, w0, xs, ys);
  check_call(s, "sgd_momentum", "sgd_momentum", trajectory<o::sgd<0.1, o::sgd_options{.momentum = 0.9}>>{}, w0, xs, ys);
  check_call(s, "sgd_nesterov", "sgd_nesterov", trajectory<o::sgd<0.1, o::sgd_options{.momentum = 0.9, .nesterov = true}>>{}, w0, xs, ys);
  check_call(s, "adam", "adam", trajectory<o::adam<0.01>>{}, w0, xs, ys);
  check_call(s, "adam_eps_root", "adam_eps_root",
             trajectory<o::adam<0.01, o::adam_options{.b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .eps_root = 1e-8}>>{}, w0, xs, ys);
  check_call(s, "adamw", "adamw", trajectory<o::adamw<0.01, o::adamw_options{.weight_decay = 0.05}>>{}, w0, xs, ys);
  check_call(s, "sgd_linear", "sgd_linear", trajectory<o::sgd<o::linear_schedule{0.2, 0.01, 60, 10}>>{}, w0, xs, ys);
  check_call(s, "adam_cosine", "adam_cosine", trajectory<o::adam<o::cosine_decay_schedule{0.02, 80, 0.1}>>{}, w0, xs, ys);
  check_call(s, "adam_warmup_cosine", "adam_warmup_cosine",
             trajectory<o::adam<o::warmup_cosine_decay_schedule{0.0, 0.02, 10, 100, 0.001}>>{}, w0, xs, ys);
  check_call(s, "clip_sgd", "clip_sgd", trajectory<o::chain<o::clip_by_global_norm<0.05>, o::sgd<0.5>>>{}, w0, xs, ys);

  // Random: samplers and key operations, bit for bit.
  const U k0 = word(0), k1 = word(42);
  check_call(s, "random_uniform", "random_uniform", sampled{[](random::key k) { return random::uniform<shape<5, 7>>(k); }}, k0, k1);
  check_call(s, "random_normal", "random_normal", sampled{[](random::key k) { return random::normal<shape<5, 7>>(k); }}, k0, k1);
  check_call(s, "random_bernoulli", "random_bernoulli", sampled{[](random::key k) { return random::bernoulli<shape<40>>(k, 0.3f); }}, k0, k1);
  check_call(s, "random_permutation", "random_permutation", sampled{[](random::key k) { return random::permutation<50>(k); }}, k0, k1);
  check_call(s, "random_split", "random_split", sampled{[](random::key k) {
               const auto parts = random::split<3>(k);
               tensor<std::uint32_t, shape<3, 2>> t;
               for (std::size_t i = 0; i < 3; ++i) {
                 t[2 * i] = parts[i][0];
                 t[2 * i + 1] = parts[i][1];
               }
               return t;
             }}, word(7), word(1234567));
  check_call(s, "random_fold_in", "random_fold_in",
             sampled{[](random::key k) { return random::uniform<shape<6>>(random::fold_in(random::fold_in(k, 5u), 1000u)); }}, k0, k1);
  check_call(s, "random_seed", "random_seed", [](const U& seed) {
    const random::key k = random::key_from_seed(seed[0]);
    return random::normal<shape<4>>(k);
  }, word(2024));
}
}  // namespace tessel::oracle
