// Trains a character-level Transformer language model (tessel::nn::gpt: 4 pre-LayerNorm blocks, d_model
// 128, 4 heads, byte tokens) on Debian's fortunes with tessel. Records are cut into chunks of at most 256
// characters and bucketed by length into batches of 64x16, 128x8 and 256x4 characters with padding
// masks; each bucket has its own jitted train step (forward, loss, gradients, clipping, AdamW), chosen
// at run time by the pipeline.
//
//   char_lm [--steps 5000] [--learning-rate 0.005] [--warmup 100] [--precision f32|bf16] [--seed 0]
//           [--eval-every 500] [--sample-every 500] [--sample-length 160] [--temperature 0.8] [--prompt TEXT]
//           [--data-dir DIR] [--checkpoint-dir DIR [--resume | --resume-or-start | --overwrite] [--save-every N]
//           [--keep N]]
//           [--trace FILE] [--curve PREFIX] [--export DIR] [--devices 1|2|4] [--check-pipeline]
//
// This file: flags, data, the pipeline check, the export format and the parameters' digest. The train
// step is in char_lm.hpp / char_lm_step.cpp, the loop in char_lm_train.cpp, validation and sampling in
// char_lm_eval.cpp.
#include "char_lm.hpp"

#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <variant>

namespace char_lm {

tensor_dir::tensor_dir(const std::string& dir) : dir_(dir) {
  std::filesystem::create_directories(dir);
  manifest_ = std::fopen((dir + "/manifest.txt").c_str(), "w");
  if (!manifest_) throw std::runtime_error("char_lm: cannot write " + dir + "/manifest.txt");
}

void tensor_dir::write(const std::string& name, const void* data, std::size_t bytes, const char* dtype, const std::size_t* dims,
                       std::size_t rank) {
  std::FILE* f = std::fopen((dir_ + "/" + name + ".bin").c_str(), "wb");
  if (!f || std::fwrite(data, 1, bytes, f) != bytes) throw std::runtime_error("char_lm: cannot write " + dir_ + "/" + name + ".bin");
  std::fclose(f);
  std::fprintf(manifest_, "%s %s", name.c_str(), dtype);
  for (std::size_t i = 0; i < rank; ++i) std::fprintf(manifest_, " %zu", dims[i]);
  std::fprintf(manifest_, "\n");
  std::fflush(manifest_);
}

void tensor_dir::write_params(const std::string& prefix, const params_t& p) {
  tessel::tree::for_each_named(p, [&](const std::string& name, const auto& t) { write(prefix + name, t); });
}

std::string params_digest(const params_t& p) {
  std::uint64_t h = 1469598103934665603ull;
  tessel::tree::for_each(p, [&](const auto& t) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(t.data());
    for (std::size_t i = 0; i < sizeof(*t.data()) * std::remove_cvref_t<decltype(t)>::shape_type::size; ++i)
      h = (h ^ bytes[i]) * 1099511628211ull;
  });
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, h);
  return text;
}

namespace {

tessel::io::run_request run_request_of(const options& o) {
  return {.directory = !o.checkpoint_dir.empty(), .resume = o.resume, .resume_or_start = o.resume_or_start,
          .overwrite = o.overwrite, .save_every = o.save_every > 0};
}

// Returns the exit status when the program stops here: 0 after --help, 2 after a refusal (every problem
// printed).
std::optional<int> parse(int argc, char** argv, options& o) {
  constexpr long long many = 100000000;
  tessel::io::command_line cl("char_lm", "Trains a character-level Transformer language model on Debian's fortunes.");
  cl.whole("--steps", o.steps, {1, many}, "N", "train steps (default 5000), each one bucket's batch of 1024 positions")
      .positive("--learning-rate", o.learning_rate, "X", "AdamW's peak learning rate (default 0.005): linear warm-up, cosine decay to 0")
      .whole("--warmup", o.warmup, {0, many}, "N", "warm-up steps (default 100; a tenth of --steps when not fewer)")
      .choice("--precision", o.precision, {"f32", "bf16"},
              "f32 (default) or bf16: bf16 matmuls, f32 master weights, optimizer state,\nLayerNorm, softmax and loss")
      .whole("--seed", o.seed, {0, 4294967295LL}, "N", "initialisation, shuffling and sampling seed (default 0)")
      .whole("--eval-every", o.eval_every, {0, many, "0 (only at the end)"}, "N",
             "validation loss (bits per character) every N steps and at the end (default 500)")
      .whole("--sample-every", o.sample_every, {0, many, "0 (never)"}, "N", "print a sample every N steps and at the end (default 500)")
      .whole("--sample-length", o.sample_length, {1, static_cast<long long>(longest) - 1}, "N",
             "characters per sample (default 160); with the prompt at most 255")
      .positive("--temperature", o.temperature, "X", "sampling temperature (default 0.8)")
      .text("--prompt", o.prompt, "TEXT", "the samples' prompt (default \"The \")")
      .path("--data-dir", o.data_dir, "DIR", "fortune files (default $TESSEL_FORTUNES_DIR or /usr/share/games/fortunes)")
      .path("--checkpoint-dir", o.checkpoint_dir, "DIR",
            "checkpoints (parameters, AdamW state, the pipeline's position) at the end and\n"
            "every --save-every steps; --keep N of them (default 3). Each records its run:\n"
            "a random id and the flags that shape the state (--precision, --seed, --steps,\n"
            "--learning-rate, --warmup, --devices). DIR/lock stops a second run writing DIR")
      .toggle("--resume", o.resume,
              "continue from the newest intact checkpoint of DIR (the same flags): the result\nis bit-identical to an uninterrupted run")
      .toggle("--resume-or-start", o.resume_or_start,
              "--resume when DIR holds an intact checkpoint, else a new run (a job that is\n"
              "restarted with the same command line after a crash, or the first time)")
      .toggle("--overwrite", o.overwrite,
              "a new run into a DIR holding checkpoints deletes them first (each named on\nstderr); without it such a DIR is refused")
      .whole("--save-every", o.save_every, {0, many, "0 (only at the end)"}, "N", "also save every N steps (default 0)")
      .whole("--keep", o.keep, {1, 1000000}, "N", "checkpoints of this run kept (default 3)")
      .path("--trace", o.trace, "FILE", "a Chrome trace of the run")
      .path("--curve", o.curve, "PREFIX",
            "PREFIX.csv: step, train and validation bits per character at each evaluation;\nPREFIX.svg: the same drawn, at the end")
      .path("--export", o.export_dir, "DIR",
            "the initial weights and every step's batch, learning rate and loss, for\nbench/torch_char_lm.py train DIR")
      .choice("--devices", o.devices, {1, 2, 4},
              "1 (default), 2 or 4: data parallel on a mesh (\"data\", N) of host devices, each\n"
              "training on 1/N of every batch's rows (f32 only); the same steps as 1 device,\nthe loss summed in another order")
      .toggle("--check-pipeline", o.check_pipeline, "run one epoch of the input pipeline only and check that no character is lost")
      .epilogue("The last line is a JSON summary (a figure the run did not measure is null).");
  const auto rules = [&o] {
    std::vector<std::string> errors = run_request_of(o).problems();
    if (o.devices > 1 && o.precision != "f32")
      errors.push_back("--devices " + std::to_string(o.devices) + " is compiled for --precision f32 only (given " + o.precision +
                       "): give --precision f32, or --devices 1");
    // The model sees 256 positions: the start token, the prompt and the sample.
    if (o.sample_every > 0 && 1 + o.prompt.size() + static_cast<std::size_t>(o.sample_length) > longest)
      errors.push_back("--prompt of " + std::to_string(o.prompt.size()) + " bytes and --sample-length " + std::to_string(o.sample_length) +
                       " need " + std::to_string(1 + o.prompt.size() + static_cast<std::size_t>(o.sample_length)) +
                       " positions, and the model sees " + std::to_string(longest) + " (one is the start token): give at most " +
                       std::to_string(longest - 1) + " bytes of the two together, or --sample-every 0");
    return errors;
  };
  if (const auto stop = cl.parse(argc, argv, rules)) return stop;
  if (o.resume_or_start) o.resume = true;
  if (o.warmup >= o.steps) o.warmup = o.steps / 10;
  return std::nullopt;
}

corpus load(const options& o) {
  const td::text_corpus text = td::read_fortunes(o.data_dir.empty() ? td::fortunes_dir() : std::filesystem::path(o.data_dir));
  const td::text_split split = td::split_records(text.records, {.validation = 0.05, .seed = 0});
  corpus c;
  c.train = td::chunk_records(text.records, split.train, longest);
  c.validation = td::chunk_records(text.records, split.validation, longest);
  c.records = text.records.size();
  for (const std::size_t r : split.train) {
    c.train_chars += text.records[r].text.size();
    for (const char ch : text.records[r].text) c.train_byte_sum += static_cast<unsigned char>(ch);
    c.longest_record = std::max(c.longest_record, text.records[r].text.size());
  }
  for (const std::size_t r : split.validation) c.validation_chars += text.records[r].text.size();
  c.train_words = td::vocabulary(text.records, split.train);
  std::printf("data: %zu records (%zu train chunks, %zu characters; %zu validation chunks, %zu characters); longest "
              "record %zu characters; %zu words seen twice in training\n",
              c.records, c.train.chunks.size(), c.train_chars, c.validation.chunks.size(), c.validation_chars, c.longest_record,
              c.train_words.size());
  return c;
}

// One epoch of the training pipeline (the same stages and key as train<C>), without training: every
// character of the training records must come out of the batches once. Records longer than the largest
// bucket are counted with their chunks; the characters and a sum of their byte values in and out.
int check_pipeline(const options& o, const corpus& c) {
  const auto keys = tessel::random::split<3>(tessel::random::key_from_seed(o.seed));
  auto stream = td::from_vector(c.train.chunks) | td::shuffle(keys[1]) |
                td::bucket_by_length<bucket_64, bucket_128, bucket_256>() | td::prefetch(2);
  std::uint64_t bytes_in = 0, bytes_out = 0, chars_out = 0, long_records = 0, long_chunks = 0;
  bytes_in = c.train_byte_sum;
  for (std::size_t i = 0; i < c.train.chunks.size(); ++i) {
    if (c.train.piece[i] == 1) ++long_records, long_chunks += 2;
    else if (c.train.piece[i] > 1) ++long_chunks;
  }
  std::map<std::size_t, std::uint64_t> batches;
  while (auto b = stream.next()) {
    std::visit(
        [&](const auto& batch) {
          constexpr std::size_t L = std::remove_cvref_t<decltype(batch)>::length;
          const auto lb = to_lm_batch(batch);
          for (std::size_t i = 0; i < lb.targets.size; ++i)
            if (lb.mask[i]) bytes_out += static_cast<std::uint64_t>(lb.targets[i]), ++chars_out;
          ++batches[L];
        },
        *b);
  }
  const bool ok = chars_out == c.train_chars && bytes_out == bytes_in && long_records > 0;
  std::printf("{\"records_longer_than_%zu\": %" PRIu64 ", \"their_chunks\": %" PRIu64 ", \"chars_in\": %zu, \"chars_out\": %" PRIu64
              ", \"byte_sum_in\": %" PRIu64 ", \"byte_sum_out\": %" PRIu64 ", \"batches\": {\"64\": %" PRIu64 ", \"128\": %" PRIu64
              ", \"256\": %" PRIu64 "}}\n",
              longest, long_records, long_chunks, c.train_chars, chars_out, bytes_in, bytes_out, batches[64], batches[128], batches[256]);
  std::printf(ok ? "pipeline: no character lost\n" : "pipeline: characters LOST or no long record\n");
  return ok ? 0 : 1;
}

// Every output path, before anything is trained or deleted: the directories of --trace and --curve must
// exist; --export's directory is created. The exit status when one cannot be written (the reasons printed).
std::optional<int> check_outputs(const options& o) {
  std::vector<std::string> errors;
  auto check = [&](const char* flag, const std::string& shown, const std::filesystem::path& file) {
    if (const auto why = tessel::io::unwritable(file)) errors.push_back(std::string(flag) + " '" + shown + "': " + *why);
  };
  if (!o.trace.empty()) check("--trace", o.trace, o.trace);
  if (!o.curve.empty()) check("--curve", o.curve, o.curve + ".csv");
  if (!o.export_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.export_dir, ec);
    if (ec) errors.push_back("--export '" + o.export_dir + "': cannot create it: " + ec.message());
    else check("--export", o.export_dir, std::filesystem::path(o.export_dir) / "manifest.txt");
  }
  for (const std::string& e : errors) std::fprintf(stderr, "char_lm: %s\n", e.c_str());
  if (errors.empty()) return std::nullopt;
  return tessel::io::exit_refused;
}

// Locks --checkpoint-dir and decides what this run is (tessel::io::run_directory: a new run, an
// overwrite, or a resume checked against the flags that shape the state). The exit status when the
// program must stop (the reason printed).
std::optional<int> prepare_directory(options& o) {
  if (o.checkpoint_dir.empty()) return std::nullopt;
  const tessel::io::run_start start = run_request_of(o).start();
  char learning_rate[32];  // the shortest text that reads back as the flag's float
  const auto written = std::to_chars(learning_rate, learning_rate + sizeof learning_rate - 1, o.learning_rate);
  *written.ptr = '\0';
  std::vector<tessel::io::run_setting> settings = {{"--precision", "precision", o.precision},
                                                   {"--seed", "seed", std::to_string(o.seed)},
                                                   {"--steps", "steps", std::to_string(o.steps)},
                                                   {"--learning-rate", "learning_rate", learning_rate},
                                                   {"--warmup", "warmup", std::to_string(o.warmup)},
                                                   {"--devices", "devices", std::to_string(o.devices)}};
  try {
    o.directory = std::make_shared<tessel::io::run_directory>(
        o.checkpoint_dir, tessel::io::run_directory_options{.program = "char_lm", .start = start, .settings = std::move(settings),
                                                            .keep = static_cast<std::size_t>(o.keep)});
  } catch (const tessel::io::run_refused& e) {
    std::fprintf(stderr, "char_lm: %s\n", e.what());
    return tessel::io::exit_refused;
  }
  return std::nullopt;
}

}  // namespace
}  // namespace char_lm

int main(int argc, char** argv) {
  using namespace char_lm;
  options o;
  if (const auto stop = parse(argc, argv, o)) return *stop;
  if (const auto stop = check_outputs(o)) return *stop;
  try {
    const corpus c = load(o);
    if (c.train.chunks.empty()) {
      const std::string dir = tessel::io::quoted(o.data_dir.empty() ? td::fortunes_dir() : std::filesystem::path(o.data_dir));
      std::fprintf(stderr, "char_lm: %s holds no fortune records for training (%zu records in all): give --data-dir a directory "
                   "of fortune files (records separated by lines of '%%'), such as /usr/share/games/fortunes\n", dir.c_str(), c.records);
      return tessel::io::exit_refused;
    }
    if (o.check_pipeline) return check_pipeline(o, c);
    if (const auto stop = prepare_directory(o)) return *stop;
    return o.precision == "bf16" ? train<tessel::bfloat16>(o, c) : train<float>(o, c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_lm: %s\n", e.what());
    return tessel::io::exit_failed;
  }
}
