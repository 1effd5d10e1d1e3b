#pragma once
// The Fashion-MNIST example's shared parts: the models, the jitted train and evaluation steps and the
// training loop (run), which fashion_mnist_steps.cpp instantiates for one model, precision and part of the
// steps per translation unit (step_part below; seventeen units, so that each stays within the compile-time
// budget of TARGETS.md), and the run-time bookkeeping (run_log), compiled once in fashion_mnist.cpp.
#include <tessel/data.hpp>
#include <tessel/io.hpp>
#include <tessel/nn.hpp>
#include <tessel/profile/profiler.hpp>
#include <tessel/tessel.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fashion_mnist {
using tessel::shape;
using tessel::tensor;

constexpr std::size_t pixels = 28 * 28;
constexpr std::size_t classes = 10;
constexpr std::size_t eval_batch = 1000;  // divides the 10000 test images

struct options {
  std::string model = "mlp";
  int epochs = 10;
  int batch_size = 128;
  float learning_rate = 0;  // 0 until parse gives the flag's value or the model's default
  std::string precision = "f32";
  std::uint32_t seed = 0;
  std::string data_dir;
  std::string tfrecord_dir;    // read the data from TFRecord shards instead of the IDX files
  std::string write_tfrecord;  // write the IDX data as TFRecord shards here, then exit
  int shards = 4;              // files per split that --write-tfrecord writes
  int steps = 0;  // 0: every full batch of the epoch
  std::string checkpoint_dir;
  bool resume = false;
  bool resume_or_start = false;  // --resume, or a new run when the directory holds no intact checkpoint
  bool overwrite = false;        // a new run may delete the directory's checkpoints of another run
  int save_every = 0;  // 0: at the end of each epoch only
  int keep = 3;
  std::string trace;
  std::string curve;  // prefix of <prefix>.csv and <prefix>.svg
  int devices = 1;    // data parallel over a mesh ("data", devices) of host devices, or of processes (mpirun)
  int processes = 1;  // mpirun -np: each process runs one device of the mesh; process 0 writes every file
  bool fully_sharded = false;  // parameters and Adam state split over the devices too (jit with shardings)
  bool tensor_parallel = false;  // --devices 4 as a mesh ("data", 2) x ("model", 2): Megatron on "model"
  bool check_finite = false;  // search every kernel's result for NaN and infinity (jax_debug_nans)
  // With --checkpoint-dir, prepared by main before training (fashion_mnist.cpp): its lock, the run's
  // identity, the checkpoint to resume from.
  std::shared_ptr<tessel::io::run_directory> directory;
};

struct dataset {
  std::vector<float> train_x, test_x;
  std::vector<std::int32_t> train_y, test_y;
};

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<pixels, 512>>, w1), (T<float, shape<512>>, b1),
                           (T<float, shape<512, 256>>, w2), (T<float, shape<256>>, b2),
                           (T<float, shape<256, classes>>, w3), (T<float, shape<classes>>, b3));
};

inline mlp<> init_mlp(tessel::random::key k) {
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

inline cnn<> init_cnn(tessel::random::key k) {
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

// One jitted train step: forward, loss, gradients and tessel::optim::adam (optax.adam). The learning rate
// is a run-time input (the cosine schedule's value for this step, computed on the host by
// optim::cosine_decay_schedule): adam<1.0> gives -direction, scaled here by lr, which is bit for bit
// optax.adam(cosine_decay_schedule(...)) (the negation is exact, so lr * -d == -lr * d).
using optimizer = tessel::optim::adam<1.0>;

// Data parallel (--devices N): each device's loss and accuracy on its block of the batch, averaged over
// the mesh's "data" axis. The gradients of the replicated parameters come back summed over the devices
// (the transpose of a replicated value's use by device-varying ones is a psum), so with the pmean they
// are the mean over the whole batch, as on one device.
template <class C>
struct data_parallel_loss_fn {
  template <class P, class X, class Y>
  constexpr auto operator()(P p, X x, Y y) const {
    auto [loss, acc] = loss_fn<C>{}(p, x, y);
    return std::make_tuple(tessel::pmean<"data">(loss), tessel::pmean<"data">(acc));
  }
};

template <class C, class Loss = loss_fn<C>>
struct train_step {
  template <class P, class S, class X, class Y, class L>
  constexpr auto operator()(P params, S state, X x, Y y, L lr) const {
    auto [value_aux, grads] = tessel::value_and_grad(Loss{}, tessel::has_aux)(params, x, y);
    auto [loss, acc] = value_aux;
    auto [direction, next] = optimizer{}.update(grads, state);
    auto updates = tessel::tree_map(
        [&](auto u) { return tessel::broadcast_to<typename decltype(u)::shape_type>(lr) * u; }, direction);
    return std::make_tuple(tessel::optim::apply_updates(params, updates), next, loss, acc);
  }
};

template <class C>
struct evaluate {
  template <class P, class X, class Y>
  constexpr auto operator()(P p, X x, Y y) const {
    return tessel::sum(tessel::convert_element_type<float>(tessel::argmax<-1>(forward<C>(p, x)) == y));
  }
};

// Copies examples order[first..first+B) into a batch (pixels scaled to [0, 1]): its rows [from, to), the
// whole batch unless a process's devices read only a block of it.
template <std::size_t B>
void gather(const std::vector<float>& images, const std::vector<std::int32_t>& labels, const std::int32_t* order,
            tensor<float, shape<B, pixels>>& x, tensor<std::int32_t, shape<B>>& y, std::size_t from = 0, std::size_t to = B) {
  for (std::size_t i = from; i < to; ++i) {
    const auto e = static_cast<std::size_t>(order[i]);
    std::copy_n(images.begin() + static_cast<std::ptrdiff_t>(e * pixels), pixels, x.data() + i * pixels);
    y[i] = labels[e];
  }
}

// The mean training loss and accuracy over the steps since the previous point; test accuracy at the end
// of an epoch (NaN elsewhere).
struct curve_point {
  std::uint64_t step = 0;
  double epoch = 0, loss = 0, accuracy = 0, test_accuracy = NAN;
};

// ---- progress ------------------------------------------------------------------------------------

// A live bar on a terminal (redrawn at most 10 times a second); nothing between epoch lines otherwise.
class progress {
 public:
  progress() : tty_(::isatty(::fileno(stdout)) != 0) {}
  void update(int epoch, int epochs, std::size_t done, std::size_t steps, double loss, double acc, double samples_per_s) {
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done != steps && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int width = 30;
    const int filled = static_cast<int>(width * done / std::max<std::size_t>(steps, 1));
    const double eta = samples_per_s > 0 ? static_cast<double>(steps - done) * batch_ / samples_per_s : 0;
    std::printf("\r\033[Kepoch %d/%d [%s%s] %zu/%zu  loss %.4f  acc %.4f  %.0f samples/s  eta %.0f s", epoch, epochs,
                std::string(static_cast<std::size_t>(filled), '#').c_str(), std::string(static_cast<std::size_t>(width - filled), '.').c_str(),
                done, steps, loss, acc, samples_per_s, eta);
    std::fflush(stdout);
  }
  void line(const std::string& text) {
    std::printf(tty_ ? "\r\033[K%s\n" : "%s\n", text.c_str());
    std::fflush(stdout);
  }
  void set_batch(double b) { batch_ = b; }

 private:
  bool tty_;
  double batch_ = 1;
  std::chrono::steady_clock::time_point last_{};
};

// Everything of a run but its tensors: sums, curve, progress, checkpoint metadata, trace and summary.
// Not a template: compiled once, in fashion_mnist.cpp, rather than for every model, batch size and precision.
class run_log {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::uint64_t curve_every = 50;  // steps per point of the curve

  run_log(const options& o, std::size_t batch, std::size_t steps, std::size_t peak_bytes);

  std::uint64_t total_steps() const { return total_; }
  std::uint64_t first_step() const { return first_; }

  // When resuming: the checkpoint main chose (the newest intact one, of this run, checked against the
  // flags), its sums, curve and random key taken; the caller loads the trees from it. nullopt: step 0.
  std::optional<tessel::io::loaded_checkpoint> resume(tessel::random::key& shuffle_key);

  void start();

  // Throws (training stops, nothing of step g is saved) when the loss is not finite.
  void after_step(std::uint64_t g, double loss, double acc, double seconds);
  void check_kernels(std::uint64_t g, const char* program) const;

  bool epoch_end(std::uint64_t g) const { return (g + 1) % steps_ == 0; }
  bool save_due(std::uint64_t g) const;

  void end_epoch(std::uint64_t g, double test_accuracy);

  // Adds the run's metadata to a snapshot holding the trees and hands it to the saver thread; throws
  // rather than save a state holding a NaN or an infinity.
  void save(tessel::io::snapshot snap, tessel::random::key shuffle_key);

  bool evaluated() const { return !std::isnan(accuracy_); }
  void set_accuracy(double a) { accuracy_ = a; }

  // Waits for the saves, writes the trace, prints the JSON summary.
  void finish();

 private:
  static std::string exact(double v);
  static double number(const tessel::io::loaded_checkpoint& c, const char* key) { return std::strtod(c.get(key).c_str(), nullptr); }

  double epoch_samples_per_second(std::uint64_t g) const;

  void write_curve() const;

  const options& o_;
  std::size_t batch_, steps_;
  std::uint64_t total_;
  std::size_t peak_bytes_;
  double epoch_loss_ = 0, epoch_acc_ = 0, window_loss_ = 0, window_acc_ = 0, accuracy_ = NAN, train_seconds_ = 0, epoch_rate_ = 0;
  std::uint64_t window_steps_ = 0, first_ = 0, epoch_first_ = 0, trained_ = 0;
  std::vector<curve_point> curve_;
  progress bar_;
  tessel::io::run_directory* ckpt_ = nullptr;  // the process that writes the checkpoints
  clock::time_point epoch_start_;
};

// The train step on one device (jit, parameters and state donated), or data parallel on a mesh of D:
// devices of this process, or one device in each of D processes (mpirun -np D, Placement over_processes).
// How the data-parallel steps lay out parameters and state: replicated (shard_map, gradients averaged),
// fully sharded or tensor parallel (the step written for one device, run by jit with shardings).
enum class layout { replicated, fully_sharded, tensor_parallel };

// fully_sharded (--fully-sharded): jit with shardings splits the batch, the parameters, mu and nu by rows
// (ZeRO-3), each struct member by its own spec: b3 (f32[10]) is whole, as 4 devices cannot divide it. The
// partitioner gathers each split parameter before its use and reduce-scatters its gradient, so each device
// updates its 1/D of the state.
// tensor_parallel (--tensor-parallel, D = 4): a mesh ("data", 2) x ("model", 2); the batch is split over
// "data", and over "model" the first two layers are Megatron's MLP: w1 and b1 split by columns, w2 by rows
// (mu and nu alike), so each device computes half of the hidden layer, and one all-reduce over "model"
// sums the second layer's halves. Placement over_processes puts "data" across the processes.
template <class C, std::size_t D, class Placement, layout Layout = layout::replicated>
constexpr auto make_step() {
  using tessel::P, tessel::specs, tessel::none;
  if constexpr (D == 1) {
    return tessel::jit(train_step<C>{});
  } else if constexpr (Layout == layout::tensor_parallel) {
    static_assert(D == 4, "the tensor-parallel step is compiled for a 2 x 2 mesh");
    using members = specs<P<none, "model">, P<"model">, P<"model">, P<>, P<>, P<>>;  // w1 b1 w2 b2 w3 b3
    using state_spec = specs<P<>, members, members>;                                  // count, mu, nu
    return tessel::jit<tessel::mesh<tessel::axis<"data", 2, Placement>, tessel::axis<"model", 2>>>(
        train_step<C>{}, tessel::in_shardings<members, state_spec, P<"data">, P<"data">, P<>>,
        tessel::out_shardings<members, state_spec, P<>, P<>>);
  } else if constexpr (Layout == layout::fully_sharded) {
    using members = specs<P<"data">, P<"data">, P<"data">, P<"data">, P<"data">, P<>>;  // w1 b1 w2 b2 w3 b3
    using state_spec = specs<P<>, members, members>;                                    // count, mu, nu
    return tessel::jit<tessel::mesh<tessel::axis<"data", D, Placement>>>(
        train_step<C>{}, tessel::in_shardings<members, state_spec, P<"data">, P<"data">, P<>>,
        tessel::out_shardings<members, state_spec, P<>, P<>>);
  } else {
    return tessel::shard_map<tessel::mesh<tessel::axis<"data", D, Placement>>, specs<P<>, P<>, P<"data">, P<"data">, P<>>, P<>>(
        train_step<C, data_parallel_loss_fn<C>>{});
  }
}

template <class Model, std::size_t B, class C, std::size_t D = 1, class Placement = tessel::in_process, layout Layout = layout::replicated>
int run(const options& o, const dataset& d) {
  using clock = std::chrono::steady_clock;
  using state_t = tessel::optim::adam_state<Model>;
  namespace profile = tessel::profile;
  constexpr std::size_t train_size = tessel::data::fashion_mnist_train_size;
  constexpr std::size_t full_steps = train_size / B;  // the remainder is dropped: one static batch shape
  const std::size_t steps = o.steps > 0 ? std::min<std::size_t>(full_steps, static_cast<std::size_t>(o.steps)) : full_steps;
  const auto root = tessel::random::key_from_seed(o.seed);
  auto [init_key, shuffle_key] = tessel::random::split(root);
  Model params;
  if constexpr (std::is_same_v<Model, mlp<>>) params = init_mlp(init_key);
  else params = init_cnn(init_key);
  state_t opt_state = optimizer{}.init(params);
  const auto step = make_step<C, D, Placement, Layout>();
  const auto eval = tessel::jit(evaluate<C>{});
  using step_plan = typename decltype(step)::template traced_for<Model, state_t, tensor<float, shape<B, pixels>>,
                                                                 tensor<std::int32_t, shape<B>>, tensor<float, shape<>>>;
  // The devices of this process: all of them, or D / 2 under mpirun -np 2.
  run_log log(o, B, steps, step_plan::plan.arena_bytes * (std::is_same_v<Placement, tessel::in_process> ? D : D / 2));
  // optax.cosine_decay_schedule over the whole run, evaluated at the optimizer's count before each update.
  const tessel::optim::cosine_decay_schedule schedule{.init_value = o.learning_rate,
                                                      .decay_steps = static_cast<std::int32_t>(log.total_steps())};
  if (const auto last = log.resume(shuffle_key))
    last->load(tessel::io::slot("params", params), tessel::io::slot("opt_state", opt_state));

  tensor<float, shape<B, pixels>> x;
  tensor<std::int32_t, shape<B>> y;
  tensor<float, shape<>> lr;
  auto test_accuracy = [&] {
    profile::scope scope("evaluate");
    tensor<float, shape<eval_batch, pixels>> ex;
    tensor<std::int32_t, shape<eval_batch>> ey;
    std::vector<std::int32_t> identity(eval_batch);
    double correct = 0;
    for (std::size_t b = 0; b < tessel::data::fashion_mnist_test_size / eval_batch; ++b) {
      for (std::size_t i = 0; i < eval_batch; ++i) identity[i] = static_cast<std::int32_t>(b * eval_batch + i);
      gather<eval_batch>(d.test_x, d.test_y, identity.data(), ex, ey);
      correct += eval(params, ex, ey)[0];
    }
    return correct / static_cast<double>(tessel::data::fashion_mnist_test_size);
  };

  // Over processes the batch is split over "data", whose coordinate is the process's: each process reads
  // only its block of rows (the other rows of x and y are never read here).
  std::size_t row_from = 0, row_to = B;
  if constexpr (std::is_same_v<Placement, tessel::over_processes>) {
    const auto& here = tessel::kernels::processes();
    row_from = here.index * B / here.count, row_to = (here.index + 1) * B / here.count;
  }

  log.start();
  std::optional<tensor<std::int32_t, shape<train_size>>> order;
  for (std::uint64_t g = log.first_step(); g < log.total_steps(); ++g) {
    if (!order || g % steps == 0) {
      profile::scope scope("shuffle");
      order = tessel::random::permutation<train_size>(tessel::random::fold_in(shuffle_key, static_cast<std::uint32_t>(g / steps)));
    }
    const auto t0 = clock::now();
    float loss_value, acc_value;
    {
      profile::step ps(g, B);
      {
        profile::scope scope("gather");
        gather<B>(d.train_x, d.train_y, order->data() + (g % steps) * B, x, y, row_from, row_to);
      }
      lr[0] = schedule(std::get<0>(opt_state));
      profile::scope scope("train_step");
      // Parameters and optimizer state are donated: the step writes the new ones into their buffers (on a
      // mesh, where this process runs one device of it).
      auto [p, st, loss, acc] = step(tessel::donate(params), tessel::donate(opt_state), x, y, lr);
      params = std::move(p), opt_state = std::move(st);
      loss_value = loss[0], acc_value = acc[0];
    }
    log.after_step(g, loss_value, acc_value, std::chrono::duration<double>(clock::now() - t0).count());
    if (log.epoch_end(g)) log.end_epoch(g, test_accuracy());
    if (log.save_due(g)) {
      profile::scope scope("checkpoint.snapshot");
      tessel::io::snapshot snap(g + 1);
      snap.add("params", params).add("opt_state", opt_state);
      log.save(std::move(snap), shuffle_key);
    }
  }
  if (!log.evaluated()) log.set_accuracy(test_accuracy());  // resumed after the last step
  log.finish();
  return 0;
}

// The train steps are compiled in parts, each its own translation unit (fashion_mnist_steps.cpp compiled
// once per model, precision and part: examples/CMakeLists.txt), so that each stays within the compile
// budget. run_part runs the steps of its part that the options ask for, or returns not_in_part.
enum class step_part {
  small_batches,         // one device, batch 32 and 64
  large_batches,         // one device, batch 128 and 256
  data_parallel,         // batch 128 replicated on 2 and 4 devices
  fully_sharded,         // the MLP in f32: batch 128 fully sharded on 2 and 4 devices
  tensor_parallel,       // the MLP in f32: batch 128 on a 2 x 2 (data x model) mesh
  over_processes,        // batch 128 on 2 processes, one device each, replicated (the CNN in f32 only); the MLP in f32 also fully sharded
  tensor_parallel_over_processes  // the MLP in f32: the 2 x 2 mesh with "data" over 2 processes
};
inline constexpr int not_in_part = -1;
template <class Model, class C, step_part Part>
int run_part(const options& o, const dataset& d);

}  // namespace fashion_mnist
