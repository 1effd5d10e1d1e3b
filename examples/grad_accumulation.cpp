// Gradient accumulation: a small MLP trained on batches of 256 whose gradient is computed as 8
// micro-batches of 32 (tessel::accumulate_gradients<8>, a scan over the micro-batches).
//
// Data: Fashion-MNIST (images scaled to [0, 1]) when its files are there (Debian's dataset-fashion-mnist,
// or $TESSEL_FASHION_MNIST_DIR), else synthetic: each image half a fixed random prototype of its class
// (10 of them), half uniform noise, centred. Prints the loss going down, the difference between the
// accumulated gradient and the whole batch's (value_and_grad on all 256 rows), and the peak arena bytes
// of the train step's plan for M = 1 (the whole batch at once) and M = 8.
//
//   grad_accumulation [--steps N] [--seed S] [--synthetic]
// fails if the loss (mean of the last 10 steps) did not fall below half the first or the gradients differ.
#include <tessel/nn.hpp>
#include <tessel/tessel.hpp>
#include <tessel/data/idx.hpp>
#include <tessel/transform/accumulate.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <random>
#include <tuple>

namespace {
using tessel::shape;
using tessel::tensor;

constexpr std::size_t batch = 256, micro_batches = 8, inputs = 784, hidden = 64, classes = 10;

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<inputs, hidden>>, w1), (T<float, shape<hidden>>, b1),
                           (T<float, shape<hidden, classes>>, w2), (T<float, shape<classes>>, b2));
};
using images = tensor<float, shape<batch, inputs>>;
using labels = tensor<float, shape<batch, classes>>;

constexpr auto loss = [](auto p, auto x, auto y) {
  auto h = tessel::relu(tessel::matmul(x, p.w1) + p.b1);
  return tessel::mean(tessel::nn::softmax_cross_entropy(tessel::matmul(h, p.w2) + p.b2, y));
};

// One SGD step on the gradient accumulated over M micro-batches.
template <std::size_t M>
constexpr auto train_step = [](auto p, auto x, auto y) {
  auto [value, grads] = tessel::accumulate_gradients<M>(loss)(p, x, y);
  auto next = tessel::tree_map([](auto w, auto g) { return w - g * 0.2f; }, p, grads);
  return std::tuple{value, next};
};

template <class T>
void fill_uniform(T& t, std::mt19937& gen, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  for (auto& v : t) v = d(gen);
}

template <class T>
double max_abs_difference(const T& a, const T& b) {
  double m = 0;
  for (std::size_t i = 0; i < T::shape_type::size; ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 100;
  unsigned seed = 0;
  bool synthetic = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--synthetic") == 0) synthetic = true;
    else if (i + 1 < argc && std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[++i]);
    else if (i + 1 < argc && std::strcmp(argv[i], "--seed") == 0) seed = static_cast<unsigned>(std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: grad_accumulation [--steps N] [--seed S] [--synthetic]\n");
      return 2;
    }
  }
  std::mt19937 gen(seed);
  std::optional<tessel::data::fashion_mnist> fm;
  if (!synthetic) {
    try {
      fm = tessel::data::load_fashion_mnist();
    } catch (const std::exception& e) {
      std::printf("no Fashion-MNIST (%s): synthetic data\n", e.what());
    }
  }
  std::printf("data: %s\n", fm ? "Fashion-MNIST training images" : "synthetic");
  tensor<float, shape<classes, inputs>> prototypes;
  for (auto& v : prototypes) v = std::uniform_real_distribution<float>(0.0f, 1.0f)(gen);
  std::uniform_int_distribution<std::size_t> pick(0, tessel::data::fashion_mnist_train_size - batch);
  auto draw = [&](images& x, labels& y) {
    y.fill(0.0f);
    if (fm) {
      const auto pixels = fm->train_images.data<std::uint8_t>();
      const auto classes_of = fm->train_labels.data<std::uint8_t>();
      const std::size_t first = pick(gen);
      for (std::size_t r = 0; r < batch; ++r) {
        for (std::size_t k = 0; k < inputs; ++k) x[r * inputs + k] = static_cast<float>(pixels[(first + r) * inputs + k]) / 255.0f;
        y[r * classes + classes_of[first + r]] = 1.0f;
      }
      return;
    }
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::uniform_int_distribution<std::size_t> label(0, classes - 1);
    for (std::size_t r = 0; r < batch; ++r) {
      const std::size_t c = label(gen);
      for (std::size_t k = 0; k < inputs; ++k) x[r * inputs + k] = 0.5f * prototypes[c * inputs + k] + 0.5f * unit(gen) - 0.5f;
      y[r * classes + c] = 1.0f;
    }
  };
  mlp<> params;
  fill_uniform(params.w1, gen, 1.0f / std::sqrt(static_cast<float>(inputs)));
  fill_uniform(params.w2, gen, 1.0f / std::sqrt(static_cast<float>(hidden)));
  params.b1.fill(0.0f);
  params.b2.fill(0.0f);

  // The accumulated gradient against the whole batch's, at the initial parameters.
  images x;
  labels y;
  draw(x, y);
  const auto [whole_value, whole] = tessel::value_and_grad(loss)(params, x, y);
  const auto [acc_value, acc] = tessel::accumulate_gradients<micro_batches>(loss)(params, x, y);
  const double grad_diff = std::max({max_abs_difference(acc.w1, whole.w1), max_abs_difference(acc.b1, whole.b1),
                                     max_abs_difference(acc.w2, whole.w2), max_abs_difference(acc.b2, whole.b2)});
  std::printf("batch %zu as %zu micro-batches of %zu: loss %.7f vs whole batch %.7f, max |gradient difference| %.3g\n", batch,
              micro_batches, batch / micro_batches, static_cast<double>(acc_value[0]), static_cast<double>(whole_value[0]),
              grad_diff);

  using one = decltype(tessel::jit(train_step<1>))::traced_for<mlp<>, images, labels>;
  using eight = decltype(tessel::jit(train_step<micro_batches>))::traced_for<mlp<>, images, labels>;
  std::printf("peak arena bytes of the train step: M = 1 %zu, M = %zu %zu (program nodes %zu and %zu)\n", one::plan.arena_bytes,
              micro_batches, eight::plan.arena_bytes, one::nodes, eight::nodes);

  const auto step = tessel::jit(train_step<micro_batches>);
  float first = 0, last = 0;
  for (int s = 0; s < steps; ++s) {
    draw(x, y);
    auto [value, next] = step(params, x, y);
    params = next;
    if (s == 0) first = value[0];
    if (s >= steps - 10) last += value[0] / static_cast<float>(std::min(steps, 10));
    if (s % 20 == 0 || s == steps - 1) std::printf("step %4d  loss %.5f\n", s, static_cast<double>(value[0]));
  }
  const bool learned = last < 0.5f * first, agree = grad_diff < 1e-5;
  std::printf("loss %.5f -> %.5f (last 10 steps) (%s), gradients %s\n", static_cast<double>(first), static_cast<double>(last),
              learned ? "learned" : "did not learn", agree ? "agree" : "differ");
  return learned && agree ? 0 : 1;
}
