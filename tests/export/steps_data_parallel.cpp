// The Fashion-MNIST MLP's data-parallel step (shard_map over ("data", 2)) as XLA runs it.
#include "steps_fashion_mnist.hpp"

namespace tessel::export_test {
void write_data_parallel(const std::string& dir, int steps) {
  using namespace fashion_mnist;
  write_fashion_steps<mlp<>, 32>(dir, make_step<float, 2, in_process, layout::replicated>(), steps);
}
}  // namespace tessel::export_test
