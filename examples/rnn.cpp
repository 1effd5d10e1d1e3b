// An Elman RNN trained with backpropagation through time, its time loop a tessel::scan.
//
// Task (synthetic, a memory test): the input is a sequence of random numbers in [-1, 1]; the target at
// step t is the input of step t - 2 (zero for the first two steps), so the network must carry what it saw
// in its state. The cell is h' = tanh(h W + x U + b) with a linear readout y = h V + c; the loss is the
// mean squared error over every step of a batch. One jitted train step holds the scan, its gradient (a
// reverse scan over the saved states, transform/control_vjp.hpp) and an Adam update.
//
//   rnn [--steps N] [--seed S]     prints the loss every 50 steps; fails if the loss did not fall
#include <tessel/nn.hpp>
#include <tessel/tessel.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

namespace {
using tessel::shape;
using tessel::tensor;

constexpr std::size_t time_steps = 20, batch = 32, hidden = 32, delay = 2;

template <template <class, class> class T = tensor>
struct elman {
  BOOST_HANA_DEFINE_STRUCT(elman, (T<float, shape<hidden, hidden>>, w), (T<float, shape<1, hidden>>, u),
                           (T<float, shape<hidden>>, b), (T<float, shape<hidden, 1>>, v), (T<float, shape<1>>, c));
};

using sequence = tensor<float, shape<time_steps, batch, 1>>;
using optimizer = tessel::optim::adam<1e-2>;

// Mean squared error of the readout over every step: the forward pass is one scan over time.
constexpr auto loss = [](auto p, auto xs, auto targets) {
  auto h0 = tessel::broadcast_to<shape<batch, hidden>>(p.b) * 0.0f;
  auto [last, ys] = tessel::scan([&](auto h, auto x) {
    auto next = tessel::tanh(tessel::matmul(h, p.w) + tessel::matmul(x, p.u) + p.b);
    return std::tuple{next, tessel::matmul(next, p.v) + p.c};
  }, h0, xs);
  (void)last;
  auto err = ys - targets;
  return tessel::mean(err * err);
};

constexpr auto train_step = [](auto p, auto state, auto xs, auto targets) {
  auto [value, grads] = tessel::value_and_grad(loss)(p, xs, targets);
  auto [updates, next_state] = optimizer{}.update(grads, state, p);
  return std::tuple{value, tessel::optim::apply_updates(p, updates), next_state};
};

template <class T>
void fill_uniform(T& t, std::mt19937& gen, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  for (auto& v : t) v = d(gen);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 400;
  unsigned seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seed") == 0) seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: rnn [--steps N] [--seed S]\n");
      return 2;
    }
  }
  std::mt19937 gen(seed);
  elman<> params;
  fill_uniform(params.w, gen, 1.0f / std::sqrt(static_cast<float>(hidden)));
  fill_uniform(params.u, gen, 1.0f);
  fill_uniform(params.v, gen, 1.0f / std::sqrt(static_cast<float>(hidden)));
  params.b.fill(0.0f);
  params.c.fill(0.0f);
  auto state = optimizer{}.init(params);
  const auto step = tessel::jit(train_step);

  sequence xs, targets;
  float first = 0, last = 0;
  for (int s = 0; s < steps; ++s) {
    fill_uniform(xs, gen, 1.0f);
    for (std::size_t t = 0; t < time_steps; ++t)
      for (std::size_t b = 0; b < batch; ++b)
        targets[t * batch + b] = t >= delay ? xs[(t - delay) * batch + b] : 0.0f;
    auto [value, next_params, next_state] = step(params, state, xs, targets);
    params = next_params;
    state = next_state;
    if (s == 0) first = value[0];
    last = value[0];
    if (s % 50 == 0 || s == steps - 1) std::printf("step %4d  loss %.5f\n", s, static_cast<double>(value[0]));
  }
  // Predicting zero scores the inputs' variance, 1/3 here; remembering them scores near 0.
  std::printf("loss %.5f -> %.5f (%s)\n", static_cast<double>(first), static_cast<double>(last), last < 0.5f * first ? "learned" : "did not learn");
  return last < 0.5f * first ? 0 : 1;
}
