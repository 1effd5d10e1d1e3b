#pragma once
// The 784-256-10 MLP train step (relu, softmax cross-entropy with integer labels, Adam 1e-3) at batch
// 128 in f32, as bench/peers.py writes it for JAX and PyTorch 2: bench/train_step.cpp times its calls,
// bench/first_step.cpp the compile and first call.
#include <cstddef>
#include <cstdint>
#include <tuple>

#include <tessel/nn.hpp>
#include <tessel/optim/optim.hpp>
#include <tessel/tessel.hpp>

namespace mlp_step {
using tessel::shape;
using tessel::tensor;

inline constexpr std::size_t batch = 128, in = 784, hidden = 256, classes = 10;

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<in, hidden>>, w1), (T<float, shape<hidden>>, b1),
                           (T<float, shape<hidden, classes>>, w2), (T<float, shape<classes>>, b2));
};

struct loss_fn {
  template <class P, class X, class Y>
  constexpr auto operator()(P p, X x, Y y) const {
    auto h = tessel::relu(tessel::nn::dense(x, p.w1, p.b1));
    auto logits = tessel::nn::dense(h, p.w2, p.b2);
    return tessel::mean(tessel::nn::softmax_cross_entropy_with_integer_labels(logits, y));
  }
};

using optimizer = tessel::optim::adam<1e-3>;

// Forward, gradients and the Adam update in one program; only the loss leaves it besides the new state.
struct train_step {
  template <class P, class S, class X, class Y>
  constexpr auto operator()(P params, S state, X x, Y y) const {
    auto [loss, grads] = tessel::value_and_grad(loss_fn{})(params, x, y);
    auto [updates, next] = optimizer{}.update(grads, state, params);
    return std::make_tuple(tessel::optim::apply_updates(params, updates), next, loss);
  }
};

// Glorot-uniform weights and zero biases from seed 0, an input batch in [0, 1) and labels i % 10.
struct inputs {
  mlp<> params;
  tensor<float, shape<batch, in>> x;
  tensor<std::int32_t, shape<batch>> y;
};

inline inputs make_inputs() {
  inputs d;
  tessel::random::key key = tessel::random::key_from_seed(0);
  const auto keys = tessel::random::split<2>(key);
  d.params.w1 = tessel::nn::glorot_uniform<shape<in, hidden>>(keys[0]);
  d.params.w2 = tessel::nn::glorot_uniform<shape<hidden, classes>>(keys[1]);
  d.x = tessel::random::uniform<shape<batch, in>>(tessel::random::fold_in(key, 7));
  for (std::size_t i = 0; i < batch; ++i) d.y[i] = static_cast<std::int32_t>(i % classes);
  return d;
}

}  // namespace mlp_step
