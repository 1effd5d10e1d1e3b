// Forward-only programs of the char-level language model, in f32 and compiled once: the validation loss
// (one instantiation per bucket) and sampling (one instantiation: a context of 256 characters, the
// next character drawn by tessel::random::categorical inside the jitted function).
#include "char_lm.hpp"

#include <cmath>
#include <variant>

namespace char_lm {

namespace {

struct eval_fn {
  template <class P, class I, class Y, class M>
  constexpr auto operator()(P p, I inputs, Y targets, M mask) const {
    auto ce = tessel::nn::softmax_cross_entropy_with_integer_labels(model::logits<float>(p, inputs, mask), targets);
    return tessel::sum(ce * tessel::convert_element_type<float>(mask));
  }
};

// The next character after position pos (s32[1]) of tokens s32[1,256] (real up to pos), drawn from
// softmax(logits / temperature).
struct sample_fn {
  template <class P, class I, class M, class Pos, class K, class InvT>
  constexpr auto operator()(P p, I tokens, M mask, Pos pos, K key, InvT inverse_temperature) const {
    auto logits = model::logits<float>(p, tokens, mask);  // [1,256,V]
    auto row = tessel::reshape<shape<1, model::V>>(tessel::take<1>(logits, pos));
    return tessel::random::categorical(key, row * tessel::broadcast_to<shape<1, model::V>>(inverse_temperature));
  }
};

}  // namespace

double validation_bits(const params_t& p, const std::vector<std::vector<int32>>& chunks) {
  static const auto eval = tessel::jit(eval_fn{});
  auto stream = td::from_vector(chunks) | td::bucket_by_length<bucket_64, bucket_128, bucket_256>();
  double nats = 0, chars = 0;
  while (auto b = stream.next()) {
    std::visit(
        [&](const auto& batch) {
          auto lb = to_lm_batch(batch);
          nats += static_cast<double>(eval(p, lb.inputs, lb.targets, lb.mask)[0]);
          chars += static_cast<double>(lb.chars);
        },
        *b);
  }
  return chars > 0 ? nats / chars / std::log(2.0) : std::nan("");  // no validation records: not measured
}

std::string sample(const params_t& p, const std::string& prompt, std::size_t length, float temperature, tessel::random::key k) {
  static const auto next = tessel::jit(sample_fn{});
  constexpr std::size_t S = longest;
  tensor<int32, shape<1, S>> tokens;
  tensor<bool, shape<1, S>> mask;
  for (std::size_t j = 0; j < S; ++j) tokens[j] = 0, mask[j] = false;
  std::size_t n = 1;  // position 0: the start token
  mask[0] = true;
  for (const char c : prompt) {
    if (n == S) break;
    tokens[n] = static_cast<unsigned char>(c), mask[n] = true, ++n;
  }
  tensor<int32, shape<1>> pos;
  tensor<float, shape<>> inverse_temperature;
  inverse_temperature[0] = 1.0f / temperature;
  std::string out;
  for (std::size_t i = 0; i < length && n < S; ++i) {
    pos[0] = static_cast<int32>(n - 1);
    const auto c = next(p, tokens, mask, pos, tessel::random::key_data(tessel::random::fold_in(k, static_cast<std::uint32_t>(i))),
                        inverse_temperature)[0];
    out.push_back(static_cast<char>(c));
    tokens[n] = c, mask[n] = true, ++n;
  }
  return out;
}

}  // namespace char_lm
