// Trains a classifier on Fashion-MNIST (Debian's dataset-fashion-mnist) with tessel: the whole train
// step (forward, loss, gradients, Adam update) is one jitted function, planned at compile time.
//
//   fashion_mnist [--model mlp|cnn] [--epochs 10] [--batch-size 128] [--learning-rate 0.001 (cnn: 0.002)]
//                 [--precision f32|bf16] [--seed 0] [--data-dir DIR | --tfrecord-dir DIR] [--steps N]
//                 [--checkpoint-dir DIR [--resume | --resume-or-start | --overwrite] [--save-every N] [--keep N]]
//                 [--trace FILE] [--curve PREFIX]
//   fashion_mnist --write-tfrecord DIR [--shards 4] [--data-dir DIR]
//
// This file: the flags (tessel::io::command_line) and the rules between them, output paths checked before
// training, the checkpoint directory's settings (tessel::io::run_directory: its lock, the run's identity,
// what to resume), data loading, the curve (CSV, SVG), progress and checkpoint bookkeeping (run_log).
// The models and the train step are in fashion_mnist.hpp, instantiated by fashion_mnist_steps.cpp.
#include "fashion_mnist.hpp"
#include "curve_svg.hpp"
#include "tessel/kernels/collective.hpp"
#if TESSEL_FM_PROCESSES
#include "tessel/distributed.hpp"
#endif

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <utility>

namespace fashion_mnist {

namespace {

constexpr long long max_count = 2147483647;

tessel::io::run_request run_request_of(const options& o) {
  return {.directory = !o.checkpoint_dir.empty(), .resume = o.resume, .resume_or_start = o.resume_or_start,
          .overwrite = o.overwrite, .save_every = o.save_every > 0};
}

}  // namespace

// Every problem of the command line is reported (on stderr, one line each), not only the first. Returns
// the exit status when the program stops here (0 after --help).
std::optional<int> parse(int argc, char** argv, options& o) {
#if TESSEL_FM_PROCESSES
  o.processes = static_cast<int>(tessel::distributed::process_count());
#endif
  tessel::io::command_line cl("fashion_mnist", "Trains a classifier on Fashion-MNIST: the whole train step is one jitted function.");
  cl.choice("--model", o.model, {"mlp", "cnn"},
            "mlp (784-512-256-10, relu) or cnn (conv 3x3x32, maxpool 2, conv 3x3x64,\nmaxpool 2, dense 128, dense 10: the classic small CNN)")
      .whole("--epochs", o.epochs, {1, 100000}, "N", "passes over the 60000 training images (default 10)")
      .choice("--batch-size", o.batch_size, {32, 64, 128, 256}, "each size is its own compiled step (default 128)")
      .positive("--learning-rate", o.learning_rate, "X",
                "Adam's peak learning rate, decayed to 0 by a cosine (default 0.001\nfor mlp, 0.002 for cnn)")
      .choice("--precision", o.precision, {"f32", "bf16"},
              "f32 (default) or bf16: bf16 activations and gradients, f32 master\nweights, optimizer state and loss")
      .whole("--seed", o.seed, {0, 4294967295LL}, "N", "the PRNG seed for initialisation and shuffling (default 0)")
      .path("--data-dir", o.data_dir, "DIR",
            "where the *-idx?-ubyte.gz files are (default: $TESSEL_FASHION_MNIST_DIR\nor /usr/share/datasets/fashion-mnist)")
      .path("--tfrecord-dir", o.tfrecord_dir, "DIR",
            "read the data from DIR/train-*.tfrecord and DIR/test-*.tfrecord instead\n"
            "(tf.train.Examples: \"image\" 784 bytes, \"label\" an int64), as --write-tfrecord\n"
            "writes them; the files of a split are interleaved in name order")
      .path("--write-tfrecord", o.write_tfrecord, "DIR",
            "write the IDX data (--data-dir) to DIR as TFRecord shards, --shards files per\n"
            "split (example i in file i mod N), then exit")
      .whole("--shards", o.shards, {1, 1000}, "N", "files per split that --write-tfrecord writes (default 4)")
      .whole("--steps", o.steps, {0, max_count, "0 (the whole epoch)"}, "N",
             "stop each epoch after N steps (a quick check; default 0: the whole epoch)")
      .path("--checkpoint-dir", o.checkpoint_dir, "DIR",
            "save checkpoints (parameters, Adam state, step, random key, data position)\n"
            "to DIR/ckpt-<step>.safetensors: atomically, on a background thread, at the\n"
            "end of every epoch and every --save-every steps; the last --keep are kept.\n"
            "Each records its run: a random id and the flags that shape the state\n"
            "(--model, --precision, --batch-size, --seed, --epochs, --steps,\n"
            "--learning-rate, --devices, --tensor-parallel). DIR/lock stops a second run\nwriting DIR at the same time")
      .toggle("--resume", o.resume,
              "continue the run in --checkpoint-dir from its newest intact checkpoint (a\n"
              "damaged newer file is skipped); the flags that shape the state must be the\n"
              "run's. The result is bit-identical to an uninterrupted run. Refused when DIR\n"
              "holds no intact checkpoint, listing each file and why it is unusable")
      .toggle("--resume-or-start", o.resume_or_start, "--resume, or a new run when DIR holds no intact checkpoint")
      .toggle("--overwrite", o.overwrite,
              "a new run (no --resume) into a DIR holding checkpoints deletes them first;\nwithout it such a run is refused")
      .whole("--save-every", o.save_every, {0, max_count, "0 (only at the end of each epoch)"}, "N",
             "also save every N steps (default 0: only at the end of each epoch)")
      .whole("--keep", o.keep, {1, max_count}, "N", "checkpoints of this run kept (default 3); damaged ones are deleted")
      .path("--trace", o.trace, "FILE",
            "write a Chrome trace (Perfetto, chrome://tracing): steps, named scopes, the\n"
            "executor's kernels, per-step time and throughput counters, the warm-up mark")
      .choice("--devices", o.devices, {1, 2, 4},
              "1 (default), 2 or 4: data parallel on a mesh (\"data\", N) of host devices, each\n"
              "a thread with its own arena; the batch is split over them, parameters and\n"
              "Adam state replicated, gradients averaged by an all-reduce. With --batch-size 128")
      .toggle("--fully-sharded", o.fully_sharded,
              "with --devices 2 or 4 (--model mlp, --precision f32; 2 also under mpirun -np 2):\n"
              "parameters and Adam state split over the devices too (FSDP, ZeRO-3: jit with\n"
              "shardings gathers each parameter before use and reduce-scatters each gradient;\n"
              "each device updates its 1/N; b3, f32[10], stays whole)")
      .toggle("--tensor-parallel", o.tensor_parallel,
              "with --devices 4 (--model mlp, --precision f32; also under mpirun -np 2, \"data\"\n"
              "across the processes): a mesh (\"data\", 2) x (\"model\", 2); the batch split over\n"
              "\"data\", the first two layers over \"model\" as Megatron's MLP (w1, b1 by columns,\n"
              "w2 by rows; one all-reduce over \"model\" a step, inserted by jit with shardings)")
      .toggle("--check-finite", o.check_finite,
              "after every kernel, search its result for a NaN or an infinity: the first\n"
              "kernel that stores one stops training, named by its fused primitives and\n"
              "type, with the step (like JAX's jax_debug_nans; slower)")
      .path("--curve", o.curve, "PREFIX",
            "write the loss/accuracy curve to PREFIX.csv and PREFIX.svg (default with\n--checkpoint-dir: DIR/curve; without it: no curve)")
      .epilogue("Output paths are checked before training (their directories must exist; DIR is created). A loss that\n"
                "is not finite stops training at that step. On a terminal a progress bar shows each epoch; otherwise\n"
                "one line per epoch. The last line is a JSON summary: test_accuracy, epoch_seconds,\n"
                "samples_per_second, peak_bytes (the train step's plan), run (the checkpoints' run id).");
  const auto rules = [&o] {
    std::vector<std::string> errors;
    if (!TESSEL_FM_DATA_PARALLEL && o.devices != 1)
      errors.push_back("--devices " + std::to_string(o.devices) +
                       " needs the data-parallel steps, which this build leaves out (TESSEL_SANITIZE): give --devices 1");
    for (std::string& p : run_request_of(o).problems()) errors.push_back(std::move(p));
    if (!o.tfrecord_dir.empty() && !o.data_dir.empty())
      errors.push_back("--tfrecord-dir and --data-dir name two sources of the data: give one");
    if (!o.write_tfrecord.empty() && !o.tfrecord_dir.empty())
      errors.push_back("--write-tfrecord writes the IDX files of --data-dir as TFRecord shards: it does not read --tfrecord-dir");
    const bool cnn_f32 = o.model == "cnn" && o.precision == "f32";
    if (o.processes > 1 && (o.processes != 2 || !((o.devices == 2 && (o.model == "mlp" || cnn_f32)) ||
                                                  (o.devices == 4 && o.tensor_parallel))))
      errors.push_back("mpirun -np " + std::to_string(o.processes) + ": a run over processes is compiled for --devices 2 "
                       "(one device in each process; --model mlp, or cnn in f32), or --devices 4 --tensor-parallel (two in each), "
                       "under mpirun -np 2; given --model " + o.model + " --precision " + o.precision + " --devices " +
                       std::to_string(o.devices));
    if (o.fully_sharded && (o.devices == 1 || o.model != "mlp" || o.precision != "f32" || !TESSEL_FM_DATA_PARALLEL))
      errors.push_back("--fully-sharded is compiled for --devices 2 or 4 with --model mlp --precision f32; given --devices " +
                       std::to_string(o.devices) + " --model " + o.model + " --precision " + o.precision);
    if (o.tensor_parallel && (o.devices != 4 || o.fully_sharded || o.model != "mlp" || o.precision != "f32" || !TESSEL_FM_DATA_PARALLEL))
      errors.push_back("--tensor-parallel is compiled for --devices 4 (a mesh of 2 x 2) with --model mlp --precision f32, without "
                       "--fully-sharded; given --devices " + std::to_string(o.devices) + " --model " + o.model + " --precision " +
                       o.precision + (o.fully_sharded ? " --fully-sharded" : ""));
    if (o.devices > 1 && o.batch_size != 128)
      errors.push_back("--devices " + std::to_string(o.devices) + " is compiled for --batch-size 128 only (given " +
                       std::to_string(o.batch_size) + "): give --batch-size 128, or --devices 1");
    return errors;
  };
  if (const auto stop = cl.parse(argc, argv, rules)) return stop;
  // Adam's peak rate for the model, from runs of each seed: the CNN at 0.001 ends 5 epochs at 0.911-0.915
  // test accuracy, at 0.002 at 0.917-0.921 (0.003: 0.917); the MLP ends 10 epochs at 0.898 with 0.001.
  if (o.learning_rate == 0) o.learning_rate = o.model == "cnn" ? 2e-3f : 1e-3f;
  if (o.resume_or_start) o.resume = true;
  if (o.curve.empty() && !o.checkpoint_dir.empty()) o.curve = (std::filesystem::path(o.checkpoint_dir) / "curve").string();
  return std::nullopt;
}

// ---- output paths and the checkpoint directory ------------------------------------------------------

namespace {

std::size_t steps_per_epoch(const options& o) {
  const std::size_t full = tessel::data::fashion_mnist_train_size / static_cast<std::size_t>(o.batch_size);
  return o.steps > 0 ? std::min(full, static_cast<std::size_t>(o.steps)) : full;
}

// The shortest text that reads back as `v`.
std::string float_text(float v) {
  char buf[48];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

// The flags that shape a run's state, recorded in each checkpoint and checked when it resumes.
// --tensor-parallel came after the first checkpoints: one that does not record it ran without it.
std::vector<tessel::io::run_setting> run_settings(const options& o) {
  return {{"--model", "model", o.model},
          {"--precision", "precision", o.precision},
          {"--batch-size", "batch_size", std::to_string(o.batch_size)},
          {"--seed", "seed", std::to_string(o.seed)},
          {"--epochs", "epochs", std::to_string(o.epochs)},
          {"--steps", "steps_per_epoch", std::to_string(steps_per_epoch(o))},
          {"--learning-rate", "learning_rate", float_text(o.learning_rate)},
          {"--devices", "devices", std::to_string(o.devices)},
          {"--tensor-parallel", "tensor_parallel", o.tensor_parallel ? "true" : "false", "false"}};
}

void error(const std::string& text) { std::fprintf(stderr, "fashion_mnist: %s\n", text.c_str()); }

}  // namespace

// Every output path, before anything is trained or deleted: --checkpoint-dir is created (the default
// --curve is in it), the directories of --trace and --curve must exist. False (the reasons printed) when
// one cannot be written.
bool check_outputs(const options& o) {
  std::vector<std::string> errors;
  auto check = [&](const char* flag, const std::string& shown, const std::filesystem::path& file) {
    if (const auto why = tessel::io::unwritable(file)) errors.push_back(std::string(flag) + " '" + shown + "': " + *why);
  };
  bool directory = true;
  if (!o.checkpoint_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.checkpoint_dir, ec);
    directory = !ec;
    if (ec) errors.push_back("--checkpoint-dir '" + o.checkpoint_dir + "': cannot create it: " + ec.message());
    else check("--checkpoint-dir", o.checkpoint_dir, std::filesystem::path(o.checkpoint_dir) / "ckpt");
  }
  if (!o.trace.empty()) check("--trace", o.trace, o.trace);
  if (!o.curve.empty() && directory) check("--curve", o.curve, o.curve + ".csv");
  for (const std::string& e : errors) error(e);
  return errors.empty();
}

// Locks --checkpoint-dir and decides what this run is (tessel::io::run_directory: a new run, an
// overwrite, or a resume checked against the flags). A process of a run over several that does not write
// only reads what to resume. Returns the exit status when the program must stop (the reason printed).
std::optional<int> prepare_directory(options& o, bool writer) {
  const tessel::io::run_start start = run_request_of(o).start();
  try {
    o.directory = std::make_shared<tessel::io::run_directory>(
        o.checkpoint_dir, tessel::io::run_directory_options{.program = "fashion_mnist", .start = start, .settings = run_settings(o),
                                                            .keep = static_cast<std::size_t>(o.keep), .writer = writer});
  } catch (const tessel::io::run_refused& e) {
    error(e.what());
    return tessel::io::exit_refused;
  } catch (const std::exception& e) {
    error(std::string("--checkpoint-dir: ") + e.what());
    return tessel::io::exit_failed;
  }
  return std::nullopt;
}

// ---- the data: IDX files, or TFRecord shards ---------------------------------------------------------

tessel::data::fashion_mnist load_idx(const options& o) {
  return tessel::data::load_fashion_mnist(o.data_dir.empty() ? tessel::data::fashion_mnist_dir() : std::filesystem::path(o.data_dir));
}

// --write-tfrecord: each split as o.shards files, example i in file i mod shards, so that reading the files
// interleaved (cycle length: their count) gives the examples in their order.
int write_tfrecord_shards(const options& o) {
  namespace td = tessel::data;
  const td::fashion_mnist raw = load_idx(o);
  const std::filesystem::path dir(o.write_tfrecord);
  std::filesystem::create_directories(dir);
  auto write_split = [&](const std::string& split, const td::idx_array& images, const td::idx_array& labels) {
    const auto px = images.data<std::uint8_t>();
    const auto l = labels.data<std::uint8_t>();
    const auto shards = static_cast<std::size_t>(o.shards);
    std::vector<std::vector<std::string>> files(shards);
    for (std::size_t i = 0; i < l.size(); ++i) {
      td::example e;
      e.features["image"] = std::vector<std::string>{std::string(reinterpret_cast<const char*>(px.data()) + i * pixels, pixels)};
      e.features["label"] = std::vector<std::int64_t>{l[i]};
      files[i % shards].push_back(td::serialize_example(e));
    }
    char name[64];
    for (std::size_t s = 0; s < shards; ++s) {
      std::snprintf(name, sizeof name, "%s-%05zu-of-%05zu.tfrecord", split.c_str(), s, shards);
      td::write_tfrecords(dir / name, files[s]);
    }
    std::printf("%s: %zu examples in %zu files\n", split.c_str(), l.size(), shards);
  };
  write_split("train", raw.train_images, raw.train_labels);
  write_split("test", raw.test_images, raw.test_labels);
  return 0;
}

// DIR/<split>-*.tfrecord[.gz], in name order; none is a format_error.
std::vector<std::filesystem::path> tfrecord_files(const std::filesystem::path& dir, const std::string& split) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(split + "-") && (name.ends_with(".tfrecord") || name.ends_with(".tfrecord.gz"))) files.push_back(entry.path());
  }
  if (ec) throw tessel::io::format_error("--tfrecord-dir " + tessel::io::quoted(dir) + ": " + ec.message());
  if (files.empty())
    throw tessel::io::format_error("--tfrecord-dir " + tessel::io::quoted(dir) + ": no " + split + "-*.tfrecord files (fashion_mnist --write-tfrecord writes them)");
  std::sort(files.begin(), files.end());
  return files;
}

// One split's images (scaled to [0, 1]) and labels from its TFRecord shards, read interleaved.
void load_tfrecord_split(const std::filesystem::path& dir, const std::string& split, std::vector<float>& x, std::vector<std::int32_t>& y) {
  namespace td = tessel::data;
  const std::vector<std::filesystem::path> files = tfrecord_files(dir, split);
  const td::tfrecord_dataset records = td::from_tfrecord(files, {.cycle_length = files.size()});
  x.resize(records.size() * pixels);
  y.resize(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto [file, record] = records.where(i);
    const std::string at = tessel::io::quoted(files[file]) + " record " + std::to_string(record) + ": ";
    td::example e;
    try {
      e = td::parse_example(records.get(0, i));
    } catch (const td::format_error& error) {
      throw td::format_error(at + error.what());
    }
    const auto& image = e.bytes("image");
    const auto& label = e.int64s("label");
    if (image.size() != 1 || image[0].size() != pixels || label.size() != 1 || label[0] < 0 || label[0] >= static_cast<std::int64_t>(classes))
      throw td::format_error(at + "expected \"image\" one bytes value of 784 bytes and \"label\" one int64 in [0, 10)");
    for (std::size_t p = 0; p < pixels; ++p) x[i * pixels + p] = static_cast<float>(static_cast<unsigned char>(image[0][p])) / 255.0f;
    y[i] = static_cast<std::int32_t>(label[0]);
  }
}

dataset load(const options& o) {
  if (!o.tfrecord_dir.empty()) {
    dataset d;
    load_tfrecord_split(o.tfrecord_dir, "train", d.train_x, d.train_y);
    load_tfrecord_split(o.tfrecord_dir, "test", d.test_x, d.test_y);
    // The steps and the evaluation are compiled for Fashion-MNIST's sizes, as load_fashion_mnist checks them.
    if (d.train_y.size() != tessel::data::fashion_mnist_train_size || d.test_y.size() != tessel::data::fashion_mnist_test_size)
      throw tessel::io::format_error("--tfrecord-dir " + tessel::io::quoted(o.tfrecord_dir) + ": " + std::to_string(d.train_y.size()) +
                                     " train and " + std::to_string(d.test_y.size()) + " test examples; expected Fashion-MNIST's " +
                                     std::to_string(tessel::data::fashion_mnist_train_size) + " and " +
                                     std::to_string(tessel::data::fashion_mnist_test_size));
    return d;
  }
  const auto raw = load_idx(o);
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

// ---- the curve: CSV, SVG, and its text in a checkpoint ---------------------------------------------

std::string curve_csv(const std::vector<curve_point>& curve) {
  std::string out = "step,epoch,train_loss,train_accuracy,test_accuracy\n";
  char line[160];
  for (const curve_point& p : curve) {
    std::snprintf(line, sizeof line, "%" PRIu64 ",%.4f,%.9g,%.9g,", p.step, p.epoch, p.loss, p.accuracy);
    out += line;
    if (!std::isnan(p.test_accuracy)) {
      std::snprintf(line, sizeof line, "%.9g", p.test_accuracy);
      out += line;
    }
    out += '\n';
  }
  return out;
}

std::vector<curve_point> parse_curve_csv(const std::string& text) {
  std::vector<curve_point> out;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    curve_point p;
    double test = NAN;
    const int n = std::sscanf(line.c_str(), "%" SCNu64 ",%lf,%lf,%lf,%lf", &p.step, &p.epoch, &p.loss, &p.accuracy, &test);
    if (n < 4) throw std::runtime_error("the checkpoint's curve has a malformed line: " + line);
    p.test_accuracy = n == 5 ? test : NAN;
    out.push_back(p);
  }
  return out;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  tessel::io::write_file_atomically(path, [&](tessel::io::output_file& out) { out.write(text); });
}

run_log::run_log(const options& o, std::size_t batch, std::size_t steps, std::size_t peak_bytes)
    : o_(o), batch_(batch), steps_(steps), total_(static_cast<std::uint64_t>(o.epochs) * steps), peak_bytes_(peak_bytes) {
  bar_.set_batch(static_cast<double>(batch));
  if (!o.checkpoint_dir.empty()) {
    if (!o.directory) throw std::logic_error("run_log: --checkpoint-dir without prepare_directory");
    if (o.directory->writer()) ckpt_ = o.directory.get();
  }
}

std::optional<tessel::io::loaded_checkpoint> run_log::resume(tessel::random::key& shuffle_key) {
  auto last = o_.directory ? o_.directory->take_resume() : std::nullopt;
  if (!last) return std::nullopt;
  shuffle_key = last->key();
  const auto position = tessel::data::stream_position::from_json(last->get("data"));
  first_ = last->step;
  if (position.epoch * steps_ + position.index / batch_ != first_)
    throw std::runtime_error(last->path.string() + ": the data position " + position.to_json() + " is not step " + std::to_string(first_));
  epoch_loss_ = number(*last, "epoch_loss_sum");
  epoch_acc_ = number(*last, "epoch_accuracy_sum");
  window_loss_ = number(*last, "window_loss_sum");
  window_acc_ = number(*last, "window_accuracy_sum");
  window_steps_ = static_cast<std::uint64_t>(number(*last, "window_steps"));
  curve_ = parse_curve_csv(last->get("curve"));
  bar_.line("resumed from " + last->path.string() + " at step " + std::to_string(first_) + " (epoch " +
            std::to_string(position.epoch + 1) + ", batch " + std::to_string(position.index / batch_) + ") of run " +
            o_.directory->run());
  epoch_first_ = first_;
  return last;
}

void run_log::start() {
  epoch_start_ = clock::now();
  if (!o_.trace.empty()) {
    tessel::profile::enable();
    tessel::profile::set_thread_name("main");
    tessel::profile::record_peak_memory(peak_bytes_);
  }
  if (o_.check_finite) tessel::run::check_finite(true);  // after the profiler: the check calls its observer
}

// --check-finite: the first kernel since the last check that stored a NaN or an infinity stops the run.
void run_log::check_kernels(std::uint64_t g, const char* program) const {
  if (!o_.check_finite) return;
  const auto bad = tessel::run::first_non_finite();
  if (!bad) return;
  throw std::runtime_error("--check-finite: " + std::string(program) + " of step " + std::to_string(g + 1) + " of " +
                           std::to_string(total_) + " (epoch " + std::to_string(g / steps_ + 1) + ", batch " +
                           std::to_string(g % steps_ + 1) + "): " + bad->to_string() +
                           "; training stopped there, nothing of that step saved"
                           "\nfix: a smaller --learning-rate (this run has " + float_text(o_.learning_rate) + ")");
}

void run_log::after_step(std::uint64_t g, double loss, double acc, double seconds) {
  check_kernels(g, "the train step");
  if (!std::isfinite(loss)) {
    std::string newest;
    if (ckpt_) {
      ckpt_->checkpoints().wait();
      const auto saved = ckpt_->checkpoints().steps();
      newest = saved.empty() ? "; no checkpoint was saved" : "; the newest checkpoint is " + ckpt_->checkpoints().path_of(saved.back()).string();
    }
    throw std::runtime_error("the training loss is " + std::string(std::isnan(loss) ? "NaN" : loss > 0 ? "inf" : "-inf") +
                             " at step " + std::to_string(g + 1) + " of " + std::to_string(total_) + " (epoch " +
                             std::to_string(g / steps_ + 1) + ", batch " + std::to_string(g % steps_ + 1) +
                             "): training stopped there, nothing of that step saved" + newest +
                             "\nfix: a smaller --learning-rate (this run has " + float_text(o_.learning_rate) + ")");
  }
  epoch_loss_ += loss, epoch_acc_ += acc;
  window_loss_ += loss, window_acc_ += acc, ++window_steps_;
  train_seconds_ += seconds;
  if (++trained_ == 5) tessel::profile::mark_warmup_end();  // the first steps fault pages in and fill caches
  const std::size_t done = g % steps_ + 1;
  epoch_rate_ = epoch_samples_per_second(g);
  bar_.update(static_cast<int>(g / steps_ + 1), o_.epochs, done, steps_, epoch_loss_ / static_cast<double>(done),
              epoch_acc_ / static_cast<double>(done), epoch_rate_);
  if ((g + 1) % curve_every == 0 || epoch_end(g)) {
    const auto n = static_cast<double>(window_steps_);
    curve_.push_back({g + 1, static_cast<double>(g + 1) / static_cast<double>(steps_), window_loss_ / n, window_acc_ / n, NAN});
    window_loss_ = window_acc_ = 0, window_steps_ = 0;
  }
}

bool run_log::save_due(std::uint64_t g) const {
  return ckpt_ && (epoch_end(g) || (o_.save_every > 0 && (g + 1) % static_cast<std::uint64_t>(o_.save_every) == 0));
}

void run_log::end_epoch(std::uint64_t g, double test_accuracy) {
  check_kernels(g, "the evaluation after the last step");
  accuracy_ = test_accuracy;
  curve_.back().test_accuracy = test_accuracy;
  const double seconds = std::chrono::duration<double>(clock::now() - epoch_start_).count();
  char text[200];
  const auto n = static_cast<double>(steps_);
  std::snprintf(text, sizeof text, "epoch %d/%d  loss %.4f  train_acc %.4f  test_acc %.4f  %.0f samples/s  %.1f s",
                static_cast<int>(g / steps_ + 1), o_.epochs, epoch_loss_ / n, epoch_acc_ / n, test_accuracy, epoch_rate_,
                seconds);
  bar_.line(text);
  epoch_loss_ = epoch_acc_ = 0;
  epoch_start_ = clock::now();
  epoch_first_ = g + 1;
  write_curve();
}

void run_log::save(tessel::io::snapshot snap, tessel::random::key shuffle_key) {
  const std::uint64_t done = snap.step();
  if (const auto bad = snap.first_non_finite())
    throw std::runtime_error("step " + std::to_string(done) + " left a NaN or an infinity in '" + *bad +
                             "': training stopped there, no checkpoint of it saved\nfix: a smaller --learning-rate (this run has " +
                             float_text(o_.learning_rate) + ")");
  snap.set_key(shuffle_key)
      .set("data", tessel::data::stream_position{done / steps_, (done % steps_) * batch_, {}}.to_json())
      .set("epoch_loss_sum", exact(epoch_loss_))
      .set("epoch_accuracy_sum", exact(epoch_acc_))
      .set("window_loss_sum", exact(window_loss_))
      .set("window_accuracy_sum", exact(window_acc_))
      .set("window_steps", std::to_string(window_steps_))
      .set("curve", curve_csv(curve_));
  ckpt_->save(std::move(snap));
}

void run_log::finish() {
  if (ckpt_) ckpt_->checkpoints().wait();
  if (!o_.trace.empty()) {
    tessel::profile::disable();
    tessel::profile::write_chrome_trace(o_.trace);
    const auto summary = tessel::profile::summarize();
    bar_.line("trace: " + o_.trace + " (" + std::to_string(summary.events) + " events, " + std::to_string(summary.steps) + " steps)");
  }
  const double samples_per_second = trained_ > 0 ? static_cast<double>(trained_ * batch_) / train_seconds_ : 0;
  const double epoch_seconds = samples_per_second > 0 ? static_cast<double>(steps_ * batch_) / samples_per_second : 0;
  // Device 0's time inside collectives (all-reduces of the gradients, loss and accuracy) over the training time.
  const double all_reduce_share = train_seconds_ > 0 ? static_cast<double>(tessel::kernels::collective_nanoseconds()) * 1e-9 / train_seconds_ : 0;
  std::printf("{\"model\": \"%s\", \"precision\": \"%s\", \"batch_size\": %zu, \"epochs\": %d, \"steps\": %" PRIu64
              ", \"devices\": %d, \"fully_sharded\": %s, \"tensor_parallel\": %s, \"resumed_from\": %" PRIu64 ", \"test_accuracy\": %.4f, \"epoch_seconds\": %.3f, \"samples_per_second\": %.0f, "
              "\"peak_bytes\": %zu, \"all_reduce_share\": %.3f, \"run\": %s}\n",
              o_.model.c_str(), o_.precision.c_str(), batch_, o_.epochs, total_, o_.devices, o_.fully_sharded ? "true" : "false", o_.tensor_parallel ? "true" : "false", first_, accuracy_, epoch_seconds,
              samples_per_second, peak_bytes_, all_reduce_share, o_.directory ? ("\"" + o_.directory->run() + "\"").c_str() : "null");
}

std::string run_log::exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);  // round-trips
  return buf;
}

double run_log::epoch_samples_per_second(std::uint64_t g) const {
  const double seconds = std::chrono::duration<double>(clock::now() - epoch_start_).count();
  return seconds > 0 ? static_cast<double>((g + 1 - epoch_first_) * batch_) / seconds : 0;
}

void run_log::write_curve() const {
  if (o_.curve.empty()) return;
  write_text(o_.curve + ".csv", curve_csv(curve_));
  using point = curve_point;
  const std::vector<plot::panel<point>> panels{
      {"training loss", {{[](const point& p) { return p.loss; }, "#1f77b4", false}}},
      {"accuracy: training (line), test (dots)",
       {{[](const point& p) { return p.accuracy; }, "#1f77b4", false}, {[](const point& p) { return p.test_accuracy; }, "#d62728", true}},
       true}};
  const std::string title = "Fashion-MNIST " + o_.model + " " + o_.precision + ", batch " + std::to_string(batch_);
  write_text(o_.curve + ".svg", plot::curve_svg(curve_, title, panels));
}

// The part of the train steps that runs these options (each part is its own translation unit; the
// sanitizer build has the single-device parts only, TESSEL_FM_DATA_PARALLEL 0).
template <class Model, class C>
int run_steps(const options& o, const dataset& d) {
  if (o.batch_size == 32 || o.batch_size == 64) return run_part<Model, C, step_part::small_batches>(o, d);
  if (o.batch_size == 256) return run_part<Model, C, step_part::large_batches>(o, d);
#if TESSEL_FM_DATA_PARALLEL
  constexpr bool mlp_f32 = std::is_same_v<Model, mlp<>> && std::is_same_v<C, float>;
#if TESSEL_FM_PROCESSES
  if constexpr (std::is_same_v<Model, mlp<>> || std::is_same_v<C, float>) {
    if (o.processes == 2) {
      if constexpr (mlp_f32)
        if (o.tensor_parallel) return run_part<Model, C, step_part::tensor_parallel_over_processes>(o, d);
      return run_part<Model, C, step_part::over_processes>(o, d);
    }
  }
#endif
  if constexpr (mlp_f32) {
    if (o.fully_sharded) return run_part<Model, C, step_part::fully_sharded>(o, d);
    if (o.tensor_parallel) return run_part<Model, C, step_part::tensor_parallel>(o, d);
  }
  if (o.devices > 1) return run_part<Model, C, step_part::data_parallel>(o, d);
#endif
  return run_part<Model, C, step_part::large_batches>(o, d);
}

template <class Model, class C>
int run_batch(const options& o, const dataset& d) {
  const int status = run_steps<Model, C>(o, d);
  if (status != not_in_part) return status;
  std::fprintf(stderr, "fashion_mnist: no train step of this build runs these options (batch %d on %d devices)\n", o.batch_size,
               o.devices);
  return 2;
}

}  // namespace fashion_mnist

int main(int argc, char** argv) {
  using namespace fashion_mnist;
  bool writer = true;  // process 0 of a run over processes, or the only one
#if TESSEL_FM_PROCESSES
  if (tessel::distributed::started_by_mpirun()) {
    tessel::distributed::init(argc, argv);
    writer = tessel::distributed::process_index() == 0;
  }
#endif
  options o;
  if (const auto stop = parse(argc, argv, o)) return *stop;
  if (!o.write_tfrecord.empty()) {
    try {
      return write_tfrecord_shards(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fashion_mnist: --write-tfrecord: %s\n", e.what());
      return tessel::io::exit_failed;
    }
  }
  if (!writer) {  // the same training; process 0 reports it and writes the files
    o.trace.clear();
    o.curve.clear();
    if (!std::freopen("/dev/null", "w", stdout)) return 1;
  }
  if (writer && !check_outputs(o)) return tessel::io::exit_refused;
  if (!o.checkpoint_dir.empty())
    if (const auto status = prepare_directory(o, writer)) return *status;
  dataset d;
  try {
    d = load(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
  try {
    const bool bf16 = o.precision == "bf16";
#if TESSEL_FM_ALL_MODELS
    if (o.model == "cnn") return bf16 ? run_batch<cnn<>, tessel::bfloat16>(o, d) : run_batch<cnn<>, float>(o, d);
    return bf16 ? run_batch<mlp<>, tessel::bfloat16>(o, d) : run_batch<mlp<>, float>(o, d);
#else
    if (o.model != "mlp" || bf16) {
      std::fprintf(stderr, "fashion_mnist: --model %s --precision %s is not in this build: the sanitizer build "
                   "(TESSEL_SANITIZE) compiles the MLP in f32 only\n", o.model.c_str(), o.precision.c_str());
      return 2;
    }
    return run_batch<mlp<>, float>(o, d);
#endif
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "\nfashion_mnist: %s\n", e.what());
    return 1;
  }
}
