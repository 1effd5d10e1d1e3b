// The training loop of the Fashion-MNIST example for one model, precision and part of the train steps,
// chosen by the build (TESSEL_FM_CNN, TESSEL_FM_BF16, TESSEL_FM_PART: examples/CMakeLists.txt compiles this
// file once for each), each part with its evaluation steps. The parts are fashion_mnist.hpp's step_part;
// the multi-device ones are left out of the sanitizer build (TESSEL_FM_DATA_PARALLEL 0), and those over
// processes out of a build without OpenMPI (TESSEL_FM_PROCESSES 0).
#include "fashion_mnist.hpp"

#include <type_traits>

#ifndef TESSEL_FM_PART
#error "fashion_mnist_steps.cpp: define TESSEL_FM_PART (0-6, fashion_mnist.hpp's step_part), as examples/CMakeLists.txt does"
#endif

namespace fashion_mnist {

using model_t = std::conditional_t<TESSEL_FM_CNN, cnn<>, mlp<>>;
using compute_t = std::conditional_t<TESSEL_FM_BF16, tessel::bfloat16, float>;
constexpr auto part = static_cast<step_part>(TESSEL_FM_PART);

template <>
int run_part<model_t, compute_t, part>(const options& o, const dataset& d) {
  using Model = model_t;
  using C = compute_t;
  if constexpr (part == step_part::small_batches) {
    if (o.batch_size == 32) return run<Model, 32, C>(o, d);
    if (o.batch_size == 64) return run<Model, 64, C>(o, d);
  } else if constexpr (part == step_part::large_batches) {
    if (o.batch_size == 256) return run<Model, 256, C>(o, d);
    if (o.batch_size == 128) return run<Model, 128, C>(o, d);
  } else if constexpr (part == step_part::data_parallel) {
    if (o.devices == 2) return run<Model, 128, C, 2>(o, d);
    if (o.devices == 4) return run<Model, 128, C, 4>(o, d);
  } else if constexpr (part == step_part::fully_sharded) {
    if (o.devices == 2) return run<Model, 128, C, 2, tessel::in_process, layout::fully_sharded>(o, d);
    if (o.devices == 4) return run<Model, 128, C, 4, tessel::in_process, layout::fully_sharded>(o, d);
  } else if constexpr (part == step_part::tensor_parallel) {
    return run<Model, 128, C, 4, tessel::in_process, layout::tensor_parallel>(o, d);
  } else if constexpr (part == step_part::over_processes) {
    if constexpr (!TESSEL_FM_BF16 && !TESSEL_FM_CNN)
      if (o.fully_sharded) return run<Model, 128, C, 2, tessel::over_processes, layout::fully_sharded>(o, d);
    return run<Model, 128, C, 2, tessel::over_processes>(o, d);
  } else {
    return run<Model, 128, C, 4, tessel::over_processes, layout::tensor_parallel>(o, d);
  }
  return not_in_part;
}

}  // namespace fashion_mnist
