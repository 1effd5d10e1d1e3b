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

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: char_lm [options]   (--flag value or --flag=value)\n"
               "  --steps N            train steps (default 5000), each one bucket's batch of 1024 positions\n"
               "  --learning-rate X    AdamW's peak learning rate (default 0.005): linear warm-up, cosine decay to 0\n"
               "  --warmup N           warm-up steps (default 100)\n"
               "  --precision P        f32 (default) or bf16: bf16 matmuls, f32 master weights, optimizer state,\n"
               "                       LayerNorm, softmax and loss\n"
               "  --seed N             initialisation, shuffling and sampling seed (default 0)\n"
               "  --eval-every N       validation loss (bits per character) every N steps and at the end (default 500)\n"
               "  --sample-every N     print a sample every N steps and at the end (default 500; 0: never)\n"
               "  --sample-length N    characters per sample, 1 to 250 (default 160)\n"
               "  --temperature X      sampling temperature (default 0.8)\n"
               "  --prompt TEXT        the samples' prompt (default \"The \")\n"
               "  --data-dir DIR       fortune files (default $TESSEL_FORTUNES_DIR or /usr/share/games/fortunes)\n"
               "  --checkpoint-dir DIR checkpoints (parameters, AdamW state, the pipeline's position) at the end and\n"
               "                       every --save-every steps; --keep N of them (default 3)\n"
               "  --resume             continue from the newest intact checkpoint of DIR (the same flags): the result\n"
               "                       is bit-identical to an uninterrupted run\n"
               "  --resume-or-start    --resume when DIR holds an intact checkpoint, else a new run (a job that is\n"
               "                       restarted with the same command line after a crash, or the first time)\n"
               "  --overwrite          a new run into a DIR holding checkpoints deletes them first (each named on\n"
               "                       stderr); without it such a DIR is refused\n"
               "  --trace FILE         a Chrome trace of the run\n"
               "  --curve PREFIX       PREFIX.csv: step, train and validation bits per character at each evaluation;\n"
               "                       PREFIX.svg: the same drawn, at the end\n"
               "  --export DIR         the initial weights and every step's batch, learning rate and loss, for\n"
               "                       bench/torch_char_lm.py train DIR\n"
               "  --devices N          1 (default), 2 or 4: data parallel on a mesh (\"data\", N) of host devices, each\n"
               "                       training on 1/N of every batch's rows (f32 only); the same steps as 1 device,\n"
               "                       the loss summed in another order\n"
               "  --check-pipeline     run one epoch of the input pipeline only and check that no character is lost\n"
               "The last line is a JSON summary. Exit status: 0, 1 (a failure while running), 2 (flags refused).\n");
}

std::optional<std::string> parse_int(const std::string& v, long long lo, long long hi, long long& out) {
  long long n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return "is not a whole number";
  if (n < lo || n > hi) return "is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  out = n;
  return std::nullopt;
}

std::optional<std::string> parse_positive(const std::string& v, float& out) {
  float x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return "is not a number";
  if (!std::isfinite(x) || !(x > 0)) return "is not a finite number greater than 0";
  out = x;
  return std::nullopt;
}

// 0: parsed; 1: --help; 2: refused (the message printed).
int parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i], value;
    if (name == "--help") return 1;
    if (name == "--resume" || name == "--overwrite" || name == "--resume-or-start") {
      (name == "--overwrite" ? o.overwrite : o.resume) = true;
      if (name == "--resume-or-start") o.resume_or_start = true;
      continue;
    }
    if (name == "--check-pipeline") {
      o.check_pipeline = true;
      continue;
    }
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1), name = name.substr(0, eq);
    } else {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "char_lm: %s needs a value (see --help)\n", name.c_str());
        return 2;
      }
      value = argv[++i];
    }
    long long n = 0;
    std::optional<std::string> why;
    auto whole = [&](int& to, long long lo, long long hi) {
      if (!(why = parse_int(value, lo, hi, n))) to = static_cast<int>(n);
    };
    if (name == "--steps") whole(o.steps, 1, 100000000);
    else if (name == "--warmup") whole(o.warmup, 0, 100000000);
    else if (name == "--eval-every") whole(o.eval_every, 0, 100000000);
    else if (name == "--sample-every") whole(o.sample_every, 0, 100000000);
    else if (name == "--sample-length") whole(o.sample_length, 1, 250);
    else if (name == "--save-every") whole(o.save_every, 0, 100000000);
    else if (name == "--keep") whole(o.keep, 1, 1000000);
    else if (name == "--devices") {
      if (value != "1" && value != "2" && value != "4") why = "is not one of 1, 2, 4 (the meshes the data-parallel steps are compiled for)";
      else o.devices = std::stoi(value);
    }
    else if (name == "--seed") {
      if (!(why = parse_int(value, 0, 4294967295ll, n))) o.seed = static_cast<std::uint32_t>(n);
    } else if (name == "--learning-rate") why = parse_positive(value, o.learning_rate);
    else if (name == "--temperature") why = parse_positive(value, o.temperature);
    else if (name == "--precision") {
      if (value != "f32" && value != "bf16") why = "is not one of f32, bf16";
      else o.precision = value;
    } else if (name == "--prompt") o.prompt = value;
    else if (name == "--data-dir") o.data_dir = value;
    else if (name == "--checkpoint-dir") o.checkpoint_dir = value;
    else if (name == "--trace") o.trace = value;
    else if (name == "--curve") o.curve = value;
    else if (name == "--export") o.export_dir = value;
    else {
      std::fprintf(stderr, "char_lm: unknown flag %s (see --help)\n", name.c_str());
      return 2;
    }
    if (why) {
      std::fprintf(stderr, "char_lm: %s '%s' %s\n", name.c_str(), value.c_str(), why->c_str());
      return 2;
    }
  }
  const char* resume_flag = o.resume_or_start ? "--resume-or-start" : "--resume";
  for (const auto& [given, flag] : {std::pair{o.resume, resume_flag}, std::pair{o.overwrite, "--overwrite"}})
    if (given && o.checkpoint_dir.empty()) {
      std::fprintf(stderr, "char_lm: %s needs --checkpoint-dir\n", flag);
      return 2;
    }
  if (o.resume && o.overwrite) {
    std::fprintf(stderr, "char_lm: --overwrite starts a new run and %s continues one: give one of them\n", resume_flag);
    return 2;
  }
  if (o.devices > 1 && o.precision != "f32") {
    std::fprintf(stderr, "char_lm: --devices %d is compiled for --precision f32 only (given %s): give --precision f32, or "
                         "--devices 1\n", o.devices, o.precision.c_str());
    return 2;
  }
  if (o.warmup >= o.steps) o.warmup = o.steps / 10;
  return 0;
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

}  // namespace
}  // namespace char_lm

int main(int argc, char** argv) {
  using namespace char_lm;
  options o;
  if (const int r = parse(argc, argv, o); r != 0) {
    if (r == 1) usage(stdout);  // a refused flag's message comes alone
    return r == 1 ? 0 : 2;
  }
  try {
    const corpus c = load(o);
    if (o.check_pipeline) return check_pipeline(o, c);
    return o.precision == "bf16" ? train<tessel::bfloat16>(o, c) : train<float>(o, c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_lm: %s\n", e.what());
    return 1;
  }
}
