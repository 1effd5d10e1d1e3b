// The char-level GPT (nn/transformer.hpp) at step 0: its loss and the gradient of every parameter
// against PyTorch autograd in float64 on the same weights and batch (rtol 1e-4). The test writes the
// weights, the batch, tessel's loss and gradients into a directory and runs
// `/usr/bin/python3 bench/torch_char_lm.py check DIR`, which recomputes them; it is skipped (saying so)
// only when that Python cannot import torch.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <cmath>
#include <unistd.h>

#include "tessel/jit.hpp"
#include "tessel/nn/transformer.hpp"
#include "tessel/transform/grad.hpp"

#ifndef TESSEL_SOURCE_DIR
#error "TESSEL_SOURCE_DIR must name the source tree (tests/nn/CMakeLists.txt defines it)"
#endif

namespace {
using tessel::shape;
using tessel::tensor;

// Small enough to trace quickly, with every part of the model: 4 heads, 2 layers, padding and a row
// with no real position.
using model = tessel::nn::gpt<tessel::nn::gpt_config{.vocab = 256, .d_model = 32, .heads = 4, .layers = 2, .max_length = 24, .mlp = 64}>;
constexpr std::size_t B = 4, T = 16;

struct loss_fn {
  template <class P, class I, class Y, class M>
  constexpr auto operator()(P p, I inputs, Y targets, M mask) const {
    return model::loss<float>(p, inputs, targets, mask);
  }
};

class tensor_dir {
 public:
  explicit tensor_dir(std::filesystem::path dir) : dir_(std::move(dir)), manifest_(dir_ / "manifest.txt") {}
  template <class T, class S>
  void write(const std::string& name, const tensor<T, S>& t) {
    std::ofstream(dir_ / (name + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(S::size * sizeof(T)));
    manifest_ << name << ' ' << (std::is_same_v<T, float> ? "f32" : std::is_same_v<T, bool> ? "pred" : "s32");
    for (std::size_t i = 0; i < S::rank; ++i) manifest_ << ' ' << S::dims[i];
    manifest_ << '\n';
  }

 private:
  std::filesystem::path dir_;
  std::ofstream manifest_;
};

TEST(GptTorch, LossAndEveryGradientMatchAutogradAtStepZero) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch: the PyTorch reference cannot run here";

  auto p = model::init(tessel::random::key_from_seed(7));
  // Non-trivial LayerNorm gains and biases, so that their gradients are checked away from 1 and 0.
  auto perturb = [](auto& t, std::uint32_t seed, float scale) {
    using S = typename std::remove_cvref_t<decltype(t)>::shape_type;
    auto n = tessel::random::normal<S>(tessel::random::key_from_seed(seed));
    for (std::size_t i = 0; i < S::size; ++i) t.data()[i] += scale * n.data()[i];
  };
  perturb(p.layer.ln1_g, 1, 0.1f), perturb(p.layer.ln1_b, 2, 0.1f), perturb(p.layer.ln2_g, 3, 0.1f);
  perturb(p.layer.ln2_b, 4, 0.1f), perturb(p.lnf_g, 5, 0.1f), perturb(p.lnf_b, 6, 0.1f);
  perturb(p.layer.b_qkv, 7, 0.02f), perturb(p.layer.b_o, 8, 0.02f), perturb(p.layer.b_fc, 9, 0.02f);
  perturb(p.layer.b_proj, 10, 0.02f);

  // Rows of 16, 11 and 3 real positions and one padding row; tokens drawn from printable bytes.
  const std::size_t lengths[B] = {16, 11, 3, 0};
  tensor<std::int32_t, shape<B, T>> inputs, targets;
  tensor<bool, shape<B, T>> mask;
  std::uint32_t s = 12345;
  for (std::size_t r = 0; r < B; ++r)
    for (std::size_t j = 0; j < T; ++j) {
      s = s * 1664525u + 1013904223u;
      const bool real = j < lengths[r];
      inputs[r * T + j] = real ? static_cast<std::int32_t>(32 + (s >> 24) % 95) : 0;
      targets[r * T + j] = real ? static_cast<std::int32_t>(32 + (s >> 16) % 95) : 0;
      mask[r * T + j] = real;
    }

  auto [loss, grads] = tessel::value_and_grad(loss_fn{})(p, inputs, targets, mask);
  ASSERT_TRUE(std::isfinite(loss[0]));
  // Random tokens over 256 classes at initialisation: the loss is about ln 256.
  EXPECT_NEAR(loss[0], std::log(256.0), 0.5);

  const auto dir = std::filesystem::temp_directory_path() / ("tessel_gpt_torch_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    tensor_dir out(dir);
    tessel::tree::for_each_named(p, [&](const std::string& name, const auto& t) { out.write("param." + name, t); });
    tessel::tree::for_each_named(grads, [&](const std::string& name, const auto& t) { out.write("grad." + name, t); });
    out.write("inputs", inputs), out.write("targets", targets), out.write("mask", mask), out.write("loss", loss);
    tensor<std::int32_t, shape<1>> heads;
    heads[0] = static_cast<std::int32_t>(model::H);
    out.write("heads", heads);
  }
  const std::string command =
      "/usr/bin/python3 " TESSEL_SOURCE_DIR "/bench/torch_char_lm.py check " + dir.string() + " 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  std::printf("%s", output.c_str());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("\nmatch"), std::string::npos) << output;
}

}  // namespace
