// Per-example gradient norms with vmap(grad(...)), and DP-SGD style clipping, for an RNN whose time loop
// is a tessel::scan.
//
// Task (synthetic, as examples/rnn.cpp): each example is a sequence of random numbers in [-1, 1] whose
// target at step t is the input of step t - 2. The loss of ONE example is the mean squared error of the
// readout over its steps; vmap(grad(loss)) maps it over a batch, giving every example's own gradient
// (of each weight) in one program: the scan is batched whole (transform/control_batching.hpp), its
// gradient is a reverse scan, and both run once for the batch, not once per example.
//
// The example checks those gradients against a loop of grad over single examples, prints their norms,
// and trains with DP-SGD's update: each example's gradient clipped to norm C, averaged, Gaussian noise
// of standard deviation sigma C / B added.
//
//   per_example_grads [--steps N] [--seed S]     fails if the gradients differ or the loss did not fall
#include <tessel/tessel.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>

namespace {
using tessel::in_axes;
using tessel::none;
using tessel::shape;
using tessel::tensor;

constexpr std::size_t time_steps = 12, batch = 32, hidden = 16, delay = 2;
constexpr float clip_norm = 0.1f, noise_multiplier = 0.5f, learning_rate = 1.0f;

using W = tensor<float, shape<hidden, hidden>>;
using U = tensor<float, shape<1, hidden>>;
using Bias = tensor<float, shape<hidden>>;
using V = tensor<float, shape<hidden, 1>>;
using sequence = tensor<float, shape<time_steps, 1>>;               // one example
using sequences = tensor<float, shape<batch, time_steps, 1>>;       // a batch of them

// The loss of one example: the cell h' = tanh(h W + x U + b), readout y = h V, over the sequence (a scan).
constexpr auto loss = [](auto w, auto u, auto b, auto v, auto xs, auto targets) {
  auto h0 = b * 0.0f;
  auto [last, ys] = tessel::scan([&](auto h, auto x) {
    auto next = tessel::tanh(tessel::matmul(h, w) + tessel::matmul(x, u) + b);
    return std::tuple{next, tessel::matmul(next, v)};
  }, h0, xs);
  (void)last;
  auto err = ys - targets;
  return tessel::mean(err * err);
};

constexpr auto per_example_grads = tessel::vmap(tessel::grad<0, 1, 2, 3>(loss), in_axes<none, none, none, none, 0, 0>);
constexpr auto batch_loss = [](auto w, auto u, auto b, auto v, auto xs, auto targets) {
  return tessel::mean(tessel::vmap(loss, in_axes<none, none, none, none, 0, 0>)(w, u, b, v, xs, targets));
};

template <class T>
void fill_uniform(T& t, std::mt19937& gen, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  for (auto& v : t) v = d(gen);
}

// Example e's part of a batched gradient (the batch is the leading axis).
template <class T>
const float* part(const T& batched, std::size_t e) {
  return batched.data() + e * (T::shape_type::size / batch);
}
template <class T>
constexpr std::size_t part_size() {
  return T::shape_type::size / batch;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 300;
  unsigned seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seed") == 0) seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: per_example_grads [--steps N] [--seed S]\n");
      return 2;
    }
  }
  std::mt19937 gen(seed);
  W w;
  U u;
  Bias b;
  V v;
  fill_uniform(w, gen, 1.0f / std::sqrt(static_cast<float>(hidden)));
  fill_uniform(u, gen, 1.0f);
  fill_uniform(v, gen, 1.0f / std::sqrt(static_cast<float>(hidden)));
  b.fill(0.0f);

  sequences xs, targets;
  auto draw = [&] {
    fill_uniform(xs, gen, 1.0f);
    for (std::size_t e = 0; e < batch; ++e)
      for (std::size_t t = 0; t < time_steps; ++t)
        targets[e * time_steps + t] = t >= delay ? xs[e * time_steps + t - delay] : 0.0f;
  };
  draw();

  // 1. Every example's gradient at once, against grad on each example alone.
  const auto grads = tessel::jit(per_example_grads);
  const auto one = tessel::jit(tessel::grad<0, 1, 2, 3>(loss));
  const auto [gw, gu, gb, gv] = grads(w, u, b, v, xs, targets);
  double worst = 0;
  for (std::size_t e = 0; e < batch; ++e) {
    sequence x, y;
    for (std::size_t t = 0; t < time_steps; ++t) {
      x[t] = xs[e * time_steps + t];
      y[t] = targets[e * time_steps + t];
    }
    const auto [ew, eu, eb, ev] = one(w, u, b, v, x, y);
    auto compare = [&](const auto& batched, const auto& single) {
      for (std::size_t i = 0; i < std::remove_cvref_t<decltype(single)>::shape_type::size; ++i) {
        const double d = std::abs(static_cast<double>(part(batched, e)[i]) - static_cast<double>(single[i]));
        worst = std::max(worst, d / (1e-3 + std::abs(static_cast<double>(single[i]))));
      }
    };
    compare(gw, ew);
    compare(gu, eu);
    compare(gb, eb);
    compare(gv, ev);
  }
  const bool match = worst < 1e-3;
  std::printf("vmap(grad(loss)) vs grad per example: largest relative difference %.2e (%s)\n", worst, match ? "match" : "MISMATCH");

  // 2. Per-example gradient norms (all weights together).
  auto norms = [&](const auto& g) {
    std::array<float, batch> n{};
    for (std::size_t e = 0; e < batch; ++e) {
      double s = 0;
      auto add = [&](const auto& t) {
        for (std::size_t i = 0; i < part_size<std::remove_cvref_t<decltype(t)>>(); ++i) s += static_cast<double>(part(t, e)[i]) * part(t, e)[i];
      };
      std::apply([&](const auto&... t) { (add(t), ...); }, g);
      n[e] = static_cast<float>(std::sqrt(s));
    }
    return n;
  };
  const auto first_norms = norms(std::tuple{gw, gu, gb, gv});
  std::printf("per-example gradient norms (first 8 of %zu):", batch);
  for (std::size_t e = 0; e < 8; ++e) std::printf(" %.4f", static_cast<double>(first_norms[e]));
  std::printf("\n");

  // 3. DP-SGD: clip each example's gradient to norm C, average, add noise, step.
  const auto evaluate = tessel::jit(batch_loss);
  std::normal_distribution<float> noise(0.0f, noise_multiplier * clip_norm / static_cast<float>(batch));
  float first = 0, last = 0;
  std::size_t clipped = 0;
  for (int s = 0; s < steps; ++s) {
    draw();
    const auto g = grads(w, u, b, v, xs, targets);
    const auto n = norms(g);
    auto update = [&](auto& param, const auto& batched) {
      constexpr std::size_t size = std::remove_cvref_t<decltype(param)>::shape_type::size;
      for (std::size_t i = 0; i < size; ++i) {
        float mean = 0;
        for (std::size_t e = 0; e < batch; ++e) mean += part(batched, e)[i] * std::min(1.0f, clip_norm / std::max(n[e], 1e-12f));
        param[i] -= learning_rate * (mean / static_cast<float>(batch) + noise(gen));
      }
    };
    update(w, std::get<0>(g));
    update(u, std::get<1>(g));
    update(b, std::get<2>(g));
    update(v, std::get<3>(g));
    for (float x : n) clipped += x > clip_norm;
    const float value = evaluate(w, u, b, v, xs, targets)[0];
    if (s == 0) first = value;
    last = value;
    if (s % 50 == 0 || s == steps - 1) std::printf("step %4d  loss %.5f\n", s, static_cast<double>(value));
  }
  const bool learned = last < 0.7f * first;
  std::printf("clipped %zu of %zu per-example gradients to norm %.2f\n", clipped, static_cast<std::size_t>(steps) * batch,
              static_cast<double>(clip_norm));
  std::printf("loss %.5f -> %.5f (%s)\n", static_cast<double>(first), static_cast<double>(last), learned ? "learned" : "did not learn");
  return match && learned ? 0 : 1;
}
