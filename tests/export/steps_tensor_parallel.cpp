// The Fashion-MNIST MLP's Megatron step (jit with shardings over ("data", 2) x ("model", 2)) as XLA runs it.
#include "steps_fashion_mnist.hpp"

namespace tessel::export_test {
void write_tensor_parallel(const std::string& dir, int steps) {
  using namespace fashion_mnist;
  write_fashion_steps<mlp<>, 32>(dir, make_step<float, 4, in_process, layout::tensor_parallel>(), steps);
}
}  // namespace tessel::export_test
