// Trains a classifier on Fashion-MNIST (Debian's dataset-fashion-mnist) with tessel: the whole train
// step (forward, loss, gradients, Adam update) is one jitted function, planned at compile time.
//
//   fashion_mnist [--model mlp|cnn] [--epochs 10] [--batch-size 128] [--learning-rate 0.001]
//                 [--precision f32|bf16] [--seed 0] [--data-dir DIR] [--steps N]
//                 [--checkpoint-dir DIR [--resume] [--save-every N] [--keep N]] [--trace FILE] [--curve PREFIX]
//
// This file: flags, data loading, the curve (CSV, SVG), progress and checkpoint bookkeeping (run_log).
// The models and the train step are in fashion_mnist.hpp, instantiated by fashion_mnist_steps.cpp.
#include "fashion_mnist.hpp"

#include <unistd.h>

#include <cinttypes>
#include <sstream>
#include <stdexcept>

namespace fashion_mnist {

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
               "  --checkpoint-dir DIR   save checkpoints (parameters, Adam state, step, random key, data position)\n"
               "                         to DIR/ckpt-<step>.safetensors: atomically, on a background thread, at the\n"
               "                         end of every epoch and every --save-every steps; the last --keep are kept\n"
               "  --resume               continue from the newest intact checkpoint in --checkpoint-dir (a damaged\n"
               "                         newest file is skipped); the result is bit-identical to an uninterrupted run\n"
               "                         with the same flags (give the same --epochs, --steps, --learning-rate)\n"
               "  --save-every N         also save every N steps (default: only at the end of each epoch)\n"
               "  --keep N               checkpoints kept (default 3)\n"
               "  --trace FILE           write a Chrome trace (Perfetto, chrome://tracing): steps, named scopes, the\n"
               "                         executor's kernels, per-step time and throughput counters, the warm-up mark\n"
               "  --curve PREFIX         write the loss/accuracy curve to PREFIX.csv and PREFIX.svg (default with\n"
               "                         --checkpoint-dir: DIR/curve; without it: no curve)\n"
               "  --help                 this text\n"
               "On a terminal a progress bar shows each epoch; otherwise one line per epoch. The last line is a\n"
               "JSON summary: test_accuracy, epoch_seconds, samples_per_second, peak_bytes (the train step's plan).\n");
}

std::optional<options> parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      std::exit(0);
    }
    if (arg == "--resume") {
      o.resume = true;
      continue;
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
      else if (arg == "--checkpoint-dir") o.checkpoint_dir = value;
      else if (arg == "--save-every") o.save_every = std::stoi(value);
      else if (arg == "--keep") o.keep = std::stoi(value);
      else if (arg == "--trace") o.trace = value;
      else if (arg == "--curve") o.curve = value;
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
  if (o.save_every < 0 || o.keep < 1 || ((o.resume || o.save_every > 0) && o.checkpoint_dir.empty())) {
    std::fprintf(stderr, "fashion_mnist: --resume and --save-every need --checkpoint-dir; --save-every >= 0, --keep >= 1\n");
    return std::nullopt;
  }
  if (o.curve.empty() && !o.checkpoint_dir.empty()) o.curve = (std::filesystem::path(o.checkpoint_dir) / "curve").string();
  return o;
}

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

// Two panels: training loss, and training (line) and test (dots) accuracy, against the step.
std::string curve_svg(const std::vector<curve_point>& curve, const std::string& title) {
  constexpr double w = 440, h = 300, left = 60, top = 40, right = 20, bottom = 40;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"320\" font-family=\"sans-serif\" "
                    "font-size=\"12\">\n<rect width=\"900\" height=\"320\" fill=\"white\"/>\n";
  char buf[1024];
  const double max_step = curve.empty() ? 1.0 : std::max<double>(1.0, static_cast<double>(curve.back().step));
  auto panel = [&](double x0, const char* name, double lo, double hi, auto value, const char* color, bool dots) {
    const double pw = w - left - right, ph = h - top - bottom;
    auto px = [&](double step) { return x0 + left + pw * step / max_step; };
    auto py = [&](double v) { return top + ph * (1.0 - (v - lo) / (hi - lo)); };
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n",
                  x0 + left, top, pw, ph, x0 + left + pw / 2, top - 8, name, x0 + left - 4, top + 4, hi, x0 + left - 4,
                  top + ph, lo, x0 + left + pw / 2, top + ph + 28, x0 + left + pw, top + ph + 16, max_step);
    svg += buf;
    std::string points;
    for (const curve_point& p : curve) {
      const double v = value(p);
      if (std::isnan(v)) continue;
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(static_cast<double>(p.step)), py(std::clamp(v, lo, hi)));
      if (dots) {
        std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(static_cast<double>(p.step)),
                      py(std::clamp(v, lo, hi)), color);
        svg += buf;
      } else {
        points += buf;
      }
    }
    if (!points.empty()) svg += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"1.5\" points=\"" + points + "\"/>\n";
  };
  double max_loss = 0.1;
  for (const curve_point& p : curve) max_loss = std::max(max_loss, p.loss);
  panel(0, "training loss", 0, max_loss, [](const curve_point& p) { return p.loss; }, "#1f77b4", false);
  panel(450, "accuracy: training (line), test (dots)", 0.5, 1.0, [](const curve_point& p) { return p.accuracy; }, "#1f77b4", false);
  panel(450, "", 0.5, 1.0, [](const curve_point& p) { return p.test_accuracy; }, "#d62728", true);
  svg += "<text x=\"450\" y=\"16\" text-anchor=\"middle\" font-size=\"14\">" + title + "</text>\n</svg>\n";
  return svg;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  tessel::io::write_file_atomically(path, [&](tessel::io::output_file& out) { out.write(text); });
}

run_log::run_log(const options& o, std::size_t batch, std::size_t steps, std::size_t peak_bytes)
    : o_(o), batch_(batch), steps_(steps), total_(static_cast<std::uint64_t>(o.epochs) * steps), peak_bytes_(peak_bytes) {
  bar_.set_batch(static_cast<double>(batch));
  if (!o.checkpoint_dir.empty())
    ckpt_.emplace(o.checkpoint_dir, tessel::io::checkpoint_options{.keep = static_cast<std::size_t>(o.keep)});
}

std::optional<tessel::io::loaded_checkpoint> run_log::resume(tessel::random::key& shuffle_key) {
  if (!o_.resume) return std::nullopt;
  auto last = ckpt_->restore_latest();
  if (!last) {
    bar_.line("no checkpoint in " + o_.checkpoint_dir + ": starting from step 0");
    return std::nullopt;
  }
  for (const std::string& s : last->skipped) bar_.line("skipped a damaged checkpoint: " + s);
  const std::string want = describe(o_.model, o_.precision, std::to_string(batch_), std::to_string(steps_));
  const std::string have = describe(last->get("model"), last->get("precision"), last->get("batch_size"), last->get("steps_per_epoch"));
  if (want != have) throw std::runtime_error(last->path.string() + " is a checkpoint of " + have + "; these flags train " + want);
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
            std::to_string(position.epoch + 1) + ", batch " + std::to_string(position.index / batch_) + ")");
  epoch_first_ = first_;
  return last;
}

void run_log::start() {
  epoch_start_ = clock::now();
  if (o_.trace.empty()) return;
  tessel::profile::enable();
  tessel::profile::set_thread_name("main");
  tessel::profile::record_peak_memory(peak_bytes_);
}

void run_log::after_step(std::uint64_t g, double loss, double acc, double seconds) {
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
  snap.set_key(shuffle_key)
      .set("data", tessel::data::stream_position{done / steps_, (done % steps_) * batch_, {}}.to_json())
      .set("model", o_.model)
      .set("precision", o_.precision)
      .set("batch_size", std::to_string(batch_))
      .set("steps_per_epoch", std::to_string(steps_))
      .set("epoch_loss_sum", exact(epoch_loss_))
      .set("epoch_accuracy_sum", exact(epoch_acc_))
      .set("window_loss_sum", exact(window_loss_))
      .set("window_accuracy_sum", exact(window_acc_))
      .set("window_steps", std::to_string(window_steps_))
      .set("curve", curve_csv(curve_));
  ckpt_->save(std::move(snap));
}

void run_log::finish() {
  if (ckpt_) ckpt_->wait();
  if (!o_.trace.empty()) {
    tessel::profile::disable();
    tessel::profile::write_chrome_trace(o_.trace);
    const auto summary = tessel::profile::summarize();
    bar_.line("trace: " + o_.trace + " (" + std::to_string(summary.events) + " events, " + std::to_string(summary.steps) + " steps)");
  }
  const double samples_per_second = trained_ > 0 ? static_cast<double>(trained_ * batch_) / train_seconds_ : 0;
  const double epoch_seconds = samples_per_second > 0 ? static_cast<double>(steps_ * batch_) / samples_per_second : 0;
  std::printf("{\"model\": \"%s\", \"precision\": \"%s\", \"batch_size\": %zu, \"epochs\": %d, \"steps\": %" PRIu64
              ", \"resumed_from\": %" PRIu64 ", \"test_accuracy\": %.4f, \"epoch_seconds\": %.3f, \"samples_per_second\": %.0f, "
              "\"peak_bytes\": %zu}\n",
              o_.model.c_str(), o_.precision.c_str(), batch_, o_.epochs, total_, first_, accuracy_, epoch_seconds,
              samples_per_second, peak_bytes_);
}

std::string run_log::describe(const std::string& model, const std::string& precision, const std::string& batch,
                            const std::string& steps) {
  return model + " " + precision + " batch " + batch + ", " + steps + " steps an epoch";
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
  write_text(o_.curve + ".svg", curve_svg(curve_, "Fashion-MNIST " + o_.model + " " + o_.precision + ", batch " + std::to_string(batch_)));
}

}  // namespace fashion_mnist

int main(int argc, char** argv) {
  using namespace fashion_mnist;
  const auto o = parse(argc, argv);
  if (!o) return 2;
  dataset d;
  try {
    d = load(*o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
  try {
    const bool bf16 = o->precision == "bf16";
    if (o->model == "cnn") return bf16 ? run_batch<cnn<>, tessel::bfloat16>(*o, d) : run_batch<cnn<>, float>(*o, d);
    return bf16 ? run_batch<mlp<>, tessel::bfloat16>(*o, d) : run_batch<mlp<>, float>(*o, d);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nfashion_mnist: %s\n", e.what());
    return 1;
  }
}
