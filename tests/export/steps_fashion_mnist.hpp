#pragma once
// The Fashion-MNIST steps' batches for the export test: random images in [0, 1), random labels, and the
// cosine schedule's rate at the step, as the example feeds its steps.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "fashion_mnist.hpp"
#include "random_inputs.hpp"
#include "steps.hpp"

namespace tessel::export_test {

template <std::size_t B>
auto fashion_batch(int k) {
  using namespace fashion_mnist;
  const auto seed = static_cast<std::uint32_t>(1000 + k);
  return std::make_tuple(testing::random_tensor<float, shape<B, pixels>>(seed, 0.0, 1.0),
                         testing::random_tensor<std::int32_t, shape<B>>(seed + 1, 0, classes - 1),
                         tensor<float, shape<>>{static_cast<float>(1e-3 * 0.5 * (1 + std::cos(3.14159265358979 * k / 10)))});
}

// Writes `steps` steps of the step make_step gives (model Model, batch B) into dir.
template <class Model, std::size_t B, class Step>
void write_fashion_steps(const std::string& dir, const Step& step, int steps) {
  using namespace fashion_mnist;
  Model params;
  if constexpr (std::is_same_v<Model, mlp<>>) params = init_mlp(random::key_from_seed(0));
  else params = init_cnn(random::key_from_seed(0));
  write_steps(dir, step, params, optimizer{}.init(params), [](int k) { return fashion_batch<B>(k); }, steps);
}

}  // namespace tessel::export_test
