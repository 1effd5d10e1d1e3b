// The char-LM's train step (jit, f32, bucket of 16 x 64 characters) as XLA runs it: random characters, the
// bucket's mask, and the warm-up cosine schedule's rate.
#include <cstdint>
#include <string>
#include <tuple>

#include "char_lm.hpp"
#include "random_inputs.hpp"
#include "steps.hpp"

namespace tessel::export_test {
void write_char_lm(const std::string& dir, int steps) {
  using namespace char_lm;
  constexpr std::size_t B = 16, L = 64;
  options o;
  o.steps = steps;
  o.warmup = 2;
  auto batch = [&](int k) {
    const auto seed = static_cast<std::uint32_t>(2000 + 3 * k);
    return std::make_tuple(testing::random_tensor<int32, shape<B, L>>(seed, 0, 255), testing::random_tensor<int32, shape<B, L>>(seed + 1, 0, 255),
                           testing::random_tensor<bool, shape<B, L>>(seed + 2), tensor<float, shape<>>{static_cast<float>(learning_rate(o, k))});
  };
  const params_t params = model::init(random::key_from_seed(0));
  write_steps(dir, jit(train_step<float>{}), params, optimizer{}.init(params), batch, steps);
}
}  // namespace tessel::export_test
