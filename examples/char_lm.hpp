#pragma once
// The char-level language model example's shared parts: the model (tessel::nn::gpt), the options, the
// data and the jitted train step. Each (precision, bucket, devices) train step is its own translation unit
// (char_lm_step.cpp compiled twelve times, each within the compile budget of TARGETS.md); the training loop
// (train<C>) is in char_lm_train.cpp, validation and sampling (forward only, f32) in char_lm_eval.cpp,
// flags and data in char_lm.cpp.
#include <tessel/data/bucket.hpp>
#include <tessel/data/prefetch.hpp>
#include <tessel/data/text.hpp>
#include <tessel/io.hpp>
#include <tessel/profile/profiler.hpp>
#include <tessel/nn.hpp>
#include <tessel/tessel.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#ifndef TESSEL_LM_LAYERS
#define TESSEL_LM_LAYERS 4
#endif

namespace char_lm {
using tessel::shape;
using tessel::tensor;
using tessel::int32;

inline constexpr tessel::nn::gpt_config config{
    .vocab = 256, .d_model = 128, .heads = 4, .layers = TESSEL_LM_LAYERS, .max_length = 256, .mlp = 512};
using model = tessel::nn::gpt<config>;
using params_t = model::params<>;

// Buckets of 64, 128 and 256 characters, each batch 1024 token positions (examples/CMakeLists.txt
// compiles a train step for each: keep the two lists the same).
namespace td = tessel::data;
using bucket_64 = td::bucket<64, 16>;
using bucket_128 = td::bucket<128, 8>;
using bucket_256 = td::bucket<256, 4>;
inline constexpr std::size_t longest = 256;

// AdamW (PyTorch's and optax's decoupled decay) after clipping to global norm 1. The learning rate is a
// run-time input: adamw<1.0> gives -(adam direction + decay * params), scaled here by the step's rate
// (the warm-up cosine schedule, computed on the host).
inline constexpr double weight_decay = 0.01;
using optimizer = tessel::optim::chain<tessel::optim::clip_by_global_norm<1.0>,
                                       tessel::optim::adamw<1.0, tessel::optim::adamw_options{.weight_decay = weight_decay}>>;
using state_t = decltype(optimizer{}.init(std::declval<const params_t&>()));

struct options {
  int steps = 5000;
  float learning_rate = 5e-3f;
  int warmup = 100;
  std::string precision = "f32";
  std::uint32_t seed = 0;
  int eval_every = 500;
  int sample_every = 500;
  int sample_length = 160;
  float temperature = 0.8f;
  std::string prompt = "The ";
  std::string data_dir;  // default: tessel::data::fortunes_dir()
  std::string checkpoint_dir;
  std::shared_ptr<tessel::io::run_directory> directory;  // with --checkpoint-dir: prepared by main (char_lm.cpp)
  bool resume = false;
  bool resume_or_start = false;  // --resume-or-start: resume sets it too
  bool overwrite = false;  // a new run into a directory holding checkpoints deletes them first
  int save_every = 0;  // 0: at the end only
  int keep = 3;
  std::string trace;
  std::string curve;   // PREFIX.csv
  std::string export_dir;  // initial weights and every batch, for bench/torch_char_lm.py
  bool check_pipeline = false;
  int devices = 1;  // data parallel over a mesh ("data", devices): 1, 2 or 4 (f32)
};

struct corpus {
  td::chunked_text train, validation;
  std::size_t train_chars = 0, validation_chars = 0, records = 0, longest_record = 0;
  std::uint64_t train_byte_sum = 0;  // of the training records' bytes, read before chunking
  td::vocabulary train_words;  // seen twice in the training records: a sample's known words are counted in it
};

// The learning rate of step g (0-based): linear warm-up from 0 to peak over `warmup` steps, then cosine
// decay to 0 at `steps` (optax.warmup_cosine_decay_schedule(0, peak, warmup, steps)).
inline double learning_rate(const options& o, std::int64_t g) {
  const double peak = o.learning_rate;
  if (g < o.warmup) return peak * static_cast<double>(g) / o.warmup;
  const double t = std::min(1.0, static_cast<double>(g - o.warmup) / std::max(1, o.steps - o.warmup));
  return 0.5 * peak * (1.0 + std::cos(3.14159265358979323846 * t));
}

// A bucket's batch as model inputs: position 0 is the start token 0, position j the character j - 1;
// position j predicts character j; the mask is the bucket's (every character is predicted once).
template <std::size_t B, std::size_t L>
struct lm_batch {
  tensor<int32, shape<B, L>> inputs, targets;
  tensor<bool, shape<B, L>> mask;
  std::size_t chars = 0;
};
template <std::size_t B, std::size_t L>
lm_batch<B, L> to_lm_batch(const td::sequence_batch<int32, B, L>& b) {
  lm_batch<B, L> out;
  for (std::size_t r = 0; r < B; ++r)
    for (std::size_t j = 0; j < L; ++j) {
      out.inputs[r * L + j] = j == 0 ? 0 : b.tokens[r * L + j - 1];
      out.targets[r * L + j] = b.tokens[r * L + j];
      out.mask[r * L + j] = b.mask[r * L + j];
      out.chars += b.mask[r * L + j] ? 1 : 0;
    }
  return out;
}

template <class C>
struct loss_fn {
  template <class P, class I, class Y, class M>
  constexpr auto operator()(P p, I inputs, Y targets, M mask) const {
    return model::loss<C>(p, inputs, targets, mask);
  }
};

// Data parallel (--devices D): each device holds B/D rows of the batch. The loss is the mean over every
// character of the whole batch: the devices' sums and counts are psummed over "data" before the division
// (a mean of the devices' means would weigh each character by its device's count). The gradients of the
// replicated parameters come back summed over the devices (the transpose of their use by device-varying
// values is a psum), so the global norm, the clipping and AdamW see the 1-device step's gradients, and
// every device computes the same update.
template <class C>
struct data_parallel_loss_fn {
  template <class P, class I, class Y, class M>
  constexpr auto operator()(P p, I inputs, Y targets, M mask) const {
    auto [summed, count] = model::loss_sums<C>(p, inputs, targets, mask);
    return model::mean_loss(tessel::psum<"data">(summed), tessel::psum<"data">(count));
  }
};

// One jitted train step: loss and gradients, the global norm (before clipping), clipping, AdamW.
template <class C, class Loss = loss_fn<C>>
struct train_step {
  template <class P, class S, class I, class Y, class M, class LR>
  constexpr auto operator()(P params, S state, I inputs, Y targets, M mask, LR lr) const {
    auto [loss, grads] = tessel::value_and_grad(Loss{})(params, inputs, targets, mask);
    auto norm = tessel::optim::global_norm(grads);
    auto [direction, next] = optimizer{}.update(grads, state, params);
    auto updates = tessel::tree_map(
        [&](auto u) { return tessel::broadcast_to<typename decltype(u)::shape_type>(lr) * u; }, direction);
    return std::make_tuple(tessel::optim::apply_updates(params, updates), next, loss, norm);
  }
};

// One train step of precision C on a batch of bucket (B, L), on one device (jit: params and state
// donated, updated in place) or data parallel on a mesh ("data", D) of host devices (shard_map: the
// batch split by rows, params and state replicated). `plan` is the address of the step's compiled plan
// (one per instantiation).
struct step_result {
  float loss = 0, norm = 0;
  const void* plan = nullptr;
};
template <class C, std::size_t B, std::size_t L, std::size_t D = 1>
step_result train_on(params_t& params, state_t& state, const lm_batch<B, L>& batch, const tensor<float, shape<>>& lr);

// Writes tensors as DIR/<name>.bin (raw little-endian) listed in DIR/manifest.txt ("name dtype dims...").
class tensor_dir {
 public:
  explicit tensor_dir(const std::string& dir);
  void write(const std::string& name, const void* data, std::size_t bytes, const char* dtype, const std::size_t* dims,
             std::size_t rank);
  template <class T, class S>
  void write(const std::string& name, const tensor<T, S>& t) {
    write(name, t.data(), S::size * sizeof(T), std::is_same_v<T, float> ? "f32" : std::is_same_v<T, bool> ? "pred" : "s32",
          S::dims.data(), S::rank);
  }
  void write_params(const std::string& prefix, const params_t& p);

 private:
  std::string dir_;
  std::FILE* manifest_ = nullptr;
};

// Forward only, in f32 (char_lm_eval.cpp): the mean loss in bits per character over the chunks (every
// character predicted once), and a sample of `length` characters after the prompt.
double validation_bits(const params_t& p, const std::vector<std::vector<int32>>& chunks);
std::string sample(const params_t& p, const std::string& prompt, std::size_t length, float temperature, tessel::random::key k);

// The training loop for the compute dtype C (char_lm_train.cpp); returns the exit status.
template <class C>
int train(const options& o, const corpus& data);

// The run's summary line and bookkeeping shared by both precisions (char_lm.cpp).
std::string params_digest(const params_t& p);

}  // namespace char_lm
