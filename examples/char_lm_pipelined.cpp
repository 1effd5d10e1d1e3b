// The char-level language model, deeper (8 blocks of d_model 256), trained with its blocks cut into
// pipeline stages (tessel::pipeline): --pipeline S stages, each a thread, --microbatches 8 per batch of
// 32 x 64 characters, run in the order --schedule gives. The embedding is the first stage's, the final
// LayerNorm and the tied output layer the last stage's. One stage (--pipeline 1) is the same model and
// the same microbatches on one device; with TESSEL_NUM_THREADS=1 it is the one-core baseline. --pipeline 0
// is no pipeline at all: accumulate_gradients of the whole model over the same microbatches, one program
// that keeps its activations (a stage keeps only its input and recomputes its forward in its backward).
//
//   char_lm_pipelined --pipeline 2 --schedule 1f1b --steps 200
//   char_lm_pipelined --pipeline 2 --steps 100 --checkpoint-dir run   (then --resume continues it)
//   mpirun -np 2 char_lm_pipelined --pipeline 2 ...                    (a stage per process)
//
// Under mpirun each process runs one stage (the mesh's stage axis over processes); every process ends
// each step with the same parameters, process 0 prints and writes the checkpoints, which are those of the
// same run in one process, byte for byte.
//
// Each report line gives the step, the loss (bits per character of the batch's microbatch means) and the
// characters per second over the report's steps, counting the time of the pipeline and the optimizer; the
// last line, the characters per second of every report but the first.
#include <tessel/data/bucket.hpp>
#include <tessel/data/text.hpp>
#include <tessel/distributed.hpp>
#include <tessel/io.hpp>
#include <tessel/nn.hpp>
#include <tessel/pipeline.hpp>
#include <tessel/tessel.hpp>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <variant>

namespace {
using namespace tessel;
using namespace tessel::nn;
namespace td = tessel::data;

constexpr gpt_config config{.vocab = 256, .d_model = 256, .heads = 4, .layers = 8, .max_length = 64, .mlp = 1024};
using model = gpt<config>;
constexpr std::size_t length = 64, rows = 32, microbatches = 8, width = config.d_model;
using bucket = td::bucket<length, rows>;

// What is not a block: the embeddings (first stage) and the final LayerNorm (last stage, with the output
// layer tied to wte).
template <template <class, class> class T = tensor>
struct ends {
  BOOST_HANA_DEFINE_STRUCT(ends, (T<float, shape<config.vocab, width>>, wte), (T<float, shape<length, width>>, wpe),
                           (T<float, shape<width>>, lnf_g), (T<float, shape<width>>, lnf_b));
};
using blocks_t = model::blocks<>;
using params_t = std::tuple<ends<>, blocks_t>;
using inputs_t = std::tuple<tensor<int32, shape<rows, length>>, tensor<bool, shape<rows, length>>>;  // tokens, mask
using targets_t = tensor<int32, shape<rows, length>>;

constexpr auto first = [](const auto& o, const auto& in) {
  using tokens = std::remove_cvref_t<decltype(std::get<0>(in))>;
  constexpr std::size_t b = tokens::shape_type::dims[0];
  return take<0>(o.wte, std::get<0>(in)) + broadcast_to<shape<b, length, width>>(o.wpe);
};
constexpr auto stage = [](const auto& layers, const auto& x, const auto& in) {
  const auto bias = model::attention_bias(std::get<1>(in));
  auto [h, none] = scan([&](auto carry, auto layer) { return std::tuple{model::block<float>{}(carry, bias, layer), std::tuple<>{}}; },
                        x, layers);
  return h;
};
constexpr auto last = [](const auto& o, const auto& x, const auto& in, const auto& targets) {
  const auto logits = dot_general<axes<2>, axes<1>>(layer_norm(x, o.lnf_g, o.lnf_b), o.wte);  // [b, T, vocab]
  const auto w = convert_element_type<float>(std::get<1>(in));
  return sum(softmax_cross_entropy_with_integer_labels(logits, targets) * w) / max(sum(w), 1.0f);
};

// The same model on one device: what --pipeline 0 accumulates over the microbatches in one program.
constexpr auto whole = [](const auto& params, const auto& in, const auto& targets) {
  const auto& o = std::get<0>(params);
  return last(o, stage(std::get<1>(params), first(o, in), in), in, targets);
};

// AdamW after clipping to global norm 1, the learning rate a run-time input (as examples/char_lm.hpp).
using optimizer = optim::chain<optim::clip_by_global_norm<1.0>, optim::adamw<1.0, optim::adamw_options{.weight_decay = 0.01}>>;
using state_t = decltype(optimizer{}.init(std::declval<const params_t&>()));
constexpr auto update = jit([](const auto& params, const auto& state, const auto& grads, const auto& lr) {
  auto [direction, next] = optimizer{}.update(grads, state, params);
  auto updates = tree_map([&](auto u) { return broadcast_to<typename decltype(u)::shape_type>(lr) * u; }, direction);
  return std::make_tuple(optim::apply_updates(params, updates), next);
});

struct options {
  int pipeline = 1, steps = 100, report_every = 10, warmup = 20, save_every = 0;
  std::string schedule = "1f1b", checkpoint_dir;
  float learning_rate = 3e-3f;
  bool resume = false;
};

params_t initial_params() {
  const model::params<> p = model::init(random::key_from_seed(0));
  ends<> o;
  o.wte = p.wte, o.lnf_g = p.lnf_g, o.lnf_b = p.lnf_b;
  std::copy_n(p.wpe.data(), o.wpe.size, o.wpe.data());  // the first `length` positions
  return {o, p.layer};
}

double learning_rate(const options& o, int step) {
  if (step < o.warmup) return o.learning_rate * static_cast<double>(step) / o.warmup;
  const double t = std::min(1.0, static_cast<double>(step - o.warmup) / std::max(1, o.steps - o.warmup));
  return 0.5 * o.learning_rate * (1.0 + std::cos(3.14159265358979323846 * t));
}

template <std::size_t S, class Sched, bool Processes = false>
int train(const options& o, const td::chunked_text& chunks) {
  using stages = std::conditional_t<Processes, mesh<axis<"stage", S, over_processes>>, mesh<axis<"stage", std::max<std::size_t>(S, 1)>>>;
  const auto pipe = pipeline<stages, "stage", Sched, microbatches>(first, stage, last);
  const bool speaks = distributed::process_index() == 0;  // prints and writes checkpoints
  params_t params = initial_params();
  state_t state = optimizer{}.init(params);
  const auto shuffle_key = random::key_from_seed(1);
  auto stream = td::from_vector(chunks.chunks) | td::shuffle(shuffle_key) | td::bucket_by_length<bucket>();
  std::optional<io::checkpoint_manager> ckpt;
  int step = 0;
  if (!o.checkpoint_dir.empty()) {
    ckpt.emplace(o.checkpoint_dir, io::checkpoint_options{.keep = 2, .asynchronous = false});
    if (o.resume) {  // every process reads the newest checkpoint
      if (auto latest = ckpt->restore_latest()) {
        latest->load(io::slot("params", params), io::slot("opt_state", state));
        step = static_cast<int>(latest->step);
        stream.restore(td::stream_position::from_json(latest->get("data_position")));
        if (speaks) std::printf("resumed from %s (step %d)\n", latest->path.c_str(), step);
      }
    }
  }
  if (!speaks) {
  } else if constexpr (S == 0) {
    std::printf("char_lm_pipelined: %zu blocks of d_model %zu, no pipeline: accumulate_gradients over %zu microbatches of %zu x %zu "
                "characters\n", config.layers, width, microbatches, rows / microbatches, length);
  } else {
    std::printf("char_lm_pipelined: %zu blocks of d_model %zu in %zu stages, schedule %s, %zu microbatches of %zu x %zu characters\n",
                config.layers, width, S, std::string(Sched::name).c_str(), microbatches, rows / microbatches, length);
    std::fputs(pipe.dump(std::get<0>(params), std::get<1>(params), inputs_t{}, targets_t{}).c_str(), stdout);
  }
  using clock = std::chrono::steady_clock;
  auto window_start = clock::now();
  const int first_step = step;
  std::uint64_t window_chars = 0, steady_chars = 0;  // steady: after the first report (its first call derives the plans)
  double steady_seconds = 0;
  double window_bits = 0;
  int window_steps = 0;
  for (; step < o.steps; ++step) {
    auto batch = stream.next();
    if (!batch) {  // a new epoch
      stream = td::from_vector(chunks.chunks) | td::shuffle(random::fold_in(shuffle_key, static_cast<std::uint32_t>(step))) |
               td::bucket_by_length<bucket>();
      batch = stream.next();
    }
    const auto& b = std::get<0>(*batch);
    inputs_t in;
    targets_t targets;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < length; ++j) {
        std::get<0>(in)[r * length + j] = j == 0 ? 0 : b.tokens[r * length + j - 1];
        targets[r * length + j] = b.tokens[r * length + j];
        std::get<1>(in)[r * length + j] = b.mask[r * length + j];
        window_chars += b.mask[r * length + j] ? 1 : 0;
      }
    auto [loss, grads] = [&] {
      if constexpr (S == 0) return accumulate_gradients<microbatches>(whole)(params, in, targets);
      else return pipe(std::get<0>(params), std::get<1>(params), in, targets);
    }();
    tensor<float, shape<>> lr{static_cast<float>(learning_rate(o, step))};
    std::tie(params, state) = update(params, state, grads, lr);
    window_bits += loss[0] / std::log(2.0);
    ++window_steps;
    if (speaks && ((step + 1) % o.report_every == 0 || step + 1 == o.steps)) {
      const double seconds = std::chrono::duration<double>(clock::now() - window_start).count();
      std::printf("step %d  loss %.4f bits/char  %.0f chars/s\n", step + 1, window_bits / window_steps,
                  static_cast<double>(window_chars) / seconds);
      if (step + 1 - first_step > o.report_every) steady_chars += window_chars, steady_seconds += seconds;
      std::fflush(stdout);
      window_start = clock::now(), window_chars = 0, window_bits = 0, window_steps = 0;
    }
    if (ckpt && speaks && ((o.save_every > 0 && (step + 1) % o.save_every == 0) || step + 1 == o.steps)) {
      io::snapshot s(static_cast<std::uint64_t>(step + 1));
      s.add("params", params).add("opt_state", state).set("data_position", stream.position().to_json());
      ckpt->save(std::move(s));
    }
  }
  if (ckpt) ckpt->wait();
  if (speaks && steady_seconds > 0)
    std::printf("after the first %d steps: %.0f chars/s over %.1f s\n", o.report_every, static_cast<double>(steady_chars) / steady_seconds,
                steady_seconds);
  return 0;
}

template <std::size_t S, bool Processes = false>
int train_with_schedule(const options& o, const td::chunked_text& chunks) {
  if (o.schedule == "gpipe") return train<S, schedules::gpipe, Processes>(o, chunks);
  if (o.schedule == "zero_bubble") return train<S, schedules::zero_bubble, Processes>(o, chunks);
  return train<S, schedules::one_f_one_b, Processes>(o, chunks);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  io::command_line cl("char_lm_pipelined", "Trains the char-level language model with its blocks in pipeline stages.");
  cl.whole("--pipeline", o.pipeline, {0, 2, "0 (no pipeline: accumulate_gradients, one program)"}, "S",
           "pipeline stages, each a thread (default 1)");
  cl.choice("--schedule", o.schedule, {"gpipe", "1f1b", "zero_bubble"}, "the pipeline schedule (default 1f1b)");
  cl.whole("--steps", o.steps, {1, 1'000'000}, "N", "train steps (default 100)");
  cl.whole("--report-every", o.report_every, {1, 1'000'000}, "N", "steps per report line (default 10)");
  cl.positive("--learning-rate", o.learning_rate, "X", "the peak learning rate (default 0.003)");
  cl.path("--checkpoint-dir", o.checkpoint_dir, "DIR", "where checkpoints go (at the end, and every --save-every steps)");
  cl.whole("--save-every", o.save_every, {0, 1'000'000, "0 (at the end only)"}, "N", "steps between checkpoints (default 0)");
  cl.toggle("--resume", o.resume, "continue from the newest checkpoint in --checkpoint-dir");
  if (distributed::started_by_mpirun()) distributed::init(argc, argv);
  const std::size_t processes = distributed::process_count();
  if (const auto stop = cl.parse(argc, argv, [&] {
        std::vector<std::string> problems;
        if (processes > 1 && (processes != 2 || o.pipeline != 2))
          problems.push_back("under mpirun each process runs one stage: give --pipeline 2 with mpirun -np 2 (here " +
                             std::to_string(processes) + " processes, --pipeline " + std::to_string(o.pipeline) + ")");
        return problems;
      }))
    return *stop;
  const td::text_corpus text = td::read_fortunes(td::fortunes_dir());
  const td::chunked_text chunks = td::chunk_records(text.records, length);
  if (distributed::process_index() == 0)
    std::printf("data: %zu records in %zu chunks of at most %zu characters\n", text.records.size(), chunks.chunks.size(), length);
  if (processes == 2) return train_with_schedule<2, true>(o, chunks);
  if (o.pipeline == 0) return train<0, schedules::gpipe>(o, chunks);
  return o.pipeline == 2 ? train_with_schedule<2>(o, chunks) : train_with_schedule<1>(o, chunks);
}
