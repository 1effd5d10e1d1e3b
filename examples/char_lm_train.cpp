// The training loop of the char-level language model, for both compute dtypes. The bucket of each batch
// (64, 128 or 256 characters) is chosen at run time by the pipeline, and std::visit calls the train step
// instantiated for that bucket's shapes (train_on, char_lm_step.cpp): one compiled step per bucket.
#include "char_lm.hpp"

#include "curve_svg.hpp"

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <type_traits>
#include <variant>

namespace char_lm {

namespace {
// PREFIX.svg from PREFIX.csv: the whole run's curve, a resumed run's lines included (the evaluations a
// killed run wrote after its last checkpoint come again after the resume, with the same values: the last
// line of each step is drawn). False, with the reason on stderr, when the CSV cannot be read.
bool write_curve_svg(const std::string& prefix, const std::string& title) {
  struct point {
    std::uint64_t step = 0;
    double train = 0, validation = 0;
  };
  std::ifstream in(prefix + ".csv");
  std::string line;
  if (!in || !std::getline(in, line) || line != "step,train_bits,validation_bits") {
    std::fprintf(stderr, "char_lm: cannot draw %s.svg: %s.csv has no header 'step,train_bits,validation_bits'\n", prefix.c_str(),
                 prefix.c_str());
    return false;
  }
  std::map<std::uint64_t, point> by_step;
  for (int number = 2; std::getline(in, line); ++number) {
    point p;
    p.validation = NAN;  // an empty field: no validation records
    if (std::sscanf(line.c_str(), "%" SCNu64 ",%lf,%lf", &p.step, &p.train, &p.validation) < 2) {
      std::fprintf(stderr, "char_lm: cannot draw %s.svg: line %d of %s.csv is not step,train,validation: '%s'\n",
                   prefix.c_str(), number, prefix.c_str(), line.c_str());
      return false;
    }
    by_step[p.step] = p;
  }
  std::vector<point> curve;
  for (const auto& [step, p] : by_step) curve.push_back(p);
  const std::vector<plot::panel<point>> panels{
      {"bits per character: training (blue), validation (red)",
       {{[](const point& p) { return p.train; }, "#1f77b4", false}, {[](const point& p) { return p.validation; }, "#d62728", false}}}};
  std::ofstream out(prefix + ".svg");
  out << plot::curve_svg(curve, title, panels);
  if (!out.flush()) {
    std::fprintf(stderr, "char_lm: cannot write %s.svg\n", prefix.c_str());
    return false;
  }
  return true;
}

// JSON has no NaN: a figure not measured in this run (no evaluation window, no sample, no validation
// records) is null, in the progress lines too.
std::string figure(double v, int digits) {
  char text[32];
  if (std::isnan(v)) return "null";
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}
}  // namespace

template <class C>
int train(const options& o, const corpus& data) {
  using clock = std::chrono::steady_clock;
  namespace profile = tessel::profile;
  constexpr const char* precision = std::is_same_v<C, float> ? "f32" : "bf16";
  const auto root = tessel::random::key_from_seed(o.seed);
  const auto keys = tessel::random::split<3>(root);
  const auto init_key = keys[0], shuffle_key = keys[1], sample_key = keys[2];
  params_t params = model::init(init_key);
  state_t opt_state = optimizer{}.init(params);

  auto stream = td::from_vector(data.train.chunks) | td::shuffle(shuffle_key) |
                td::bucket_by_length<bucket_64, bucket_128, bucket_256>() | td::prefetch(2);

  std::uint64_t first = 0;
  double resumed_window[2] = {0, 0};  // window_loss, window_chars
  if (o.directory) {
    if (auto last = o.directory->take_resume()) {
      last->load(tessel::io::slot("params", params), tessel::io::slot("opt_state", opt_state));
      stream.restore(td::stream_position::from_json(last->get("data_position")));
      // The training loss summed since the last evaluation, so that the curve's next point averages the
      // same steps as an uninterrupted run's.
      for (auto [key, value] : {std::pair{"window_loss", &resumed_window[0]}, std::pair{"window_chars", &resumed_window[1]}})
        *value = std::strtod(last->get(key).c_str(), nullptr);
      first = last->step;
      std::printf("resumed from %s (step %" PRIu64 ") of run %s\n", last->path.c_str(), first, o.directory->run().c_str());
    }
  }

  std::optional<tensor_dir> exported;
  if (!o.export_dir.empty()) {
    exported.emplace(o.export_dir);
    exported->write_params("init.", params);
  }
  std::FILE* curve = nullptr;
  if (!o.curve.empty()) {
    curve = std::fopen((o.curve + ".csv").c_str(), first == 0 ? "w" : "a");
    if (!curve) {
      std::fprintf(stderr, "char_lm: cannot write %s.csv\n", o.curve.c_str());
      return 1;
    }
    std::fseek(curve, 0, SEEK_END);
    if (std::ftell(curve) == 0) {  // a new run, or a resumed one killed before its curve had a line
      std::fprintf(curve, "step,train_bits,validation_bits\n");
      std::fflush(curve);
    }
  }
  if (!o.trace.empty()) {
    profile::enable();
    profile::set_thread_name("main");
  }

  const double ln2 = std::log(2.0);
  std::map<std::size_t, std::set<const void*>> plans;  // bucket length -> the plans its steps ran
  std::map<std::size_t, std::uint64_t> per_bucket;
  double train_seconds = 0, wait_seconds = 0, window_loss = resumed_window[0], window_chars = resumed_window[1];
  double last_train_bits = NAN, validation = NAN;
  td::vocabulary::count sample_letters;  // of the last sample; at the end, of final_samples samples
  constexpr std::uint32_t final_samples = 8;
  std::uint64_t trained_chars = 0, positions = 0, window_steps = 0;
  tensor<float, shape<>> lr;
  std::printf("char_lm: %zu layers, d_model %zu, %zu heads, %s, %d steps (from %" PRIu64 "), buckets 64x16 128x8 256x4, "
              "%d device%s\n",
              model::L, model::D, model::H, precision, o.steps, first, o.devices, o.devices == 1 ? "" : "s (data parallel)");
  std::fflush(stdout);

  for (std::uint64_t g = first; g < static_cast<std::uint64_t>(o.steps); ++g) {
    const auto t0 = clock::now();
    std::optional<typename decltype(stream)::value_type> b;
    {
      profile::scope scope("data.next");
      b = stream.next();
      if (!b) b = stream.next();  // the end of an epoch: the next one starts
    }
    const auto t1 = clock::now();
    wait_seconds += std::chrono::duration<double>(t1 - t0).count();
    lr[0] = static_cast<float>(learning_rate(o, static_cast<std::int64_t>(g)));
    float loss_value = 0, norm_value = 0;
    std::size_t chars = 0;
    std::visit(
        [&](const auto& batch) {
          constexpr std::size_t B = std::remove_cvref_t<decltype(batch)>::batch_size;
          constexpr std::size_t L = std::remove_cvref_t<decltype(batch)>::length;
          profile::step ps(g, B * L);
          auto lb = to_lm_batch(batch);
          ++per_bucket[L];
          if (exported) {
            const std::string prefix = "step." + std::to_string(g) + ".";
            exported->write(prefix + "inputs", lb.inputs), exported->write(prefix + "targets", lb.targets);
            exported->write(prefix + "mask", lb.mask), exported->write(prefix + "lr", lr);
          }
          profile::scope scope("train_step");
          step_result r;
          if constexpr (std::is_same_v<C, float>) {  // the data-parallel steps are compiled for f32 (char_lm.cpp)
            r = o.devices == 4 ? train_on<C, B, L, 4>(params, opt_state, lb, lr)
                : o.devices == 2 ? train_on<C, B, L, 2>(params, opt_state, lb, lr)
                                 : train_on<C, B, L, 1>(params, opt_state, lb, lr);
          } else {
            r = train_on<C, B, L, 1>(params, opt_state, lb, lr);
          }
          plans[L].insert(r.plan);
          loss_value = r.loss, norm_value = r.norm;
          chars = lb.chars;
          positions += B * L;
        },
        *b);
    train_seconds += std::chrono::duration<double>(clock::now() - t1).count();
    if (!std::isfinite(loss_value)) {
      std::fprintf(stderr, "char_lm: the loss at step %" PRIu64 " is not finite (%g); stopping\n", g, static_cast<double>(loss_value));
      return 1;
    }
    if (exported) {
      tensor<float, shape<>> l;
      l[0] = loss_value;
      exported->write("step." + std::to_string(g) + ".loss", l);
    }
    trained_chars += chars;
    window_loss += static_cast<double>(loss_value) * static_cast<double>(chars);
    window_chars += static_cast<double>(chars);
    ++window_steps;
    const bool last = g + 1 == static_cast<std::uint64_t>(o.steps);
    if (o.eval_every > 0 && ((g + 1) % static_cast<std::uint64_t>(o.eval_every) == 0 || last)) {
      profile::scope scope("evaluate");
      last_train_bits = window_loss / window_chars / ln2;
      validation = validation_bits(params, data.validation.chunks);
      std::printf("step %5" PRIu64 "  train %.4f bits/char  validation %s bits/char  lr %.2e  |g| %.3f  %.0f tokens/s  wait %.2f s\n",
                  g + 1, last_train_bits, figure(validation, 4).c_str(), static_cast<double>(lr[0]), static_cast<double>(norm_value),
                  static_cast<double>(trained_chars) / train_seconds, wait_seconds);
      if (curve) {  // on disk before this step's checkpoint, so that a resumed run's CSV misses no line
        std::fprintf(curve, "%" PRIu64 ",%.6f,%s\n", g + 1, last_train_bits, std::isnan(validation) ? "" : figure(validation, 6).c_str());
        std::fflush(curve);
      }
      window_loss = window_chars = 0, window_steps = 0;
    }
    if (o.sample_every > 0 && ((g + 1) % static_cast<std::uint64_t>(o.sample_every) == 0 || last)) {
      profile::scope scope("sample");
      const auto step_key = tessel::random::fold_in(sample_key, static_cast<std::uint32_t>(g));
      const std::string text = sample(params, o.prompt, static_cast<std::size_t>(o.sample_length), o.temperature, step_key);
      sample_letters = data.train_words.known_letters(text);
      std::printf("sample at step %" PRIu64 " (%.0f%% of its words' letters in words seen twice in training): %s%s\n----\n", g + 1,
                  100 * sample_letters.share(), o.prompt.c_str(), text.c_str());
      if (last) {  // one sample says little: the summary's share pools it with more drawn from the same model
        for (std::uint32_t i = 1; i < final_samples; ++i) {
          const auto more = data.train_words.known_letters(
              sample(params, o.prompt, static_cast<std::size_t>(o.sample_length), o.temperature, tessel::random::fold_in(step_key, i)));
          sample_letters.known += more.known;
          sample_letters.total += more.total;
        }
        std::printf("%u samples at step %" PRIu64 ": %.0f%% of their words' letters in words seen twice in training\n", final_samples,
                    g + 1, 100 * sample_letters.share());
      }
    }
    std::fflush(stdout);
    if (o.directory && ((o.save_every > 0 && (g + 1) % static_cast<std::uint64_t>(o.save_every) == 0) || last)) {
      profile::scope scope("checkpoint.snapshot");
      tessel::io::snapshot snap(g + 1);
      char window[2][40];  // exact: hexadecimal floating point
      std::snprintf(window[0], sizeof window[0], "%a", window_loss);
      std::snprintf(window[1], sizeof window[1], "%a", window_chars);
      snap.add("params", params).add("opt_state", opt_state).set("data_position", stream.position().to_json());
      snap.set("window_loss", window[0]).set("window_chars", window[1]);
      o.directory->save(std::move(snap));
    }
  }
  if (o.directory) o.directory->checkpoints().wait();
  if (std::isnan(validation)) validation = validation_bits(params, data.validation.chunks);  // resumed at the end; NaN: none
  bool drawn = true;  // the curve's picture, when asked for; a failure is reported after the summary
  if (curve) {
    std::fclose(curve);
    const std::string title = "char_lm " + std::to_string(model::L) + " layers, d_model " + std::to_string(model::D) + ", " +
                              precision + ", " + std::to_string(o.steps) + " steps";
    drawn = write_curve_svg(o.curve, title);
  }
  if (!o.trace.empty()) {
    profile::disable();
    profile::write_chrome_trace(o.trace);
  }
  std::string plan_counts, bucket_steps;
  for (const auto& [length, set] : plans)
    plan_counts += (plan_counts.empty() ? "" : ", ") + ("\"" + std::to_string(length) + "\": " + std::to_string(set.size()));
  for (const auto& [length, n] : per_bucket)
    bucket_steps += (bucket_steps.empty() ? "" : ", ") + ("\"" + std::to_string(length) + "\": " + std::to_string(n));
  // The share of the training time the devices spent in collectives (the gradients' all-reduce).
  const double all_reduce_share =
      train_seconds > 0 ? static_cast<double>(tessel::kernels::collective_nanoseconds()) * 1e-9 / train_seconds : 0.0;
  std::printf("{\"precision\": \"%s\", \"layers\": %d, \"devices\": %d, \"steps\": %d, \"first_step\": %" PRIu64
              ", \"train_bits\": %s, \"validation_bits\": %s, \"sample_known_letters\": %s, \"tokens_per_second\": %.0f, \"positions_per_second\": %.0f, "
              "\"train_seconds\": %.2f, \"all_reduce_share\": %.3f, \"input_wait_seconds\": %.3f, \"prefetch_wait_seconds\": %.3f, "
              "\"step_plans\": {%s}, \"steps_per_bucket\": {%s}, \"params_digest\": \"%s\"}\n",
              precision, static_cast<int>(model::L), o.devices, o.steps, first, figure(last_train_bits, 4).c_str(), figure(validation, 6).c_str(),
              figure(sample_letters.total == 0 ? NAN : sample_letters.share(), 3).c_str(),
              train_seconds > 0 ? static_cast<double>(trained_chars) / train_seconds : 0.0,
              train_seconds > 0 ? static_cast<double>(positions) / train_seconds : 0.0, train_seconds, all_reduce_share, wait_seconds,
              std::chrono::duration<double>(stream.stats().consumer_wait).count(), plan_counts.c_str(), bucket_steps.c_str(),
              params_digest(params).c_str());
  return drawn ? 0 : 1;
}

template int train<float>(const options&, const corpus&);
template int train<tessel::bfloat16>(const options&, const corpus&);

}  // namespace char_lm
