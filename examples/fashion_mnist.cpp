// Trains a classifier on Fashion-MNIST (Debian's dataset-fashion-mnist) with tessel: the whole train
// step (forward, loss, gradients, Adam update) is one jitted function, planned at compile time.
//
//   fashion_mnist [--model mlp|cnn] [--epochs 10] [--batch-size 128] [--learning-rate 0.001]
//                 [--precision f32|bf16] [--seed 0] [--data-dir DIR]
#include <tessel/nn.hpp>
#include <tessel/tessel.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {
using tessel::shape;
using tessel::tensor;

constexpr std::size_t pixels = 28 * 28;
constexpr std::size_t classes = 10;
constexpr std::size_t eval_batch = 1000;  // divides the 10000 test images

struct options {
  std::string model = "mlp";
  int epochs = 10;
  int batch_size = 128;
  float learning_rate = 1e-3f;
  std::string precision = "f32";
  std::uint32_t seed = 0;
  std::string data_dir;
  int steps = 0;  // 0: every full batch of the epoch
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: fashion_mnist [options]\n"
               "  --model M              mlp (784-512-256-10, relu) or cnn (conv 3x3x32, maxpool 2, conv 3x3x64,\n"
               "                         maxpool 2, dense 128, dense 10: the classic small CNN)\n"
               "  --epochs N             passes over the 60000 training images (default 10)\n"
               "  --batch-size N         32, 64, 128 (default) or 256: each size is its own compiled step\n"
               "  --learning-rate X      Adam's peak learning rate, decayed to 0 by a cosine (default 0.001)\n"
               "  --precision P          f32 (default) or bf16: bf16 activations and gradients, f32 master\n"
               "                         weights, optimizer state and loss\n"
               "  --seed N               the PRNG seed for initialisation and shuffling (default 0)\n"
               "  --data-dir DIR         where the *-idx?-ubyte.gz files are (default: $TESSEL_FASHION_MNIST_DIR\n"
               "                         or /usr/share/datasets/fashion-mnist)\n"
               "  --steps N              stop each epoch after N steps (a quick check; default: the whole epoch)\n"
               "  --help                 this text\n");
}

std::optional<options> parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "fashion_mnist: %s needs a value\n", arg.c_str());
      return std::nullopt;
    }
    const std::string value = argv[++i];
    try {
      if (arg == "--model") o.model = value;
      else if (arg == "--epochs") o.epochs = std::stoi(value);
      else if (arg == "--batch-size") o.batch_size = std::stoi(value);
      else if (arg == "--learning-rate") o.learning_rate = std::stof(value);
      else if (arg == "--precision") o.precision = value;
      else if (arg == "--seed") o.seed = static_cast<std::uint32_t>(std::stoul(value));
      else if (arg == "--data-dir") o.data_dir = value;
      else if (arg == "--steps") o.steps = std::stoi(value);
      else {
        std::fprintf(stderr, "fashion_mnist: unknown option %s (see --help)\n", arg.c_str());
        return std::nullopt;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "fashion_mnist: %s: '%s' is not a number\n", arg.c_str(), value.c_str());
      return std::nullopt;
    }
  }
  if ((o.model != "mlp" && o.model != "cnn") || (o.precision != "f32" && o.precision != "bf16") || o.epochs < 1 || o.steps < 0 ||
      (o.batch_size != 32 && o.batch_size != 64 && o.batch_size != 128 && o.batch_size != 256)) {
    std::fprintf(stderr, "fashion_mnist: unsupported --model, --precision, --epochs or --batch-size (see --help)\n");
    return std::nullopt;
  }
  return o;
}

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<pixels, 512>>, w1), (T<float, shape<512>>, b1),
                           (T<float, shape<512, 256>>, w2), (T<float, shape<256>>, b2),
                           (T<float, shape<256, classes>>, w3), (T<float, shape<classes>>, b3));
};

mlp<> init_mlp(tessel::random::key k) {
  const auto keys = tessel::random::split<3>(k);
  mlp<> p;
  p.w1 = tessel::nn::glorot_uniform<shape<pixels, 512>>(keys[0]);
  p.w2 = tessel::nn::glorot_uniform<shape<512, 256>>(keys[1]);
  p.w3 = tessel::nn::glorot_uniform<shape<256, classes>>(keys[2]);
  return p;  // biases start at zero
}

// The forward pass in the compute dtype C (f32 or bf16); logits come back in f32.
template <class C>
struct mlp_forward {
  template <class P, class X>
  constexpr auto operator()(P p, X x) const {
    auto as_c = [](auto t) { return tessel::convert_element_type<C>(t); };
    auto h1 = tessel::relu(tessel::nn::dense(as_c(x), as_c(p.w1), as_c(p.b1)));
    auto h2 = tessel::relu(tessel::nn::dense(h1, as_c(p.w2), as_c(p.b2)));
    return tessel::convert_element_type<float>(tessel::nn::dense(h2, as_c(p.w3), as_c(p.b3)));
  }
};

template <template <class, class> class T = tensor>
struct cnn {
  BOOST_HANA_DEFINE_STRUCT(cnn, (T<float, shape<3, 3, 1, 32>>, k1), (T<float, shape<32>>, c1),
                           (T<float, shape<3, 3, 32, 64>>, k2), (T<float, shape<64>>, c2),
                           (T<float, shape<7 * 7 * 64, 128>>, w3), (T<float, shape<128>>, b3),
                           (T<float, shape<128, classes>>, w4), (T<float, shape<classes>>, b4));
};

cnn<> init_cnn(tessel::random::key k) {
  const auto keys = tessel::random::split<4>(k);
  cnn<> p;
  p.k1 = tessel::nn::he_uniform<shape<3, 3, 1, 32>>(keys[0]);
  p.k2 = tessel::nn::he_uniform<shape<3, 3, 32, 64>>(keys[1]);
  p.w3 = tessel::nn::glorot_uniform<shape<7 * 7 * 64, 128>>(keys[2]);
  p.w4 = tessel::nn::glorot_uniform<shape<128, classes>>(keys[3]);
  return p;
}

template <class C>
struct cnn_forward {
  template <class P, class X>
  constexpr auto operator()(P p, X x) const {
    using tessel::stride, tessel::window;
    namespace padding = tessel::padding;
    auto as_c = [](auto t) { return tessel::convert_element_type<C>(t); };
    constexpr std::size_t batch = X::shape_type::dims[0];
    auto image = tessel::reshape<shape<batch, 28, 28, 1>>(as_c(x));
    auto h1 = tessel::relu(tessel::conv_general<stride<1, 1>, padding::same>(image, as_c(p.k1)) + as_c(p.c1));
    auto p1 = tessel::max_pool<window<2, 2>, stride<2, 2>, padding::valid>(h1);
    auto h2 = tessel::relu(tessel::conv_general<stride<1, 1>, padding::same>(p1, as_c(p.k2)) + as_c(p.c2));
    auto p2 = tessel::max_pool<window<2, 2>, stride<2, 2>, padding::valid>(h2);
    auto h3 = tessel::relu(tessel::nn::dense(tessel::nn::flatten(p2), as_c(p.w3), as_c(p.b3)));
    return tessel::convert_element_type<float>(tessel::nn::dense(h3, as_c(p.w4), as_c(p.b4)));
  }
};

// The model's forward pass for its parameter struct.
template <class C, class P, class X>
constexpr auto forward(P p, X x) {
  if constexpr (std::is_same_v<tessel::tree::rebind_t<P, tensor>, mlp<>>) return mlp_forward<C>{}(p, x);
  else return cnn_forward<C>{}(p, x);
}

template <class C>
struct loss_fn {
  template <class P, class X, class Y>
  constexpr auto operator()(P p, X x, Y y) const {
    auto logits = forward<C>(p, x);
    return std::make_tuple(tessel::mean(tessel::nn::softmax_cross_entropy_with_integer_labels(logits, y)),
                           tessel::nn::accuracy(logits, y));
  }
};

// Adam (optax.adam: bias correction with the incremented count, eps outside the square root).
template <class C>
struct train_step {
  template <class P, class X, class Y, class S>
  constexpr auto operator()(P params, P mu, P nu, S count, X x, Y y, S lr) const {
    auto [value_aux, grads] = tessel::value_and_grad(loss_fn<C>{}, tessel::has_aux)(params, x, y);
    auto [loss, acc] = value_aux;
    auto t = count + 1.0f;
    auto new_mu = tessel::tree_map([](auto m, auto g) { return 0.9f * m + 0.1f * g; }, mu, grads);
    auto new_nu = tessel::tree_map([](auto v, auto g) { return 0.999f * v + 0.001f * (g * g); }, nu, grads);
    auto correct1 = 1.0f - tessel::pow(tessel::broadcast_to<shape<>>(t * 0.0f + 0.9f), t);
    auto correct2 = 1.0f - tessel::pow(tessel::broadcast_to<shape<>>(t * 0.0f + 0.999f), t);
    auto step = lr / correct1;
    auto new_params = tessel::tree_map(
        [&](auto w, auto m, auto v) {
          using W = decltype(w);
          auto s = tessel::broadcast_to<typename W::shape_type>(step);
          auto c2 = tessel::broadcast_to<typename W::shape_type>(correct2);
          return w - s * m / (tessel::sqrt(v / c2) + 1e-8f);
        },
        params, new_mu, new_nu);
    return std::make_tuple(new_params, new_mu, new_nu, t, loss, acc);
  }
};

template <class C>
struct evaluate {
  template <class P, class X, class Y>
  constexpr auto operator()(P p, X x, Y y) const {
    return tessel::sum(tessel::convert_element_type<float>(tessel::argmax<-1>(forward<C>(p, x)) == y));
  }
};

// Copies examples order[first..first+B) into a batch (pixels scaled to [0, 1]).
template <std::size_t B>
void gather(const std::vector<float>& images, const std::vector<std::int32_t>& labels, const std::int32_t* order,
            tensor<float, shape<B, pixels>>& x, tensor<std::int32_t, shape<B>>& y) {
  for (std::size_t i = 0; i < B; ++i) {
    const auto e = static_cast<std::size_t>(order[i]);
    std::copy_n(images.begin() + static_cast<std::ptrdiff_t>(e * pixels), pixels, x.data() + i * pixels);
    y[i] = labels[e];
  }
}

struct dataset {
  std::vector<float> train_x, test_x;
  std::vector<std::int32_t> train_y, test_y;
};

dataset load(const options& o) {
  const auto raw = tessel::data::load_fashion_mnist(o.data_dir.empty() ? tessel::data::fashion_mnist_dir() : std::filesystem::path(o.data_dir));
  dataset d;
  auto scale = [](const tessel::data::idx_array& a) {
    const auto px = a.data<std::uint8_t>();
    std::vector<float> out(px.size());
    for (std::size_t i = 0; i < px.size(); ++i) out[i] = static_cast<float>(px[i]) / 255.0f;
    return out;
  };
  auto labels = [](const tessel::data::idx_array& a) {
    const auto l = a.data<std::uint8_t>();
    return std::vector<std::int32_t>(l.begin(), l.end());
  };
  d.train_x = scale(raw.train_images);
  d.test_x = scale(raw.test_images);
  d.train_y = labels(raw.train_labels);
  d.test_y = labels(raw.test_labels);
  return d;
}

template <class Model, std::size_t B, class C>
int run(const options& o, const dataset& d) {
  using clock = std::chrono::steady_clock;
  constexpr std::size_t train_size = tessel::data::fashion_mnist_train_size;
  constexpr std::size_t full_steps = train_size / B;  // the remainder is dropped: one static batch shape
  const std::size_t steps = o.steps > 0 ? std::min<std::size_t>(full_steps, static_cast<std::size_t>(o.steps)) : full_steps;
  const auto root = tessel::random::key_from_seed(o.seed);
  const auto [init_key, shuffle_key] = tessel::random::split(root);
  Model params;
  if constexpr (std::is_same_v<Model, mlp<>>) params = init_mlp(init_key);
  else params = init_cnn(init_key);
  Model mu, nu;
  tensor<float, shape<>> count{0};
  tensor<float, shape<>> lr{o.learning_rate};
  const auto step = tessel::jit(train_step<C>{});
  const auto eval = tessel::jit(evaluate<C>{});
  tensor<float, shape<B, pixels>> x;
  tensor<std::int32_t, shape<B>> y;
  tensor<float, shape<eval_batch, pixels>> ex;
  tensor<std::int32_t, shape<eval_batch>> ey;
  std::vector<std::int32_t> identity(tessel::data::fashion_mnist_test_size);
  for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<std::int32_t>(i);

  using step_plan = typename decltype(step)::template traced_for<Model, Model, Model, tensor<float, shape<>>,
                                                                 tensor<float, shape<B, pixels>>, tensor<std::int32_t, shape<B>>,
                                                                 tensor<float, shape<>>>;
  double accuracy = 0, total_seconds = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const auto order = tessel::random::permutation<train_size>(tessel::random::fold_in(shuffle_key, static_cast<std::uint32_t>(epoch)));
    const auto start = clock::now();
    double loss_sum = 0, acc_sum = 0;
    for (std::size_t s = 0; s < steps; ++s) {
      // Cosine decay of the learning rate over the whole run (optax.cosine_decay_schedule, alpha 0).
      const double progress = static_cast<double>(epoch * steps + s) / static_cast<double>(o.epochs * steps);
      lr[0] = static_cast<float>(o.learning_rate * 0.5 * (1 + std::cos(3.141592653589793 * progress)));
      gather<B>(d.train_x, d.train_y, order.data() + s * B, x, y);
      auto [p, m, v, c, loss, acc] = step(params, mu, nu, count, x, y, lr);
      params = std::move(p), mu = std::move(m), nu = std::move(v), count = std::move(c);
      loss_sum += loss[0];
      acc_sum += acc[0];
    }
    const double seconds = std::chrono::duration<double>(clock::now() - start).count();
    total_seconds += seconds;
    double correct = 0;
    for (std::size_t b = 0; b < tessel::data::fashion_mnist_test_size / eval_batch; ++b) {
      gather<eval_batch>(d.test_x, d.test_y, identity.data() + b * eval_batch, ex, ey);
      correct += eval(params, ex, ey)[0];
    }
    accuracy = correct / static_cast<double>(tessel::data::fashion_mnist_test_size);
    std::printf("epoch %d/%d  loss %.4f  train_acc %.4f  test_acc %.4f  %.0f samples/s  %.1f s\n", epoch + 1, o.epochs,
                loss_sum / steps, acc_sum / steps, accuracy, static_cast<double>(steps * B) / seconds, seconds);
    std::fflush(stdout);
  }
  const double epoch_seconds = total_seconds / o.epochs;
  std::printf("{\"model\": \"%s\", \"precision\": \"%s\", \"batch_size\": %zu, \"epochs\": %d, \"test_accuracy\": %.4f, "
              "\"epoch_seconds\": %.3f, \"samples_per_second\": %.0f, \"peak_bytes\": %zu}\n",
              o.model.c_str(), o.precision.c_str(), B, o.epochs, accuracy, epoch_seconds,
              static_cast<double>(steps * B) / epoch_seconds, step_plan::plan.arena_bytes);
  return 0;
}

template <std::size_t B, class C>
int run_model(const options& o, const dataset& d) {
  return o.model == "cnn" ? run<cnn<>, B, C>(o, d) : run<mlp<>, B, C>(o, d);
}

template <std::size_t B>
int run_precision(const options& o, const dataset& d) {
  return o.precision == "bf16" ? run_model<B, tessel::bfloat16>(o, d) : run_model<B, float>(o, d);
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = parse(argc, argv);
  if (!o) return 2;
  dataset d;
  try {
    d = load(*o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
  switch (o->batch_size) {
    case 32: return run_precision<32>(*o, d);
    case 64: return run_precision<64>(*o, d);
    case 256: return run_precision<256>(*o, d);
    default: return run_precision<128>(*o, d);
  }
}
